"""`zeroclaw acp` as a real process: methods, error codes, cancel, permissions, jail, framing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from tests.e2e.helpers import (
    RpcPipeClient,
    allow_once,
    child_env,
    console_script,
    open_session,
    reject_once,
    spawn_acp,
)
from tests.helpers import echo_config, poll_until, rpc_error, write_config

pytestmark = pytest.mark.e2e

CANCEL_MARKER = "[turn cancelled via client]"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "notes.txt").write_text("inside the jail\n")
    return path.resolve()


def texts(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


async def test_every_method_and_its_errors(tmp_path: Path, workspace: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(max_sessions=2))
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            init = await client.call("initialize", {"protocolVersion": 1})
            assert init["result"]["agentCapabilities"]["loadSession"] is True
            new = (await client.call("session/new", {"cwd": str(workspace)}))["result"]
            session_id = new["sessionId"]
            assert new["workspaceDir"] == str(workspace)
            prompt = await client.prompt(session_id, "one two")
            assert prompt["result"] == {
                "sessionId": session_id,
                "stopReason": "end_turn",
                "content": "one two",
                # The echo provider counts words: two in, two out.
                "usage": {"totalTokens": 4, "inputTokens": 2, "outputTokens": 2},
            }
            update = await client.call("session/update", {"sessionId": session_id, "type": "ping"})
            assert update["result"]["status"] == "processed"
            assert (await client.call("session/cancel", {"sessionId": session_id}))["result"] == {}
            errors = {
                "not found": await client.prompt("nope", "x"),
                "missing id": await client.call("session/stop", {}),
                "bad cwd": await client.call("session/new", {"cwd": str(workspace / "notes.txt")}),
                "unknown method": await client.call("session/set_model", {}),
            }
            second = (await client.call("session/new", {"cwd": str(workspace)}))["result"][
                "sessionId"
            ]
            errors["limit"] = await client.call("session/new", {"cwd": str(workspace)})
            stop = await client.call("session/stop", {"sessionId": second})
            assert stop["result"] == {"sessionId": second, "stopped": True}
            errors["already active"] = await client.call("session/load", {"sessionId": session_id})
            assert (await client.call("session/close", {"sessionId": session_id}))["result"] == {}
            loaded = await client.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}
            replayed = client.updates(session_id)[-2:]
            assert [u["sessionUpdate"] for u in replayed] == [
                "user_message_chunk",
                "agent_message_chunk",
            ]
            assert replayed[1]["content"]["text"] == "one two"
            errors["resume unknown"] = await client.call(
                "session/resume", {"sessionId": second + "x"}
            )
    codes = {name: response["error"]["code"] for name, response in errors.items()}
    assert codes == {
        "not found": -32000,
        "missing id": -32602,
        "bad cwd": -32602,
        "unknown method": -32601,
        "limit": -32001,
        "already active": -32602,
        "resume unknown": -32000,
    }
    assert errors["unknown method"]["error"]["message"] == "Method not found: session/set_model"
    assert "nope" in errors["not found"]["error"]["message"]
    assert client.process.returncode == 0


async def test_a_session_survives_a_restart(tmp_path: Path, workspace: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as first:
            session_id = await open_session(first, workspace)
            await first.prompt(session_id, "remember me")
            live = first.updates(session_id)
        async with spawn_acp(config_dir) as second:
            await second.call("initialize", {})
            assert (await second.call("session/load", {"sessionId": session_id}))[
                "result"
            ].keys() == {"modes", "configOptions"}
    assert texts(second.updates(session_id)) == texts(live) == "remember me"


async def test_cancel_mid_stream(tmp_path: Path, workspace: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(chunk_delay_ms=20))
    words = " ".join(f"w{i}" for i in range(500))
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            request_id = await client.prompt_request(session_id, words)
            while len(client.notifications) < 5:
                client.notifications.append(await client.receive())
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.wait_response(request_id)
    result = response["result"]
    assert result["stopReason"] == "cancelled"
    streamed = texts(client.updates(session_id))
    assert streamed.startswith("w0 w1 w2 w3 w4")
    assert len(streamed) < len(words)
    assert result["content"] == f"{streamed}\n\n{CANCEL_MARKER}"


def marker_processes(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if any(marker in part for part in cmdline):
            found.append(process)
    return found


async def start_sleeping_tool_tree(
    client: RpcPipeClient, session_id: str, marker: str, workspace: Path
) -> Any:
    """Start a turn whose shell tool runs a process with a sleeping child, both tagged with
    ``marker``; return the prompt's request id once both are running. The script is a file
    in the workspace: ``python3 -c`` is inline code, which the policy blocks."""
    script = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])\n"
        "time.sleep(300)\n"
    )
    (workspace / "sleeper.py").write_text(script)
    command = json.dumps({"command": f"python3 sleeper.py {marker}"})
    request_id = await client.request(
        "session/prompt", {"sessionId": session_id, "prompt": f"/tool shell {command}"}
    )
    await poll_until(lambda: len(marker_processes(marker)) >= 2, within=20)
    return request_id


async def test_cancel_mid_tool_leaves_no_processes(tmp_path: Path, workspace: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full"))
    marker = f"zc-e2e-{os.getpid()}-cancel"
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            request_id = await start_sleeping_tool_tree(client, session_id, marker, workspace)
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.wait_response(request_id)
            assert response["result"]["stopReason"] == "cancelled"
            await poll_until(lambda: not marker_processes(marker), within=10)


async def test_sigterm_mid_tool_answers_the_turn_and_leaves_no_processes(
    tmp_path: Path, workspace: Path
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full"))
    marker = f"zc-e2e-{os.getpid()}-sigterm"
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            request_id = await start_sleeping_tool_tree(client, session_id, marker, workspace)
            client.process.send_signal(signal.SIGTERM)
            response = await client.wait_response(request_id)
            assert response["result"]["stopReason"] == "cancelled"
            with trio.fail_after(15):
                await client.process.wait()
            await poll_until(lambda: not marker_processes(marker), within=10)
    assert client.process.returncode == 0


async def test_permission_allow_deny_and_timeout(tmp_path: Path, workspace: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())

    def write(name: str) -> str:
        return f'/tool file_write {{"path": "{name}", "content": "written"}}'

    with trio.fail_after(60):
        # --session-timeout 1 also reaps sessions idle for a second: the timeout case runs last.
        async with spawn_acp(config_dir, "--session-timeout", "1") as client:
            session_id = await open_session(client, workspace)
            denied = await client.prompt(session_id, write("denied.txt"), on_request=reject_once)
            allowed = await client.prompt(session_id, write("allowed.txt"), on_request=allow_once)
            timed_out = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": write("late.txt")},
                on_request=lambda _r: None,
            )
    assert not (workspace / "denied.txt").exists()
    assert (workspace / "allowed.txt").read_text() == "written"
    assert not (workspace / "late.txt").exists()
    assert "Denied by user." in denied["result"]["content"]
    assert "Denied" not in allowed["result"]["content"]
    assert "no operator decision was available" in timed_out["result"]["content"]
    requests = client.server_requests
    assert [r["id"] for r in requests] == ["zc-out-0", "zc-out-1", "zc-out-2"]
    assert requests[0]["params"]["toolCall"]["kind"] == "edit"
    # The unanswered question was withdrawn.
    assert {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": "zc-out-2"},
    } in client.notifications


async def test_jail_escapes_are_refused(tmp_path: Path, workspace: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET-OUTSIDE\n")
    (workspace / "escape").symlink_to(outside)
    (workspace / "private").mkdir()
    (workspace / "private" / "key.txt").write_text("SECRET-FORBIDDEN\n")
    document = echo_config(risk={"forbidden_paths": ["private"]})
    config_dir = write_config(tmp_path / "cfg", document)
    attempts = {
        "dotdot": '/tool file_read {"path": "../outside.txt"}',
        "symlink": '/tool file_read {"path": "escape"}',
        "absolute": f'/tool file_read {{"path": "{outside}"}}',
        "forbidden": '/tool file_read {"path": "private/key.txt"}',
        "shell": f'/tool shell {{"command": "cat {outside}"}}',
        "write outside": '/tool file_write {"path": "../planted.txt", "content": "x"}',
    }
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            inside = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": '/tool file_read {"path": "notes.txt"}'},
            )
            assert "inside the jail" in inside["result"]["content"]
            for name, prompt in attempts.items():
                response = await client.prompt(session_id, prompt, on_request=allow_once)
                assert "SECRET" not in response["result"]["content"], name
    outputs = [
        u["rawOutput"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert len(outputs) == 1 + len(attempts)
    for output in outputs[1:]:
        assert "SECRET" not in output
        assert (
            output.startswith(("Error", "Path", "Tool call not executed", "Command"))
            or "not allowed" in output
            or "forbidden" in output
            or "escapes" in output
        ), output
    assert not (tmp_path / "planted.txt").exists()


async def test_malformed_frames_are_answered_and_serving_continues(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            await client.send_raw(b"\xff\xfe not utf-8")
            bad_bytes = await client.receive()
            await client.send_raw("{oops")
            bad_json = await client.receive()
            await client.send_raw('{"jsonrpc":"2.0","id":true,"method":"initialize"}')
            bad_id = await client.receive()
            await client.send_raw('[{"jsonrpc":"2.0","id":7,"method":"initialize"}]')
            batch = await client.receive()
            await client.send_raw('{"jsonrpc":"1.0","id":8,"method":"initialize"}')
            old_version = await client.receive()
            await client.send_raw("")  # blank lines are skipped
            await client.notify("session/cancel", {})  # a bad notification: never answered
            ok = await client.call("initialize", {})
    assert bad_bytes["error"]["code"] == -32700
    assert bad_json == {"jsonrpc": "2.0", "id": None, "error": bad_json["error"]}
    assert bad_json["error"]["code"] == -32700
    assert bad_id["error"]["code"] == -32600
    assert batch["error"]["code"] == -32600
    assert "batch" in batch["error"]["message"].lower()
    assert old_version["error"]["code"] == -32600
    assert old_version["id"] == 8
    assert "result" in ok
    assert len(client.raw_lines) == 6  # nothing else was written
    for line in client.raw_lines:
        assert json.loads(line)["jsonrpc"] == "2.0"


async def test_eof_during_a_turn_cancels_it_and_exits_zero(tmp_path: Path, workspace: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(chunk_delay_ms=50))
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            request_id = await client.prompt_request(session_id, "a b c d e f g h")
            await client.receive()
            await client.close_stdin()
            response = await client.wait_response(request_id)
            assert response["result"]["stopReason"] == "cancelled"
    assert client.process.returncode == 0


def test_bad_config_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", "[agents.a]\nmodel_provider = 'missing.alias'\n")
    completed = subprocess.run(
        [str(console_script("zeroclaw")), "--config-dir", str(config_dir), "acp"],
        input=b"",
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == b""
    stderr = completed.stderr.decode()
    assert "config.toml" in stderr
    assert "`agents.a.model_provider`" in stderr


def test_no_config_announces_the_echo_default(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["ZEROCLAW_CONFIG_DIR"] = str(tmp_path / "empty")
    request = b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'
    completed = subprocess.run(
        [sys.executable, "-m", "acp_server", "acp"],
        input=request,
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert completed.returncode == 0
    assert json.loads(completed.stdout)["result"]["_meta"]["zeroclaw"]["defaultModel"] == "echo"
    notices = [line for line in completed.stderr.decode().splitlines() if "echo provider" in line]
    assert len(notices) == 1


def test_sessions_command_without_config_does_not_announce_a_provider(tmp_path: Path) -> None:
    # Only commands that run an agent say which provider the built-in default chose.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["ZEROCLAW_CONFIG_DIR"] = str(tmp_path / "empty")
    completed = subprocess.run(
        [str(console_script("zeroclaw")), "sessions", "list"],
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert b"echo provider" not in completed.stderr
    assert b"provider" not in completed.stderr


async def test_agent_flag_is_the_default_alias(tmp_path: Path, workspace: Path) -> None:
    extra = {
        "second": {
            "model_provider": "echo.default",
            "risk_profile": "default",
            "runtime_profile": "default",
        }
    }
    config_dir = write_config(tmp_path / "cfg", echo_config(extra_agents=extra))
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {})
            ambiguous = await client.call("session/new", {"cwd": str(workspace)})
        async with spawn_acp(config_dir, "--agent", "second") as client:
            await client.call("initialize", {})
            chosen = await client.call("session/new", {"cwd": str(workspace)})
            explicit = await client.call(
                "session/new", {"cwd": str(workspace), "agentAlias": "echo"}
            )
        async with spawn_acp(config_dir, "--agent", "ghost") as client:
            unknown = await client.call("session/new", {"cwd": str(workspace)})
    assert ambiguous["error"]["code"] == -32602
    assert "result" in chosen
    assert "result" in explicit
    assert unknown["error"] == rpc_error(
        -32602, "Unknown agent `ghost` — no [agents.ghost] entry configured"
    )


async def test_requests_are_served_while_a_turn_runs(tmp_path: Path, workspace: Path) -> None:
    """Over a real process: a second prompt is -32002, other requests are
    answered during the turn, cancel of an unknown session is a no-op, session/stop waits
    for the turn (it does not cancel it), every update precedes the turn's result, `../`
    in a cwd alias is canonicalized, and --max-sessions overrides the config."""
    (workspace / "sub").mkdir()
    config_dir = write_config(tmp_path / "cfg", echo_config(chunk_delay_ms=20))
    words = " ".join(f"w{i}" for i in range(40))
    with trio.fail_after(60):
        async with spawn_acp(config_dir, "--max-sessions", "1") as client:
            await client.call("initialize", {"protocolVersion": 1})
            new = await client.call("session/new", {"workspace_dir": f"{workspace}/sub/.."})
            assert new["result"]["workspaceDir"] == str(workspace)
            session_id = new["result"]["sessionId"]
            over_limit = await client.call("session/new", {"cwd": str(workspace)})
            prompt_id = await client.prompt_request(session_id, words)
            first_chunk = await client.receive()
            assert first_chunk["method"] == "session/update"
            busy = await client.prompt(session_id, "x")
            event = await client.call("session/event", {"session_id": session_id, "type": "ping"})
            noop = await client.call("session/cancel", {"session_id": "no-such-session"})
            stop_id = await client.request("session/stop", {"session_id": session_id})
            prompt = await client.wait_response(prompt_id)
            stop = await client.wait_response(stop_id)
            after_stop = await client.prompt(session_id, "x")
    assert over_limit["error"]["code"] == -32001
    assert busy["error"]["code"] == -32002
    assert event["result"]["status"] == "processed"
    assert noop["result"] == {}
    # Stop let the turn finish: all of it streamed, not cancelled.
    count = len(words.split())
    assert prompt["result"] == {
        "sessionId": session_id,
        "stopReason": "end_turn",
        "content": words,
        "usage": {"totalTokens": 2 * count, "inputTokens": count, "outputTokens": count},
    }
    assert stop["result"] == {"sessionId": session_id, "stopped": True}
    assert after_stop["error"]["code"] == -32000
    frames = [json.loads(line) for line in client.raw_lines]
    answer_at = next(i for i, f in enumerate(frames) if f.get("id") == prompt_id)
    stopped_at = next(i for i, f in enumerate(frames) if f.get("id") == stop_id)
    last_update_at = max(
        i
        for i, f in enumerate(frames)
        if f.get("method") == "session/update" and f["params"]["sessionId"] == session_id
    )
    assert last_update_at < answer_at < stopped_at


async def test_allow_always_is_remembered_and_edits_can_be_rejected_with_an_edit(
    tmp_path: Path, workspace: Path
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())

    def allow_always(request: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": "allow-always"}}

    def reject_with_edit(request: dict[str, Any]) -> dict[str, Any]:
        return {
            "outcome": {
                "outcome": "selected",
                "optionId": "reject-with-edit",
                "replacementContent": "Use a heading instead.",
            }
        }

    def write(name: str) -> str:
        return f'/tool file_write {{"path": "{name}", "content": "written"}}'

    edit = '/tool file_edit {"path": "notes.txt", "old_string": "inside", "new_string": "in"}'
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            # A client that can send the replacement text asks for reject-with-edit.
            session_id = await open_session(
                client,
                workspace,
                client_info={"name": "editor-with-text-input", "version": "1"},
                zeroclaw_meta={"rejectWithEdit": True},
            )
            for name in ("a.txt", "b.txt"):
                await client.prompt(session_id, write(name), on_request=allow_always)
            asked_for_writes = len(client.server_requests)
            edited = await client.prompt(session_id, edit, on_request=reject_with_edit)
    assert asked_for_writes == 1  # the second write was allowed without asking
    assert (workspace / "b.txt").read_text() == "written"
    edit_request = client.server_requests[-1]
    assert [o["optionId"] for o in edit_request["params"]["options"]] == [
        "allow-once",
        "allow-always",
        "reject-with-edit",
        "reject-once",
    ]
    assert (workspace / "notes.txt").read_text() == "inside the jail\n"
    finished = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert finished[-1]["rawOutput"] == "Use a heading instead."  # the operator's text
    assert "Use a heading instead." in edited["result"]["content"]


STRAY_WRITER = """
import os, pathlib, sys, threading, time

def _write_stray_output_when_asked():
    trigger = pathlib.Path(os.environ["ZC_TEST_STRAY_TRIGGER"])
    while not trigger.exists():
        time.sleep(0.01)
    print("STRAY-PRINT", flush=True)
    os.write(1, b"STRAY-FD-1\\n")
    pathlib.Path(str(trigger) + ".done").touch()

threading.Thread(target=_write_stray_output_when_asked, daemon=True).start()
"""


async def test_stray_writes_to_stdout_never_reach_the_protocol_stream(tmp_path: Path) -> None:
    """A library or thread inside `zeroclaw acp` that prints (to sys.stdout or fd 1) while
    it serves: the client still reads only JSON-RPC frames; the text goes to stderr."""
    config_dir = write_config(tmp_path / "cfg", echo_config())
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(STRAY_WRITER)  # runs at interpreter start
    trigger = tmp_path / "print-now"
    env = child_env(
        config_dir, {"PYTHONPATH": str(hook_dir), "ZC_TEST_STRAY_TRIGGER": str(trigger)}
    )
    process = await trio.lowlevel.open_process(
        [str(console_script("zeroclaw")), "acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    out, err = bytearray(), bytearray()

    async def read_to_end(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        async for chunk in stream:
            into += chunk

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_to_end, process.stderr, err)
                await process.stdin.send_all(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n')
                while b"\n" not in out:  # serving: the protocol stream is set up
                    out += await process.stdout.receive_some()
                nursery.start_soon(read_to_end, process.stdout, out)
                trigger.touch()
                await poll_until(Path(f"{trigger}.done").exists)  # the stray writer ran
                await process.stdin.send_all(b'{"jsonrpc":"2.0","id":2,"method":"initialize"}\n')
                await process.stdin.aclose()
                await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
    frames = [json.loads(line) for line in out.splitlines()]
    assert [frame["id"] for frame in frames] == [1, 2]
    assert b"STRAY-PRINT" in err
    assert b"STRAY-FD-1" in err


async def test_session_new_without_cwd_uses_the_launch_directory(
    tmp_path: Path, workspace: Path
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(30):
        async with spawn_acp(config_dir, cwd=workspace) as client:
            await client.call("initialize", {"protocolVersion": 1})
            new = await client.call("session/new", {})
            session_id = new["result"]["sessionId"]
            listing = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": '/tool file_read {"path": "notes.txt"}'},
            )
    assert new["result"]["workspaceDir"] == str(workspace)
    assert "inside the jail" in listing["result"]["content"]


async def test_risk_profiles_from_config_decide_over_a_real_process(
    tmp_path: Path, workspace: Path
) -> None:
    """readonly: no side effects, nothing asked; full: never asks; supervised: always_ask
    wins over auto_approve, a high-risk command is blocked without asking even when `*`
    is allowlisted, and a medium-risk one is asked about."""
    agents = {
        name: {"model_provider": "echo.default", "risk_profile": name, "runtime_profile": "default"}
        for name in ("readonly", "full", "strict")
    }
    document = echo_config(extra_agents=agents)
    document["risk_profiles"].update(
        {
            "readonly": {"level": "readonly"},
            "full": {"level": "full"},
            "strict": {
                "level": "supervised",
                "allowed_commands": ["*"],
                "auto_approve": ["file_read"],
                "always_ask": ["file_read"],
                "require_approval_for_medium_risk": True,
            },
        }
    )
    config_dir = write_config(tmp_path / "cfg", document)
    write = '/tool file_write {"path": "made.txt", "content": "x"}'

    async def run(client: Any, alias: str, prompt: str) -> tuple[str, int]:
        """The tool's output and how many permission questions it took."""
        session_id = (
            await client.call("session/new", {"cwd": str(workspace), "agentAlias": alias})
        )["result"]["sessionId"]
        asked = len(client.server_requests)
        await client.prompt(session_id, prompt, on_request=allow_once)
        [finished] = [
            u
            for u in client.updates(session_id)
            if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
        ]
        return finished["rawOutput"], len(client.server_requests) - asked

    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            readonly_write = await run(client, "readonly", write)
            readonly_read = await run(client, "readonly", '/tool file_read {"path": "notes.txt"}')
            full_write = await run(
                client, "full", '/tool file_write {"path": "by-full", "content": "x"}'
            )
            always_asked = await run(client, "strict", '/tool file_read {"path": "notes.txt"}')
            high_risk = await run(client, "strict", '/tool shell {"command": "rm -rf notes.txt"}')
            medium_risk = await run(client, "strict", '/tool shell {"command": "touch by-strict"}')
    assert readonly_write[1] == 0
    assert "read-only" in readonly_write[0]
    assert not (workspace / "made.txt").exists()
    assert readonly_read[1] == 0
    assert "inside the jail" in readonly_read[0]
    assert full_write[1] == 0
    assert (workspace / "by-full").exists()
    assert always_asked[1] == 1
    assert "inside the jail" in always_asked[0]
    assert high_risk[1] == 0
    assert "High-risk command blocked" in high_risk[0]
    assert (workspace / "notes.txt").exists()
    assert medium_risk[1] == 1
    assert (workspace / "by-strict").exists()


async def test_a_nul_or_huge_cwd_is_an_invalid_param_quoted_short(
    tmp_path: Path, workspace: Path
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    huge = str(workspace / ("x" * (4 * 1024 * 1024)))
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            nul = await client.call("session/new", {"cwd": f"{workspace}\0/sub"})
            long = await client.call("session/new", {"cwd": huge})
            fine = await client.call("session/new", {"cwd": str(workspace)})
    assert nul["error"]["code"] == -32602
    assert "NUL" in nul["error"]["message"]
    assert long["error"]["code"] == -32602
    assert len(long["error"]["message"]) < 1024
    assert fine["result"]["workspaceDir"] == str(workspace)
