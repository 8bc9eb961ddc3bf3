"""One live copy per session, through the real servers: two WebSocket connections to one
`zeroclaw gateway`, two `zeroclaw acp` processes on one store, and a process killed with
SIGKILL while it holds a session (docs/persistence.md, "One live copy per session")."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import child_env, console_script, open_session, spawn_acp
from tests.helpers import TIMING_SENSITIVE, echo_config, write_config
from tests.jsonrpc_peer import JsonDict, JsonRpcPeer

pytestmark = pytest.mark.e2e

TIMEOUT = 60
SESSION_NOT_FOUND = -32000
SLOW_PROMPT = " ".join(f"word{n}" for n in range(40))
"""Forty words the echo provider streams back one chunk each (``chunk_delay_ms`` apart)."""


def _config(tmp_path: Path, *, chunk_delay_ms: int = 0) -> Path:
    document = echo_config(chunk_delay_ms=chunk_delay_ms)
    document["gateway"] = {"require_pairing": False}
    return write_config(tmp_path / "cfg", document)


def _user_texts(updates: list[JsonDict]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]


def _replayed(peer: JsonRpcPeer, session_id: str) -> list[str]:
    updates = [
        note["params"]["update"]
        for note in peer.notifications
        if note.get("method") == "session/update" and note["params"]["sessionId"] == session_id
    ]
    return _user_texts(updates)


async def _stored_users(config_dir: Path, session_id: str) -> list[str]:
    """What `zeroclaw sessions show` (a third process) finds in the store."""
    result = await trio.run_process(
        [str(console_script("zeroclaw")), "sessions", "show", session_id, "--json"],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        env=child_env(config_dir),
    )
    shown: dict[str, Any] = json.loads(result.stdout)
    return [m["content"] for m in shown["messages"] if m["role"] == "user"]


def _assert_taken_over(response: JsonDict) -> None:
    assert "error" in response, response
    assert response["error"]["code"] == SESSION_NOT_FOUND, response
    assert "taken over by another connection" in response["error"]["message"], response


async def _until_first_chunk(peer: JsonRpcPeer) -> None:
    """Read until the running turn has streamed its first chunk."""
    while True:
        message = await peer.receive()
        assert "method" in message, message  # nothing else is in flight meanwhile
        peer.notifications.append(message)
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk":
            return


async def test_two_connections_to_one_gateway_never_hold_one_session_twice(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=20)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with (
            run_gateway(config_dir) as gateway,
            ws_connect(gateway.ws_url()) as first_ws,
            ws_connect(gateway.ws_url()) as second_ws,
        ):
            first, second = WsRpc(first_ws), WsRpc(second_ws)
            session_id = await first.new_session(workspace)
            assert (await first.prompt(session_id, "one"))["result"]["stopReason"] == "end_turn"
            await second.call("initialize", {"protocolVersion": 1})
            loaded = await second.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
            assert _replayed(second, session_id) == ["one"]
            _assert_taken_over(await first.prompt(session_id, "refused"))
            assert (await second.prompt(session_id, "two"))["result"]["stopReason"] == "end_turn"

            # A takeover while the holder's turn runs: that turn is cancelled (as by a
            # close), and the holder's next request is told the session was taken.
            running = await second.prompt_request(session_id, SLOW_PROMPT)
            await _until_first_chunk(second)
            resumed = await first.call("session/resume", {"sessionId": session_id})
            assert resumed["result"].keys() == {"modes", "configOptions"}, resumed
            cancelled = await second.wait_response(running)
            assert cancelled["result"]["stopReason"] == "cancelled", cancelled
            _assert_taken_over(await second.call("session/close", {"sessionId": session_id}))
            assert (await first.prompt(session_id, "three"))["result"]["stopReason"] == "end_turn"
    assert await _stored_users(config_dir, session_id) == ["one", "two", "three"]


async def test_two_acp_processes_on_one_store_hand_a_session_back_and_forth(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as first, spawn_acp(config_dir) as second:
            session_id = await open_session(first, workspace)
            assert (await first.prompt(session_id, "one"))["result"]["stopReason"] == "end_turn"
            await second.call("initialize", {"protocolVersion": 1})
            assert (await second.call("session/load", {"sessionId": session_id}))[
                "result"
            ].keys() == {"modes", "configOptions"}
            assert _replayed(second, session_id) == ["one"]

            # The first process learns it at its next prompt, before any model call.
            before = len(first.updates(session_id))
            _assert_taken_over(await first.prompt(session_id, "refused"))
            assert first.updates(session_id)[before:] == []

            assert (await second.prompt(session_id, "two"))["result"]["stopReason"] == "end_turn"
            first.notifications.clear()
            assert (await first.call("session/load", {"sessionId": session_id}))[
                "result"
            ].keys() == {"modes", "configOptions"}
            assert _replayed(first, session_id) == ["one", "two"]
            _assert_taken_over(await second.prompt(session_id, "refused too"))
            assert (await first.prompt(session_id, "three"))["result"]["stopReason"] == "end_turn"
    assert await _stored_users(config_dir, session_id) == ["one", "two", "three"]


async def test_a_turn_fenced_off_by_another_process_says_it_was_not_saved(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=25)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as first, spawn_acp(config_dir) as second:
            session_id = await open_session(first, workspace)
            await first.prompt(session_id, "saved")
            running = await first.request(
                "session/prompt", {"sessionId": session_id, "prompt": SLOW_PROMPT}
            )
            await _until_first_chunk(first)
            await second.call("initialize", {"protocolVersion": 1})
            assert (await second.call("session/load", {"sessionId": session_id}))[
                "result"
            ].keys() == {"modes", "configOptions"}
            answer = await first.wait_response(running)
            assert answer["error"]["code"] == SESSION_NOT_FOUND, answer
            assert "The turn was not saved" in answer["error"]["message"], answer
            assert "open elsewhere" in answer["error"]["message"], answer
            assert _replayed(second, session_id) == ["saved"]
            assert (await second.prompt(session_id, "next"))["result"]["stopReason"] == "end_turn"
    assert await _stored_users(config_dir, session_id) == ["saved", "next"]


async def _kill_holder_then_load(tmp_path: Path, *, mid_turn: bool) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=25 if mid_turn else 0)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as holder:
            session_id = await open_session(holder, workspace)
            assert (await holder.prompt(session_id, "kept"))["result"]["stopReason"] == "end_turn"
            if mid_turn:
                await holder.request(
                    "session/prompt", {"sessionId": session_id, "prompt": SLOW_PROMPT}
                )
                await _until_first_chunk(holder)
            holder.process.kill()  # SIGKILL: no shutdown, no release of anything
            await holder.process.wait()
        async with spawn_acp(config_dir) as taker:
            await taker.call("initialize", {"protocolVersion": 1})
            started = time.monotonic()
            loaded = await taker.call("session/load", {"sessionId": session_id})
            took = time.monotonic() - started
            assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
            assert took < 2.0, f"the load waited {took:.2f}s for a dead holder"
            assert _replayed(taker, session_id) == ["kept"]
            assert (await taker.prompt(session_id, "after"))["result"]["stopReason"] == "end_turn"
    assert await _stored_users(config_dir, session_id) == ["kept", "after"]


@TIMING_SENSITIVE
async def test_a_process_killed_while_idle_with_a_session_leaves_it_free(tmp_path: Path) -> None:
    await _kill_holder_then_load(tmp_path, mid_turn=False)


@TIMING_SENSITIVE
async def test_a_process_killed_mid_turn_leaves_the_session_free(tmp_path: Path) -> None:
    await _kill_holder_then_load(tmp_path, mid_turn=True)
