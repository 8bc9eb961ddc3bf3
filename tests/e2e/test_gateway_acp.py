"""`zeroclaw gateway` end to end: ACP over WebSocket, shared store, frames, lost clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from websockets.exceptions import ConnectionClosed

from acp_server.gateway.websocket import DEFAULT_MAX_MESSAGE_BYTES
from acp_server.storage.sqlite import SessionStore
from tests.e2e.gateway_harness import RawWsClient, RunningGateway, WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import spawn_acp
from tests.helpers import TIMING_SENSITIVE, echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e


def _agents_config(tmp_path: Path, **gateway: object) -> Path:
    document = echo_config(
        extra_agents={
            "beta": {
                "model_provider": "echo.default",
                "risk_profile": "default",
                "runtime_profile": "default",
            },
            "off": {
                "enabled": False,
                "model_provider": "echo.default",
                "risk_profile": "default",
                "runtime_profile": "default",
            },
        }
    )
    document["acp"] = {"default_agent": "echo"}
    document["gateway"] = {"require_pairing": False, **gateway}
    return write_config(tmp_path / "cfg", document)


def _stored_alias(config_dir: Path, session_id: str) -> str:
    store = SessionStore.open(config_dir / "data" / "sessions" / "acp-sessions.db")
    try:
        stored = store.load_session(session_id)
    finally:
        store.close()
    assert stored is not None
    return stored.info.agent_alias


async def _session_new(gateway: RunningGateway, query: str, **params: object) -> dict[str, object]:
    async with ws_connect(gateway.ws_url(query)) as ws:
        rpc = WsRpc(ws)
        await rpc.call("initialize", {"protocolVersion": 1})
        cwd = session_dir(gateway.config_dir)
        return await rpc.call("session/new", {"cwd": str(cwd), **params})


async def test_agent_query_parameter_follows_the_documented_precedence(tmp_path: Path) -> None:
    config_dir = _agents_config(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            cases = [
                ("agent=echo", {"agentAlias": "beta"}, "beta"),  # 1. explicit beats ?agent=
                ("agent=echo", {"agent": "beta"}, "beta"),  # ... in its short form too
                ("agent=beta", {}, "beta"),  # 2. ?agent= beats [acp].default_agent
                ("agent=%20%20", {}, "echo"),  # blank ?agent= is absent → 3. default_agent
                ("", {}, "echo"),  # 3.
            ]
            for query, params, expected in cases:
                reply = await _session_new(gateway, query, **params)
                assert "result" in reply, (query, reply)
                session_id = reply["result"]["sessionId"]  # type: ignore[index]
                assert _stored_alias(config_dir, session_id) == expected, (query, params)
            # Unknown or disabled: -32602 at session/new (the upgrade itself succeeded).
            for query, needle in (("agent=nope", "nope"), ("agent=off", "off")):
                reply = await _session_new(gateway, query)
                error = reply["error"]
                assert error["code"] == -32602, reply  # type: ignore[index]
                assert needle in error["message"]  # type: ignore[index]


async def test_session_created_over_websocket_loads_over_websocket_and_stdio(
    tmp_path: Path,
) -> None:
    config_dir = _agents_config(tmp_path)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            async with ws_connect(gateway.ws_url()) as ws:
                rpc = WsRpc(ws)
                session_id = await rpc.new_session(workspace)
                reply = await rpc.prompt(session_id, "remember the tide")
                assert reply["result"]["stopReason"] == "end_turn"
                chunks = [
                    n["params"]["update"]["content"]["text"]
                    for n in rpc.notifications
                    if n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                ]
                assert "".join(chunks) == "remember the tide"

            # Another WebSocket connection of the same daemon: replay.
            async with ws_connect(gateway.ws_url()) as ws:
                rpc = WsRpc(ws)
                await rpc.call("initialize", {})
                loaded = await rpc.call("session/load", {"sessionId": session_id})
                assert loaded["result"].keys() == {"modes", "configOptions"}
                kinds = [n["params"]["update"]["sessionUpdate"] for n in rpc.notifications]
                assert kinds == ["user_message_chunk", "agent_message_chunk"]

            # And a separate `zeroclaw acp` process over stdio, same config dir.
            async with spawn_acp(config_dir) as client:
                await client.call("initialize", {"protocolVersion": 1})
                loaded = await client.call("session/load", {"sessionId": session_id})
                assert loaded["result"].keys() == {"modes", "configOptions"}
                replayed = client.updates(session_id)
                assert replayed[-1]["content"]["text"] == "remember the tide"
                assert "remember the tide" in replayed[0]["content"]["text"]


async def test_frames_binary_and_oversize(tmp_path: Path) -> None:
    config_dir = _agents_config(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            async with ws_connect(gateway.ws_url()) as ws:
                # A binary frame carrying UTF-8 JSON is served like a text frame.
                await ws.send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
                reply = json.loads(await ws.recv())
                assert reply["id"] == 1
                assert reply["result"]["protocolVersion"] == 1
                # Bad JSON gets -32700 and the connection keeps serving.
                await ws.send("{not json")
                assert json.loads(await ws.recv())["error"]["code"] == -32700

            async with ws_connect(gateway.ws_url()) as ws:
                await ws.send("x" * (DEFAULT_MAX_MESSAGE_BYTES + 1))
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
                assert closed.value.rcvd is not None
                assert closed.value.rcvd.code == 1009
                assert "limit" in closed.value.rcvd.reason

            # A message of exactly the limit is still read whole and answered.
            async with ws_connect(gateway.ws_url()) as ws:
                head = '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"nope","prompt":"'
                tail = '"}}'
                padding = DEFAULT_MAX_MESSAGE_BYTES - len(head) - len(tail)
                await ws.send(head + "p" * padding + tail)
                reply = json.loads(await ws.recv())
                assert reply["id"] == 2
                assert reply["error"]["code"] == -32000  # session not found: it was parsed


async def _raw_prompt(
    gateway: RunningGateway, workspace: Path, prompt: str
) -> tuple[RawWsClient, str]:
    """A raw client that has sent initialize, session/new and a session/prompt."""
    client = await RawWsClient.open(gateway.port, token=None)
    await client.send_json({"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    await client.next_json()
    new = {"cwd": str(workspace)}
    await client.send_json({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new})
    session_id: str = (await client.next_json())["result"]["sessionId"]
    params = {"sessionId": session_id, "prompt": prompt}
    await client.send_json(
        {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": params}
    )
    return client, session_id


async def test_vanishing_clients_cancel_their_turns_and_others_keep_working(
    tmp_path: Path,
) -> None:
    config_dir = _agents_config(tmp_path)
    document_path = config_dir / "config.toml"
    document_path.write_text(
        document_path.read_text().replace("chunk_delay_ms = 0", "chunk_delay_ms = 50")
    )
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            # Mid-turn: a long streamed answer, the client disappears after the first chunk.
            mid_turn, session_id = await _raw_prompt(gateway, workspace, " ".join(["word"] * 400))
            first = await mid_turn.next_json()
            assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"

            # Mid-permission: file_write needs approval in supervised mode; never answered.
            mid_permission, _ = await _raw_prompt(
                gateway, workspace, '/tool file_write {"path": "marker.txt", "content": "x"}'
            )
            while True:
                message = await mid_permission.next_json()
                if message.get("method") == "session/request_permission":
                    break
            await gateway.wait_for_connections(2)
            await mid_turn.vanish()
            await mid_permission.vanish()
            await gateway.wait_for_connections(0)
            # Both turns ended with their connections: nothing was written or persisted.
            assert not (workspace / "marker.txt").exists()

            async with ws_connect(gateway.ws_url()) as ws:
                rpc = WsRpc(ws)
                new_session = await rpc.new_session(workspace)
                reply = await rpc.prompt(new_session, "still here")
                assert reply["result"]["content"] == "still here"
                # The cancelled turn was not persisted: its session replays nothing.
                loaded = await rpc.call("session/load", {"sessionId": session_id})
                assert loaded["result"].keys() == {"modes", "configOptions"}
                assert not [n for n in rpc.notifications if n["params"]["sessionId"] == session_id]
            assert not (workspace / "marker.txt").exists()


@TIMING_SENSITIVE
async def test_keepalive_drops_a_silent_peer_and_keeps_a_live_one(tmp_path: Path) -> None:
    config_dir = _agents_config(tmp_path, websocket_ping_interval_secs=1)
    with trio.fail_after(30):
        # The websockets client answers pings by itself; the raw one never reads.
        async with run_gateway(config_dir) as gateway, ws_connect(gateway.ws_url()) as ws:
            silent = await RawWsClient.open(gateway.port, token=None)
            await gateway.wait_for_connections(2)
            await gateway.wait_for_connections(1, within=8)
            await gateway.log.wait_for("did not answer a ping")
            assert "result" in await WsRpc(ws).call("initialize", {})
            await silent.vanish()


async def test_concurrent_connections_stream_every_chunk_in_order(tmp_path: Path) -> None:
    config_dir = _agents_config(tmp_path)
    workspace = tmp_path / "work"
    workspace.mkdir()
    texts: dict[int, str] = {}

    async def one(gateway: RunningGateway, index: int) -> None:
        words = " ".join(f"c{index}w{k}" for k in range(30))
        async with ws_connect(gateway.ws_url()) as ws:
            rpc = WsRpc(ws)
            session_id = await rpc.new_session(workspace)
            reply = await rpc.prompt(session_id, words)
            assert reply["result"]["stopReason"] == "end_turn"
            texts[index] = "".join(
                n["params"]["update"]["content"]["text"]
                for n in rpc.notifications
                if n["params"]["sessionId"] == session_id
                and n["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )

    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway, trio.open_nursery() as nursery:
            for index in range(20):
                nursery.start_soon(one, gateway, index)
    assert texts == {i: " ".join(f"c{i}w{k}" for k in range(30)) for i in range(20)}
