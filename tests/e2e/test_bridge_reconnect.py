"""With a scriptable gateway: the bridge survives drops without the IDE noticing."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.bridge.harness import (
    BridgeProcess,
    RestartableGateway,
    bridge_env,
    jsonrpc_request,
    running_bridge,
    write_config,
)

pytestmark = pytest.mark.e2e

TIMEOUT = 30
INTERNAL = "zeroclaw-acp-bridge:"


async def _call(bridge: BridgeProcess, request_id: Any, method: str, params: Any = None) -> Any:
    await bridge.send_line(jsonrpc_request(request_id, method, params))
    return await bridge.read_json()


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[RestartableGateway]:
    server = RestartableGateway(nursery)
    await server.start()
    yield server
    await server.stop()


def _bridge(tmp_path: Path, server: RestartableGateway, *args: str) -> Any:
    config_dir = tmp_path / "cfg"
    write_config(config_dir, server.port, require_pairing=False)
    return running_bridge("--config-dir", str(config_dir), *args, env=bridge_env(tmp_path))


async def test_after_a_1012_close_the_bridge_resumes_sessions_before_anything_else(
    server: RestartableGateway, tmp_path: Path
) -> None:
    gateway = server.gateway
    init_params = {"protocolVersion": 1, "clientCapabilities": {"elicitation": {}}}
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server) as bridge:
            assert "result" in await _call(bridge, 1, "initialize", init_params)
            first = await _call(bridge, 2, "session/new", {"cwd": "/work/a", "mcpServers": []})
            second = await _call(bridge, 3, "session/new", {"cwd": "/work/b"})
            assert (first["result"], second["result"]) == (
                {"sessionId": "sess-1"},
                {"sessionId": "sess-2"},
            )
            # The gateway restarts this connection; the request that caused it is in flight.
            error = await _call(bridge, 4, "test/close", {"code": 1012, "reason": "restarting"})
            assert error["id"] == 4
            assert error["error"]["data"] == {
                "bridge": "connection_lost",
                "method": "test/close",
                "reconnecting": True,
                "details": error["error"]["message"],
            }
            assert "code 1012: restarting" in error["error"]["message"]
            # The IDE carries on as if nothing happened.
            reply = await _call(bridge, 5, "test/echo", {"sessionId": "sess-1"})
            assert reply["result"]["method"] == "test/echo"
            await bridge.close_stdin()
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    assert len(gateway.connections) == 2
    replayed = gateway.connections[1]
    # initialize replayed with the IDE's own params, then one resume per session, then the IDE.
    assert [m["method"] for m in replayed] == [
        "initialize",
        "session/resume",
        "session/resume",
        "test/echo",
    ]
    assert replayed[0]["params"] == init_params
    assert replayed[1]["params"] == {"sessionId": "sess-1", "cwd": "/work/a", "mcpServers": []}
    assert replayed[2]["params"] == {"sessionId": "sess-2", "cwd": "/work/b"}
    assert all(str(m["id"]).startswith(INTERNAL) for m in replayed[:3])
    assert replayed[3]["id"] == 5
    assert "reconnecting" in bridge.stderr_text


async def test_loaded_and_resumed_sessions_are_resumed_too_and_closed_ones_are_not(
    server: RestartableGateway, tmp_path: Path
) -> None:
    """Every session seen created, loaded or resumed is resumed on the new
    connection, with the cwd and MCP servers it was opened with; a closed one is forgotten."""
    gateway = server.gateway
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server) as bridge:
            await _call(bridge, 1, "initialize", {"protocolVersion": 1})
            assert (await _call(bridge, 2, "session/new", {"cwd": "/w/new"}))["result"] == {
                "sessionId": "sess-1"
            }
            await _call(bridge, 3, "session/new", {"cwd": "/w/closed"})
            loaded = {"sessionId": "stored-a", "cwd": "/w/loaded", "mcpServers": []}
            assert (await _call(bridge, 4, "session/load", loaded))["result"] == {}
            resumed = {"sessionId": "stored-b", "cwd": "/w/resumed"}
            assert (await _call(bridge, 5, "session/resume", resumed))["result"] == {}
            await _call(bridge, 6, "session/close", {"sessionId": "sess-2"})
            error = await _call(bridge, 7, "test/close", {"code": 1012, "reason": "restarting"})
            assert error["error"]["data"]["reconnecting"] is True
            reply = await _call(bridge, 8, "test/echo", {})
            assert reply["result"]["method"] == "test/echo"
            await bridge.close_stdin()
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    assert len(gateway.connections) == 2
    replayed = gateway.connections[1]
    assert [(m["method"], m.get("params")) for m in replayed] == [
        ("initialize", {"protocolVersion": 1}),
        ("session/resume", {"sessionId": "sess-1", "cwd": "/w/new"}),
        ("session/resume", loaded),
        ("session/resume", resumed),
        ("test/echo", {}),
    ]


async def test_frames_sent_while_the_gateway_is_down_are_held_and_delivered_once(
    server: RestartableGateway, tmp_path: Path
) -> None:
    gateway = server.gateway
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server) as bridge:
            await _call(bridge, 1, "session/new", {"cwd": "/w"})
            await server.stop()
            await bridge.wait_for_stderr("reconnecting")
            # Nothing listens now: these are held...
            await bridge.send_line(jsonrpc_request(2, "test/echo", {"n": 2}))
            await bridge.send_line(b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}')
            await bridge.send_line(jsonrpc_request(3, "test/echo", {"n": 3}))
            # ...and delivered once the gateway is back, after the session is resumed.
            await server.start()
            replies = [await bridge.read_json(), await bridge.read_json()]
            assert [r["id"] for r in replies] == [2, 3]
            assert all("result" in r for r in replies)
            await bridge.close_stdin()
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    methods = [m.get("method") for m in gateway.connections[-1]]
    assert methods == ["session/resume", "test/echo", "session/cancel", "test/echo"]
    assert len(gateway.connections) == 2


async def test_a_gateway_that_stays_down_makes_the_bridge_give_up(
    server: RestartableGateway, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server, "--reconnect-max-secs", "1") as bridge:
            await _call(bridge, 1, "test/echo")
            await server.stop()
            await bridge.wait_for_stderr("reconnecting")
            await bridge.send_line(jsonrpc_request(2, "test/echo"))  # held, never sent
            error = await bridge.read_json()
            assert await bridge.wait() == 1
    assert error["id"] == 2
    assert "the bridge stopped before this request was sent" in error["error"]["message"]
    assert f"gave up reconnecting to ws://127.0.0.1:{server.port}/acp after 1 s" in (
        bridge.stderr_text
    )
    await server.start()  # for the fixture's stop()


async def test_401_on_reconnect_stops_at_once_with_exit_3(
    server: RestartableGateway, tmp_path: Path
) -> None:
    gateway = server.gateway
    gateway.token = "before"
    config_dir = tmp_path / "cfg"
    write_config(config_dir, server.port)
    env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "before"})
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env) as bridge:
            await _call(bridge, 1, "test/echo")
            gateway.token = "after"  # the bridge's token was revoked meanwhile
            await _call(bridge, 2, "test/close", {"code": 1012})
            assert await bridge.wait() == 3
    assert len(gateway.upgrade_requests) == 2  # one reconnect attempt, no retry storm
    assert "HTTP 401" in bridge.stderr_text
    assert "ZEROCLAW_ACP_BRIDGE_TOKEN was rejected" in bridge.stderr_text


async def test_a_busy_gateway_on_the_first_connection_is_retried_unseen_by_the_ide(
    server: RestartableGateway, tmp_path: Path
) -> None:
    server.gateway.busy_upgrades = 3  # a reconnect storm is under way: 503 three times
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server) as bridge:
            reply = await _call(bridge, 1, "initialize", {"protocolVersion": 1})
            assert reply["id"] == 1
            assert "result" in reply, reply
            await bridge.close_stdin()
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    assert len(server.gateway.upgrade_requests) == 4


async def test_close_1008_means_rejected_and_is_not_retried(
    server: RestartableGateway, tmp_path: Path
) -> None:
    server.gateway.token = "paired"
    config_dir = tmp_path / "cfg"
    write_config(config_dir, server.port)
    env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "paired"})
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env) as bridge:
            error = await _call(bridge, 1, "test/close", {"code": 1008, "reason": "revoked"})
            assert "reconnecting" not in error["error"]["data"]
            assert await bridge.wait() == 3
    assert len(server.gateway.upgrade_requests) == 1
    assert "rejected this connection (close code 1008: revoked)" in bridge.stderr_text
    # The same advice as after a 401: which token was refused and how to pair again.
    assert "ZEROCLAW_ACP_BRIDGE_TOKEN was rejected" in bridge.stderr_text
    assert "zeroclaw gateway get-paircode --new" in bridge.stderr_text
    assert "zeroclaw-acp-bridge --pair-code <code>" in bridge.stderr_text


async def test_a_permission_answered_after_a_reconnect_is_dropped_not_misdelivered(
    server: RestartableGateway, tmp_path: Path
) -> None:
    gateway = server.gateway
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server) as bridge:
            await bridge.send_line(jsonrpc_request(10, "test/ask"))
            old = await bridge.read_json()
            assert (old["id"], old["method"]) == ("zc-out-0", "session/request_permission")
            # The connection drops while the IDE is still looking at the dialog.
            errors = [
                await _call(bridge, 11, "test/close", {"code": 1012}),
                await bridge.read_json(),
            ]
            assert sorted(e["id"] for e in errors) == [10, 11]
            # On the new connection the gateway numbers its requests from zc-out-0 again.
            await bridge.send_line(jsonrpc_request(12, "test/ask"))
            new = await bridge.read_json()
            assert new["method"] == "session/request_permission"
            assert new["id"] != "zc-out-0"  # renamed: it must not be confused with the old one
            # The late answer to the old dialog goes nowhere...
            await bridge.send_line(b'{"jsonrpc":"2.0","id":"zc-out-0","result":{"pick":"old"}}')
            await bridge.wait_for_stderr(
                "dropped the client's answer to session/request_permission"
            )
            # ...and the answer to the new one reaches the gateway under the gateway's own id.
            answer = {"jsonrpc": "2.0", "id": new["id"], "result": {"pick": "new"}}
            await bridge.send_line(json_bytes(answer))
            reply = await bridge.read_json()
            assert reply == {
                "jsonrpc": "2.0",
                "id": 12,
                "result": {"answer": {"pick": "new"}},
            }
            await bridge.close_stdin()
            assert await bridge.wait() == 0
    answers = [m for m in gateway.connections[1] if "method" not in m]
    assert answers == [{"jsonrpc": "2.0", "id": "zc-out-0", "result": {"pick": "new"}}]


async def test_the_hold_is_bounded(server: RestartableGateway, tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server, "--reconnect-max-secs", "30") as bridge:
            await _call(bridge, "connected", "test/echo")
            await server.stop()
            await bridge.wait_for_stderr("reconnecting")
            lines = b"".join(jsonrpc_request(i, "test/echo") + b"\n" for i in range(1001))
            await bridge.send(lines)
            refused = await bridge.read_json()
            assert refused["id"] == 1000
            assert "already holds 1000 messages" in refused["error"]["message"]
            assert refused["error"]["data"]["bridge"] == "reconnecting"
            await server.start()
            ids = {(await bridge.read_json())["id"] for _ in range(1000)}
            assert ids == set(range(1000))
            await bridge.close_stdin()
            assert await bridge.wait() == 0


def json_bytes(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


async def _silent_gateway(
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accepts the WebSocket upgrade, then never answers anything (not even pings): a gateway
    that hangs, or a network path that silently drops packets."""

    async def handle(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some(4096)
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + WEBSOCKET_GUID).digest())
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        while await stream.receive_some(65536):
            pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def test_a_gateway_that_stops_answering_pings_is_detected(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    port = await nursery.start(_silent_gateway)
    config_dir = tmp_path / "cfg"
    write_config(config_dir, port, require_pairing=False)
    args = ["--config-dir", str(config_dir), "--no-reconnect"]
    args += ["--ping-interval", "0.2", "--ping-timeout", "0.3"]
    with trio.fail_after(TIMEOUT):
        async with running_bridge(*args, env=bridge_env(tmp_path)) as bridge:
            await bridge.send_line(jsonrpc_request(1, "session/prompt", {"sessionId": "s"}))
            error = await bridge.read_json()
            assert await bridge.wait() == 1
    assert error["id"] == 1
    assert "stopped answering pings" in error["error"]["message"]
    assert error["error"]["data"]["sessionId"] == "s"
    assert "stopped answering pings" in bridge.stderr_text
    nursery.cancel_scope.cancel()


async def test_a_gateway_that_drops_every_connection_causes_no_reconnect_storm(
    server: RestartableGateway, tmp_path: Path
) -> None:
    gateway = server.gateway
    with trio.fail_after(TIMEOUT):
        async with _bridge(tmp_path, server, "--reconnect-max-secs", "1.5") as bridge:
            await _call(bridge, 1, "session/new", {"cwd": "/w"})
            gateway.close_on_connect = 1011
            await _call(bridge, 2, "test/close", {"code": 1011})
            assert await bridge.wait() == 1
    # Backoff keeps growing across connections that die at once: a handful, not hundreds.
    assert 3 <= len(gateway.connections) <= 15
    assert "gave up reconnecting" in bridge.stderr_text
