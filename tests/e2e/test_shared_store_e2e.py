"""One store file, several real processes: the gateway, `zeroclaw acp`, `zeroclaw sessions`.

The gateway and `zeroclaw acp` open the same
``<workspace_dir>/sessions/acp-sessions.db``; editors (stdio) and remote clients (WebSocket) must
be able to write it at the same time and read each other's sessions, and the administrator's
`zeroclaw sessions` command must work against it while both servers hold it open.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.bridge.harness import bridge_env, running_bridge
from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import RpcPipeClient, child_env, console_script, open_session, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 60
SESSION_NOT_FOUND = -32000
TURNS = 6


def _config(tmp_path: Path, **gateway: object) -> Path:
    document = echo_config()
    document["gateway"] = dict(gateway)
    return write_config(tmp_path / "cfg", document)


async def _sessions_cli(config_dir: Path, *args: str) -> tuple[int, str, str]:
    """The real `zeroclaw sessions ...` process; returns (exit code, stdout, stderr)."""
    result = await trio.run_process(
        [str(console_script("zeroclaw")), "sessions", *args],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        env=child_env(config_dir),
        check=False,
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def _user_texts(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]


async def _prompt_turns_ws(rpc: WsRpc, session_id: str, tag: str) -> None:
    for turn in range(TURNS):
        reply = await rpc.call(
            "session/prompt", {"sessionId": session_id, "prompt": f"{tag} {turn}"}
        )
        assert reply["result"]["stopReason"] == "end_turn", reply


async def _prompt_turns_stdio(client: RpcPipeClient, session_id: str, tag: str) -> None:
    for turn in range(TURNS):
        reply = await client.call(
            "session/prompt", {"sessionId": session_id, "prompt": f"{tag} {turn}"}
        )
        assert reply["result"]["stopReason"] == "end_turn", reply


async def test_gateway_and_stdio_write_one_store_at_once_and_sessions_cli_reads_it(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path, require_pairing=False)
    workspace = tmp_path / "work"
    workspace.mkdir()
    expected_ws = [f"ws {n}" for n in range(TURNS)]
    expected_stdio = [f"stdio {n}" for n in range(TURNS)]
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway, spawn_acp(config_dir) as stdio:
            async with ws_connect(gateway.ws_url()) as ws:
                rpc = WsRpc(ws)
                ws_session = await rpc.new_session(workspace)
                stdio_session = await open_session(stdio, workspace)
                # Both servers commit turns into the one file at the same time.
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_prompt_turns_ws, rpc, ws_session, "ws")
                    nursery.start_soon(_prompt_turns_stdio, stdio, stdio_session, "stdio")

                # While both still hold the store open, each loads the other's session.
                rpc.notifications.clear()
                loaded = await rpc.call("session/load", {"sessionId": stdio_session})
                assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
                replay = [n["params"]["update"] for n in rpc.notifications]
                assert _user_texts(replay) == expected_stdio
                loaded = await stdio.call("session/load", {"sessionId": ws_session})
                assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
                assert _user_texts(stdio.updates(ws_session)) == expected_ws

            # The administrator's view, from a third process, with both servers running.
            code, out, err = await _sessions_cli(config_dir, "list", "--json")
            assert code == 0, err
            listed = {row["sessionId"]: row for row in json.loads(out)}
            assert set(listed) == {ws_session, stdio_session}
            for row in listed.values():
                assert row["messageCount"] == 2 * TURNS  # a user and an assistant message per turn
                assert row["turnCount"] == TURNS
                assert row["agent"] == "echo"
                assert row["workspaceDir"] == str(workspace)

            code, out, err = await _sessions_cli(config_dir, "show", ws_session, "--json")
            assert code == 0, err
            shown = json.loads(out)
            assert [m["content"] for m in shown["messages"] if m["role"] == "user"] == expected_ws
            assert [m["content"] for m in shown["messages"] if m["role"] == "assistant"] == (
                expected_ws
            )

            code, out, err = await _sessions_cli(config_dir, "delete", stdio_session, "--json")
            assert (code, json.loads(out)) == (0, {"sessionId": stdio_session, "deleted": True})
            code, out, err = await _sessions_cli(config_dir, "delete", stdio_session, "--json")
            assert (code, json.loads(out)) == (1, {"sessionId": stdio_session, "deleted": False})
            code, out, err = await _sessions_cli(config_dir, "show", stdio_session)
            assert code == 1
            assert f"No stored session {stdio_session}" in err

            # The deleted session is gone for every server; the other one still loads.
            async with ws_connect(gateway.ws_url()) as ws:
                rpc = WsRpc(ws)
                await rpc.call("initialize", {"protocolVersion": 1})
                gone = await rpc.call("session/load", {"sessionId": stdio_session})
                assert gone["error"]["code"] == SESSION_NOT_FOUND, gone
                resumed = await rpc.call("session/resume", {"sessionId": ws_session})
                assert resumed["result"].keys() == {"modes", "configOptions"}, resumed

    code, out, _ = await _sessions_cli(config_dir, "list")
    assert code == 0
    table = out.splitlines()
    assert table[0].split()[:2] == ["ID", "AGENT"]
    assert [line.split()[0] for line in table[1:]] == [ws_session]


async def test_gateway_with_an_unusable_store_serves_from_memory_and_keeps_the_file(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path, require_pairing=False)
    store = config_dir / "data" / "sessions" / "acp-sessions.db"
    store.parent.mkdir(parents=True)
    garbage = b"this is not a database and must survive\n" * 100
    store.write_bytes(garbage)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway, ws_connect(gateway.ws_url()) as ws:
            rpc = WsRpc(ws)
            init = await rpc.call("initialize", {"protocolVersion": 1})
            capabilities = init["result"]["agentCapabilities"]
            assert capabilities["loadSession"] is False
            assert not capabilities.get("sessionCapabilities")
            workspace = tmp_path / "workspace"
            workspace.mkdir()
            new = await rpc.call("session/new", {"cwd": str(workspace)})
            session_id = new["result"]["sessionId"]
            reply = await rpc.prompt(session_id, "in memory")
            assert reply["result"]["stopReason"] == "end_turn"
            for method in ("session/load", "session/resume"):
                failed = await rpc.call(method, {"sessionId": session_id})
                assert failed["error"]["code"] == SESSION_NOT_FOUND, failed
    # Read after the gateway exited: its whole stderr has been collected by then.
    warnings = [line for line in gateway.stderr().splitlines() if "session store" in line]
    assert len(warnings) == 1, gateway.stderr()
    assert store.read_bytes() == garbage


async def test_the_token_never_reaches_a_log_a_command_line_or_the_config(tmp_path: Path) -> None:
    """The token travels as a bearer header only; only its hash is stored."""
    config_dir = _config(tmp_path)  # pairing required (the default)
    home = tmp_path / "home"
    home.mkdir()
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir, env={"ZEROCLAW_LOG": "debug"}) as gateway:
            env = bridge_env(home, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
            args = ["--url", gateway.ws_url(), "--log-level", "debug"]
            # First run pairs through /pair/code and caches the token; the second reuses it.
            for run in range(2):
                async with running_bridge(*args, env=env) as bridge:
                    cmdline = await trio.Path(f"/proc/{bridge.process.pid}/cmdline").read_bytes()
                    await bridge.send_line(
                        b'{"jsonrpc":"2.0","id":1,"method":"initialize",'
                        b'"params":{"protocolVersion":1}}'
                    )
                    reply = await bridge.read_json()
                    assert reply["result"]["protocolVersion"] == 1, reply
                    await bridge.close_stdin()
                    assert await bridge.wait() == 0, bridge.stderr_text
                token = (config_dir / "acp-bridge-token").read_text().strip()
                assert token.startswith("zc_"), token
                assert token.encode() not in cmdline
                # Debug logging includes the WebSocket handshake headers: they must be redacted.
                assert "Authorization: Bearer <redacted>" in bridge.stderr_text, run
                assert token not in bridge.stderr_text
            # The token in its other two forms, straight to the gateway, logged at debug level.
            for how in ("subprotocol", "query"):
                async with ws_connect(gateway.ws_url(), token=token, how=how) as ws:
                    assert ws.subprotocol == "zeroclaw.acp.v1"
                    await WsRpc(ws).call("initialize", {"protocolVersion": 1})
    gateway_log = gateway.stderr()
    assert "paired a new client" in gateway_log
    assert token not in gateway_log
    config_text = (config_dir / "config.toml").read_text()
    assert token not in config_text
    assert hashlib.sha256(token.encode()).hexdigest() in config_text
