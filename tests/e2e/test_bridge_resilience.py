"""Against the real `zeroclaw gateway`: killed, restarted and drained under a live
bridge while the IDE keeps using its session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.protocol.client import DEFAULT_CLIENT_ID_PREFIX
from tests.e2e.gateway_harness import RunningGateway, run_gateway
from tests.e2e.helpers import RpcPipeClient, open_session, spawn_zeroclaw, unused_port
from tests.helpers import TIMING_SENSITIVE, echo_config, poll_until, session_dir, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 90
INTERNAL = "zeroclaw-acp-bridge:"


async def _serve(
    config_dir: Path,
    port: int,
    *args: str,
    task_status: trio.TaskStatus[RunningGateway] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a gateway on ``port`` until its process exits (killed, or drained by SIGTERM)."""
    async with run_gateway(config_dir, "--port", str(port), *args, expect_exit=None) as gateway:
        task_status.started(gateway)
        await gateway.process.wait()


def _ide_ids(count: int) -> list[str]:
    """The ids of the IDE's first ``count`` requests, as the test peer numbers them."""
    return sorted(f"{DEFAULT_CLIENT_ID_PREFIX}{number}" for number in range(count))


def _bridge(config_dir: Path, port: int, *args: str) -> Any:
    return spawn_zeroclaw(
        ["--url", f"ws://127.0.0.1:{port}/acp", *args],
        config_dir=config_dir,
        script="zeroclaw-acp-bridge",
    )


def _stdout_messages(ide: RpcPipeClient) -> list[dict[str, Any]]:
    return [json.loads(line) for line in ide.raw_lines]


def _user_texts(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]


async def test_killed_and_restarted_gateway_under_a_live_bridge(tmp_path: Path) -> None:
    port = unused_port()
    config_dir = write_config(tmp_path / "cfg", echo_config(chunk_delay_ms=20))
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            first: RunningGateway = await nursery.start(_serve, config_dir, port)
            assert first.pairing_code is not None
            async with _bridge(config_dir, port, "--pair-code", first.pairing_code) as ide:
                session_id = await open_session(ide, workspace)
                reply = await ide.prompt(session_id, "alpha beta")
                assert reply["result"]["stopReason"] == "end_turn"

                # A long turn is streaming when the gateway dies (no drain, no close frame).
                interrupted = await ide.prompt_request(session_id, "tick " * 300)
                await ide.receive()
                first.process.kill()
                error = await ide.wait_response(interrupted)
                assert error["error"]["data"] == {
                    "bridge": "connection_lost",
                    "method": "session/prompt",
                    "sessionId": session_id,
                    "reconnecting": True,
                    "details": error["error"]["message"],
                }
                assert f"Session {session_id} is still there" in error["error"]["message"]

                # The gateway comes back (same config, same store, same paired token) and
                # the IDE simply goes on with its session.
                await nursery.start(_serve, config_dir, port)
                reply = await ide.prompt(session_id, "gamma")
                assert reply["result"]["stopReason"] == "end_turn", reply
            assert ide.process.returncode == 0

            # The IDE saw exactly one error, and none of the bridge's own requests or replies.
            seen = _stdout_messages(ide)
            assert [m["id"] for m in seen if "error" in m] == [interrupted]
            assert not [m for m in seen if INTERNAL in str(m.get("id", ""))]
            # Every request answered exactly once: the interrupted turn is never answered twice.
            assert sorted(m["id"] for m in seen if "result" in m or "error" in m) == _ide_ids(5)

            # The history carried across the restart.
            async with _bridge(config_dir, port) as ide:
                await ide.call("initialize", {"protocolVersion": 1})
                loaded = await ide.call("session/load", {"sessionId": session_id})
                assert loaded["result"].keys() == {"modes", "configOptions"}
                # The turn the kill interrupted was never committed: nothing of it is stored.
                assert _user_texts(ide.updates(session_id)) == ["alpha beta", "gamma"]
            nursery.cancel_scope.cancel()


async def test_drained_gateway_finishes_the_turn_and_the_bridge_never_errs(
    tmp_path: Path,
) -> None:
    port = unused_port()
    document = echo_config(chunk_delay_ms=30)
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    words = " ".join(f"w{i}" for i in range(15))
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            first: RunningGateway = await nursery.start(
                _serve, config_dir, port, "--drain-timeout", "20"
            )
            async with _bridge(config_dir, port, "--log-level", "info") as ide:
                session_id = await open_session(ide, session_dir(tmp_path))
                running = await ide.prompt_request(session_id, words)
                await ide.receive()
                first.signal()  # SIGTERM: drain, then close 1012 "restarting, retry"
                reply = await ide.wait_response(running)
                assert reply["result"]["stopReason"] == "end_turn"
                assert await first.wait_exit() == 0

                # Sent while the gateway is down: held, then delivered to the new one.
                held = await ide.prompt_request(session_id, "after")
                await nursery.start(_serve, config_dir, port)
                reply = await ide.wait_response(held)
                assert reply["result"]["stopReason"] == "end_turn", reply
            assert ide.process.returncode == 0
            seen = _stdout_messages(ide)
            assert not [m for m in seen if "error" in m]
            assert not [m for m in seen if INTERNAL in str(m.get("id", ""))]
            # initialize, session/new, the drained turn, the held one: each answered once.
            assert sorted(m["id"] for m in seen if "result" in m) == _ide_ids(4)
            nursery.cancel_scope.cancel()


async def test_a_gateway_that_stays_down_ends_the_bridge_with_exit_1(tmp_path: Path) -> None:
    port = unused_port()
    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            gateway: RunningGateway = await nursery.start(_serve, config_dir, port)
            async with _bridge(config_dir, port, "--reconnect-max-secs", "1") as ide:
                await open_session(ide, session_dir(tmp_path))
                gateway.process.kill()
                with trio.fail_after(20):
                    await ide.process.wait()
            assert ide.process.returncode == 1


NOTICE_DEADLINE_SECS = 5
"""How soon the user must learn why a prompt sent while the gateway is down does not move."""


def _chunks(notes: list[dict[str, Any]], session_id: str) -> list[tuple[str, str | None]]:
    """(text, ``_meta.zeroclaw.bridge``) of every ``agent_message_chunk`` on the session, in
    order: what an editor renders as the agent's reply."""
    found = []
    for note in notes:
        params = note.get("params", {})
        update = params.get("update", {})
        if params.get("sessionId") == session_id and (
            update.get("sessionUpdate") == "agent_message_chunk"
        ):
            marker = params.get("_meta", {}).get("zeroclaw", {}).get("bridge")
            found.append((update["content"]["text"], marker))
    return found


@TIMING_SENSITIVE
async def test_a_prompt_sent_while_the_gateway_is_down_says_so_in_the_chat_then_goes_through(
    tmp_path: Path,
) -> None:
    port = unused_port()
    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    log = tmp_path / "bridge.log"
    url = f"ws://127.0.0.1:{port}/acp"
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            gateway: RunningGateway = await nursery.start(_serve, config_dir, port)
            args = ["--log-file", str(log), "--log-level", "info"]
            async with _bridge(config_dir, port, *args) as ide:
                session_id = await open_session(ide, session_dir(tmp_path))
                gateway.process.kill()
                await gateway.process.wait()
                await poll_until(lambda: log.exists() and "reconnecting" in log.read_text())

                started = trio.current_time()
                held = await ide.prompt_request(session_id, "still there?")
                notice = await ide.receive(within=NOTICE_DEADLINE_SECS)
                waited = trio.current_time() - started
                # No editor here shows the agent's stderr: the notice is in the chat itself.
                assert notice["method"] == "session/update"
                assert notice["params"]["sessionId"] == session_id
                [(text, marker)] = _chunks([notice], session_id)
                assert marker == "reconnecting"
                assert url in text
                assert "cannot be reached" in text
                assert "connection refused" in text  # what the last attempt ran into
                assert "keeps trying to reconnect" in text
                assert "will be sent as soon as the gateway is back" in text

                # The gateway comes back within the retry window: the prompt goes through.
                await nursery.start(_serve, config_dir, port)
                reply = await ide.wait_response(held)
                assert reply["result"]["stopReason"] == "end_turn", reply
                chunks = _chunks([notice, *ide.notifications], session_id)
                assert [marker for _, marker in chunks[:2]] == ["reconnecting", "reconnected"]
                assert "sending this prompt now" in chunks[1][0]
                assert "".join(text for text, marker in chunks if marker is None) == (
                    "still there?"
                )
            assert ide.process.returncode == 0
            nursery.cancel_scope.cancel()
    assert waited < NOTICE_DEADLINE_SECS
