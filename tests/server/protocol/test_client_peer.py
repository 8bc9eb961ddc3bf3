"""The shared JSON-RPC peer (``acp_server.protocol.client``) in its push style, as
`zeroclaw prompt` uses it: results and errors reach the waiting request, server requests
are answered in their own task, and a connection that ends fails what still waits."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from acp_core.jsonrpc import Notification, Request
from acp_server.protocol.client import ErrorReply, JsonRpcPeer, PeerClosed, not_handled


class ScriptedSide:
    """The other side of the peer's ``MessageTransport``: what it sent, what it reads."""

    def __init__(self) -> None:
        self.to_peer, self._peer_inbox = trio.open_memory_channel[str | None](16)
        self._peer_outbox, self.from_peer = trio.open_memory_channel[bytes](16)

    async def receive_message(self) -> str | None:
        return await self._peer_inbox.receive()

    async def send_message(self, payload: bytes) -> None:
        await self._peer_outbox.send(payload)

    async def aclose(self) -> None:
        await self._peer_outbox.aclose()

    async def next_sent(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await self.from_peer.receive())
        return message


async def test_results_and_errors_reach_their_requests_and_calls_are_answered() -> None:
    side = ScriptedSide()
    peer = JsonRpcPeer(side, id_prefix="cli-")
    notes: list[Notification] = []

    async def on_call(request: Request) -> Any:
        if request.method != "session/request_permission":
            raise not_handled(request)
        return {"outcome": {"outcome": "cancelled"}}

    async with trio.open_nursery() as nursery:
        await nursery.start(
            lambda task_status: peer.serve(
                on_notification=notes.append, on_call=on_call, task_status=task_status
            )
        )
        results: list[Any] = []

        async def ask() -> None:
            results.append(await peer.request_result("initialize", {"protocolVersion": 1}))
            with pytest.raises(ErrorReply) as refused:
                await peer.request_result("session/new", {"cwd": "/nowhere"})
            results.append((refused.value.code, refused.value.message))

        nursery.start_soon(ask)
        first = await side.next_sent()
        assert first == {
            "jsonrpc": "2.0",
            "id": "cli-0",
            "method": "initialize",
            "params": {"protocolVersion": 1},
        }
        await side.to_peer.send(
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}'
        )
        await side.to_peer.send('{"jsonrpc":"2.0","id":"zc-out-0","method":"fs/read_text_file"}')
        refused = await side.next_sent()
        assert refused["id"] == "zc-out-0"
        assert refused["error"]["code"] == -32601
        assert refused["error"]["message"] == "Method not found: fs/read_text_file"
        await side.to_peer.send(
            '{"jsonrpc":"2.0","id":"zc-out-1","method":"session/request_permission",'
            '"params":{"sessionId":"s","options":[]}}'
        )
        assert await side.next_sent() == {
            "jsonrpc": "2.0",
            "id": "zc-out-1",
            "result": {"outcome": {"outcome": "cancelled"}},
        }
        await side.to_peer.send('{"jsonrpc":"2.0","id":"cli-0","result":{"protocolVersion":1}}')
        second = await side.next_sent()
        assert second["id"] == "cli-1"
        await side.to_peer.send(
            '{"jsonrpc":"2.0","id":"cli-1","error":{"code":-32602,"message":"bad cwd"}}'
        )
        await side.to_peer.send(None)  # the other side closes: serve returns
    assert results == [{"protocolVersion": 1}, (-32602, "bad cwd")]
    assert [note.method for note in notes] == ["session/update"]
    assert peer.rpc.pending_requests == {}


async def test_a_request_still_waiting_when_the_connection_ends_fails() -> None:
    side = ScriptedSide()
    peer = JsonRpcPeer(side)
    failures: list[BaseException] = []

    async def ask() -> None:
        try:
            await peer.request_result("session/prompt", {"sessionId": "s"})
        except PeerClosed as error:
            failures.append(error)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: peer.serve(
                    on_notification=lambda _note: None,
                    on_call=not_answered,
                    task_status=task_status,
                )
            )
            nursery.start_soon(ask)
            await side.next_sent()
            await side.to_peer.send(None)
    assert [str(error) for error in failures] == [
        "the connection ended before session/prompt was answered"
    ]


async def not_answered(request: Request) -> Any:
    raise not_handled(request)


async def test_pull_style_ids_come_from_the_rpc_connection_and_are_settled() -> None:
    side = ScriptedSide()
    peer = JsonRpcPeer(side)
    with trio.fail_after(5):
        request_id = await peer.request("initialize", {})
        assert request_id == "client-0"
        assert peer.rpc.pending_requests == {"client-0": "initialize"}
        await side.to_peer.send('{"jsonrpc":"2.0","method":"session/update","params":{}}')
        await side.to_peer.send('{"jsonrpc":"2.0","id":"client-0","result":{}}')
        response = await peer.wait_response(request_id)
    assert response == {"jsonrpc": "2.0", "id": "client-0", "result": {}}
    assert peer.notifications == [{"jsonrpc": "2.0", "method": "session/update", "params": {}}]
    assert peer.rpc.pending_requests == {}
    # A chosen id is sent as it is, and is not one of the connection's own.
    assert await peer.request("initialize", request_id=7) == 7
    assert json.loads(await side.from_peer.receive())["id"] == "client-0"
    assert json.loads(await side.from_peer.receive())["id"] == 7
