"""Tools through the real `zeroclaw acp`: jail escapes refused, deliver_file embedded,
a cancelled shell leaves no process behind."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import JsonDict, RpcPipeClient, allow_once, open_session, spawn_acp
from tests.helpers import echo_config, poll_until, write_config
from tests.server.tool_context import pids_in, process_gone

pytestmark = pytest.mark.e2e

SECRET = "top-secret-outside-the-jail"


def _tool_line(name: str, arguments: dict[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


async def _run_turn(
    config_dir: Path, workspace: Path, prompt: str
) -> tuple[RpcPipeClient, list[JsonDict]]:
    """One prompt turn on a fresh `zeroclaw acp`, approving every permission request;
    returns the client (frames, requests) and the turn's tool_call_update objects."""
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(session_id, prompt, on_request=allow_once)
    assert response["result"]["stopReason"] == "end_turn"
    updates = client.updates(session_id)
    return client, [
        update
        for update in updates
        if update["sessionUpdate"] == "tool_call_update" and update["status"] != "in_progress"
    ]


async def test_jail_escapes_are_refused_without_asking(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".secrets").mkdir(parents=True)
    (workspace / ".secrets" / "key").write_text(SECRET)
    outside = tmp_path / "secret.txt"
    outside.write_text(SECRET)
    (workspace / "link.txt").symlink_to(outside)
    risk = {"forbidden_paths": [".secrets"]}
    config_dir = write_config(tmp_path / "cfg", echo_config(risk=risk))
    attempts = [
        ("file_read", {"path": "../secret.txt"}, "Path escapes workspace directory: ../secret.txt"),
        ("file_read", {"path": str(outside)}, "Path escapes workspace directory"),
        ("file_read", {"path": "link.txt"}, "Path escapes workspace directory: link.txt"),
        ("file_read", {"path": ".secrets/key"}, "forbidden by security policy"),
        ("file_write", {"path": "../pwned.txt", "content": "x"}, "Path escapes workspace"),
        ("file_edit", {"path": "link.txt", "old_string": "top", "new_string": "x"}, "escapes"),
        ("shell", {"command": "cat ../secret.txt"}, "Path escapes workspace directory"),
        ("shell", {"command": "cat link.txt"}, "Path escapes workspace directory: link.txt"),
        ("shell", {"command": "cat $(echo ../secret.txt)"}, "Command substitution"),
        ("deliver_file", {"path": "../secret.txt"}, "Path not allowed by security policy"),
        ("deliver_file", {"path": "link.txt"}, "Path escapes workspace directory"),
        ("content_search", {"pattern": "top", "path": ".."}, "Path escapes workspace"),
        ("glob_search", {"pattern": "../*"}, "Pattern escapes workspace directory"),
    ]
    prompt = "\n".join(_tool_line(name, args) for name, args, _ in attempts)
    client, results = await _run_turn(config_dir, workspace, prompt)
    assert len(results) == len(attempts)
    for (name, _args, reason), result in zip(attempts, results, strict=True):
        assert result["name"] == name
        assert reason in result["rawOutput"], (name, result["rawOutput"])
    # Refused before asking: glob_search/content_search/file_read are auto-approved, and
    # the others were denied by policy, so the client was never asked anything.
    assert client.server_requests == []
    assert not any(SECRET in line for line in client.raw_lines)
    assert not (tmp_path / "pwned.txt").exists()
    assert outside.read_text() == SECRET


async def test_deliver_file_embeds_the_blob_after_approval(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    data = b"# Quarterly report\n\nAll numbers are up.\n"
    (workspace / "report.md").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    uri = f"attachment://deliver/{digest}.md"
    config_dir = write_config(tmp_path / "cfg", echo_config())
    prompt = _tool_line("deliver_file", {"path": "report.md", "title": "Quarterly report"})
    client, [result] = await _run_turn(config_dir, workspace, prompt)
    [permission] = client.server_requests
    assert permission["params"]["toolCall"]["title"] == "Deliver `report.md`"
    assert result["status"] == "completed"
    assert result["title"] == "Quarterly report"
    # A short human line, no machine trailer (the uri travels on the resource).
    assert result["rawOutput"] == f"Delivered report.md ({len(data)} bytes)"
    resources = [
        block["content"]["resource"]
        for block in result["content"]
        if block["content"]["type"] == "resource"
    ]
    assert resources == [
        {"uri": uri, "mimeType": "text/markdown", "blob": base64.b64encode(data).decode()}
    ]
    assert (workspace / "uploads" / f"{digest}.md").read_bytes() == data


@pytest.mark.parametrize("ending", ["session/cancel", "session/close", "stdin EOF"])
async def test_an_interrupted_shell_leaves_no_process_behind(tmp_path: Path, ending: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    risk = {"allowed_commands": ["*"], "block_high_risk_commands": False}
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full", risk=risk))
    command = "sleep 1000 & echo $! > pids; echo $$ >> pids; sleep 1000"
    pids_file = workspace / "pids"
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            request_id = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": _tool_line("shell", {"command": command})},
            )
            await poll_until(lambda: len(pids_in(pids_file)) >= 2)
            pids = pids_in(pids_file)
            assert not any(process_gone(pid) for pid in pids)
            if ending == "session/cancel":
                await client.notify("session/cancel", {"sessionId": session_id})
                response = await client.wait_response(request_id)
                assert response["result"]["stopReason"] == "cancelled"
            elif ending == "session/close":
                closed = await client.call("session/close", {"sessionId": session_id})
                assert "result" in closed, closed
            else:
                await client.close_stdin()  # the server must exit 0, its turns cancelled
        assert client.process.returncode == 0
        await poll_until(lambda: all(process_gone(pid) for pid in pids))
