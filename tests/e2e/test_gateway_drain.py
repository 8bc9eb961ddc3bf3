"""`zeroclaw gateway` drain on SIGTERM: running turns finish (or are cancelled at the
deadline), then every connection closes with 1012 "restarting, retry", and the exit is 0."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio
from websockets.exceptions import ConnectionClosed

from acp_server.storage import StoredSession
from acp_server.storage.sqlite import SessionStore
from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e


def _slow_config(tmp_path: Path, chunk_delay_ms: int) -> Path:
    document = echo_config(chunk_delay_ms=chunk_delay_ms)
    document["gateway"] = {"require_pairing": False}
    return write_config(tmp_path / "cfg", document)


def _stored(config_dir: Path, session_id: str) -> StoredSession | None:
    store = SessionStore.open(config_dir / "data" / "sessions" / "acp-sessions.db")
    try:
        return store.load_session(session_id)
    finally:
        store.close()


async def _expect_restart_close(rpc: WsRpc) -> None:
    with pytest.raises(ConnectionClosed) as closed:
        await rpc.receive(within=10)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1012
    assert "retry" in closed.value.rcvd.reason


async def test_sigterm_lets_a_running_turn_finish_then_closes_1012(tmp_path: Path) -> None:
    config_dir = _slow_config(tmp_path, chunk_delay_ms=40)
    words = [f"w{i}" for i in range(25)]  # about a second of streaming
    with trio.fail_after(60):
        async with run_gateway(config_dir, "--drain-timeout", "20") as gateway:
            async with (
                ws_connect(gateway.ws_url()) as idle_ws,
                ws_connect(gateway.ws_url()) as busy_ws,
            ):
                idle, busy = WsRpc(idle_ws), WsRpc(busy_ws)
                await idle.call("initialize", {})
                session_id = await busy.new_session(session_dir(tmp_path))
                prompt_id = await busy.prompt_request(session_id, " ".join(words))
                first = await busy.receive()
                assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"

                gateway.signal(signal.SIGTERM)
                # The idle connection is closed at once with "restarting, retry"...
                await _expect_restart_close(idle)
                # New work on a draining gateway is refused at once, with a reason...
                new_id = await busy.request("session/new", {"cwd": str(session_dir(tmp_path))})
                refused = await busy.wait_response(new_id)
                assert refused["error"]["code"] == -32603
                assert "restarting" in refused["error"]["message"]
                # ...while the busy one streams its turn to the end, every chunk in order.
                reply = await busy.wait_response(prompt_id)
                assert reply["result"]["stopReason"] == "end_turn"
                streamed = [first, *busy.notifications]
                text = "".join(
                    n["params"]["update"]["content"]["text"]
                    for n in streamed
                    if n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                )
                assert text == " ".join(words)
                await _expect_restart_close(busy)
                # No new connections while draining.
                with pytest.raises(OSError):
                    async with ws_connect(gateway.ws_url()):
                        pass
            assert await gateway.wait_exit() == 0
            assert "draining" in gateway.stderr()
    # The turn that finished during the drain was persisted before the exit.
    stored = _stored(config_dir, session_id)
    assert stored is not None
    assert [(m.role, m.content) for m in stored.messages] == [
        ("user", " ".join(words)),
        ("assistant", " ".join(words)),
    ]


async def test_drain_deadline_cancels_the_turn_and_still_answers_it(tmp_path: Path) -> None:
    config_dir = _slow_config(tmp_path, chunk_delay_ms=100)
    with trio.fail_after(60):
        async with run_gateway(config_dir, "--drain-timeout", "0.3") as gateway:
            async with ws_connect(gateway.ws_url()) as ws:
                rpc = WsRpc(ws)
                session_id = await rpc.new_session(session_dir(tmp_path))
                prompt_id = await rpc.prompt_request(session_id, "slow " * 300)
                await rpc.receive()  # streaming has started
                gateway.signal(signal.SIGTERM)
                reply = await rpc.wait_response(prompt_id)
                # Cancelled at the deadline, answered before the close frame.
                assert reply["result"]["stopReason"] == "cancelled"
                await _expect_restart_close(rpc)
            assert await gateway.wait_exit() == 0
    # The session is stored; the cancelled turn is not (only completed turns).
    stored = _stored(config_dir, session_id)
    assert stored is not None
    assert stored.messages == ()


async def test_second_signal_stops_at_once(tmp_path: Path) -> None:
    config_dir = _slow_config(tmp_path, chunk_delay_ms=100)
    with trio.fail_after(60):
        async with (
            run_gateway(config_dir, "--drain-timeout", "60") as gateway,
            ws_connect(gateway.ws_url()) as ws,
        ):
            rpc = WsRpc(ws)
            session_id = await rpc.new_session(session_dir(tmp_path))
            await rpc.prompt_request(session_id, "slow " * 600)
            await rpc.receive()
            gateway.signal(signal.SIGTERM)
            await gateway.log.wait_for("draining")
            gateway.signal(signal.SIGINT)
            assert await gateway.wait_exit(within=10) == 0
