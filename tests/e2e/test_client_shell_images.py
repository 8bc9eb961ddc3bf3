"""A shell call's card and terminal, and prompt images, through a real `zeroclaw acp`:
live output, the client's ``terminal/*`` (``[acp] client_terminal``), images sent to a
``vision`` provider in its wire shape (the fake model servers of tests/e2e/fake_llm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import JsonDict, allow_once, spawn_acp
from tests.e2e.offers_helpers import (
    CEILING_SECS,
    initialize,
    offered_session,
    output_text,
    run_tools,
    tool_line,
)
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


# --------------------------------------------------------------------------- shell output

ANY_COMMAND: JsonDict = {"allowed_commands": ["*"], "block_high_risk_commands": False}


async def test_a_running_shell_call_streams_its_output_into_its_card(tmp_path: Path) -> None:
    """The command waits for a file the test creates only once the card showed the first
    line: the live update must arrive while the command still runs."""
    config_dir = write_config(tmp_path / "cfg", echo_config(risk=ANY_COMMAND))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "echo first; until test -e go; do sleep 0.05; done; echo second"
    live: list[JsonDict] = []
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await initialize(client)
            session_id = (await client.result("session/new", {"cwd": str(workspace)}))["sessionId"]
            request_id = await client.prompt_request(
                session_id, tool_line("shell", {"command": command})
            )
            while True:
                message = await client.receive()
                if message.get("method") == "session/request_permission":
                    await client.send(
                        {"jsonrpc": "2.0", "id": message["id"], "result": allow_once(message)}
                    )
                    continue
                if message.get("id") == request_id:
                    break
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") != "tool_call_update":
                    continue
                if "status" not in update:
                    live.append(update)
                    if "first" in output_text(update):
                        (workspace / "go").touch()
                else:
                    final = update
    assert live, "no live output before the call finished"
    assert output_text(live[0]) == "first\n"
    assert live[0]["toolCallId"] == final["toolCallId"]
    assert final["status"] == "completed"
    assert output_text(final) == "first\nsecond"


class EditorTerminal:
    """A client with terminals: ``terminal/*`` answered as a finished command whose output
    is ``output``; permission requests allowed."""

    def __init__(self, output: str, exit_code: int = 0) -> None:
        self.output = output
        self.exit_code = exit_code
        self.calls: list[JsonDict] = []

    def __call__(self, request: JsonDict) -> JsonDict:
        method = request["method"]
        if method == "session/request_permission":
            return allow_once(request)
        self.calls.append(request)
        if method == "terminal/create":
            return {"terminalId": "term-1"}
        if method == "terminal/wait_for_exit":
            return {"exitCode": self.exit_code}
        if method == "terminal/output":
            status = {"exitCode": self.exit_code}
            return {"output": self.output, "truncated": False, "exitStatus": status}
        assert method == "terminal/release", request
        return {}


async def test_client_terminal_runs_the_shell_in_the_editors_terminal(tmp_path: Path) -> None:
    document = echo_config()
    document["acp"] = {"client_terminal": True}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    editor = EditorTerminal("made in the editor\n")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"terminal": True})
            [ran, refused] = await run_tools(
                client,
                session_id,
                tool_line("shell", {"command": "echo hi > made-here.txt"}),
                tool_line("shell", {"command": "cat $(ls)"}),
                on_request=editor,
            )
    methods = [call["method"] for call in editor.calls]
    assert methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    create = editor.calls[0]["params"]
    assert create["sessionId"] == session_id
    assert create["args"] == ["-c", "echo hi > made-here.txt"]
    assert create["cwd"] == str(workspace)
    assert all(call["params"]["terminalId"] == "term-1" for call in editor.calls[1:])
    # The card embeds the terminal while it runs and keeps it when the call completes.
    embedded = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update"
        and {"type": "terminal", "terminalId": "term-1"} in u.get("content", [])
    ]
    assert [u.get("status") for u in embedded] == [None, "completed"]
    assert output_text(ran) == "made in the editor"
    assert not (workspace / "made-here.txt").exists()
    # The policy still refuses before anything reaches the client.
    assert refused["status"] == "failed"


async def test_terminal_stays_local_unless_client_terminal_is_on(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    editor = EditorTerminal("never used\n")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"terminal": True})
            [ran] = await run_tools(
                client, session_id, tool_line("shell", {"command": "echo local"}), on_request=editor
            )
    assert editor.calls == []
    assert output_text(ran) == "local"


async def test_a_client_terminal_that_never_exits_is_killed_after_the_timeout(
    tmp_path: Path,
) -> None:
    document = echo_config(runtime={"shell_timeout_secs": 1})
    document["acp"] = {"client_terminal": True}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    editor = EditorTerminal("still going\n")

    def never_exits(request: JsonDict) -> JsonDict | None:
        if request["method"] == "terminal/wait_for_exit":
            editor.calls.append(request)
            return None  # the command never ends
        if request["method"] == "terminal/kill":
            editor.calls.append(request)
            return {}
        return editor(request)

    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"terminal": True})
            [ran] = await run_tools(
                client,
                session_id,
                tool_line("shell", {"command": "echo x"}),
                on_request=never_exits,
            )
    methods = [call["method"] for call in editor.calls]
    assert methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]
    assert ran["status"] == "failed"
    assert output_text(ran).startswith("Error: Command timed out after 1 s")


# --------------------------------------------------------------------------- images

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@pytest.mark.parametrize("provider_type", ["openai", "anthropic"])
async def test_prompt_images_reach_a_vision_provider_in_its_wire_shape(
    tmp_path: Path, provider_type: str
) -> None:
    import base64
    import hashlib

    from tests.e2e.fake_llm import anthropic_text_reply, openai_text_reply, serve_fake_llm

    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    data = base64.b64encode(PNG_BYTES).decode()
    prompt = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image", "mimeType": "image/png", "data": data},
    ]
    reply = anthropic_text_reply if provider_type == "anthropic" else openai_text_reply
    stored = workspace / "uploads" / f"{hashlib.sha256(PNG_BYTES).hexdigest()}.png"
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(reply("A test pattern."), reply("Plain.")) as llm:
            uri = llm.base_url if provider_type == "anthropic" else f"{llm.base_url}/v1"
            entry = {"model": "fake-model", "api_key": "sk-e2e-key", "uri": uri}
            document = echo_config(
                providers={
                    provider_type: {
                        "seeing": {**entry, "vision": True},
                        "blind": dict(entry),
                    }
                },
                agents={
                    "seeing": {"model_provider": f"{provider_type}.seeing"},
                    "blind": {"model_provider": f"{provider_type}.blind"},
                },
                default_agent="seeing",
            )
            config_dir = write_config(tmp_path / "cfg", document)
            async with spawn_acp(config_dir) as client:
                init = await initialize(client)
                assert init["agentCapabilities"]["promptCapabilities"]["image"] is True
                for alias in ("seeing", "blind"):
                    new = await client.result(
                        "session/new", {"cwd": str(workspace), "agentAlias": alias}
                    )
                    response = await client.prompt(new["sessionId"], prompt)
                    assert response["result"]["stopReason"] == "end_turn", response
    assert stored.read_bytes() == PNG_BYTES
    seeing, blind = (request.json()["messages"][-1] for request in llm.requests)
    marker = f"[IMAGE:{stored}]"
    if provider_type == "anthropic":
        assert seeing["content"] == [
            {"type": "text", "text": f"What is in this picture?\n\n{marker}"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": data},
            },
        ]
        assert blind["content"] == [
            {"type": "text", "text": f"What is in this picture?\n\n{marker}"}
        ]
    else:
        assert seeing["content"] == [
            {"type": "text", "text": f"What is in this picture?\n\n{marker}"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        ]
        assert blind["content"] == f"What is in this picture?\n\n{marker}"


async def test_image_capability_follows_the_default_agents_provider(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            init = await initialize(client)
    assert init["agentCapabilities"]["promptCapabilities"]["image"] is False
