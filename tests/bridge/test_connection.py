"""The bridge's WebSocket client (``acp_bridge.connection``) against a real websockets server.

The server is websockets' own trio implementation in-process, on 127.0.0.1: messages must
come out whole and in order (text, binary, fragmented), many per read when they arrive
together, pings must be answered, a silent peer must be detected, a refused upgrade must
surface as websockets' ``InvalidStatus``, and closing must complete the RFC 6455 handshake.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.trio.server import ServerConnection, serve

from acp_bridge.connection import KEEPALIVE_CLOSE_REASON, GatewayConnection, connect

Handler = Callable[[ServerConnection], Awaitable[None]]
DEADLINE_SECS = 20


@asynccontextmanager
async def _server(handler: Handler, *, refuse_with: int | None = None) -> AsyncIterator[str]:
    """The URL of a websockets server running ``handler`` (or refusing every upgrade)."""

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        if refuse_with is None:
            return None
        return connection.respond(refuse_with, "no entry\n")

    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            partial(
                serve,
                handler,
                0,
                host="127.0.0.1",
                compression=None,
                process_request=process_request,
                ping_interval=None,
            )
        )
        port = server.listeners[0].socket.getsockname()[1]
        yield f"ws://127.0.0.1:{port}/acp?agent=x"
        await server.aclose()
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def _raw_server(
    after_handshake: Callable[[trio.SocketStream], Awaitable[None]],
) -> AsyncIterator[str]:
    """A server that accepts the upgrade (websockets' sans-I/O ``ServerProtocol``) and then
    does only what ``after_handshake`` does with the socket: the misbehaving gateway."""

    async def handle(stream: trio.SocketStream) -> None:
        protocol = ServerProtocol()
        while not (events := protocol.events_received()):
            protocol.receive_data(await stream.receive_some(65536))
        [request] = events
        assert isinstance(request, Request)
        protocol.send_response(protocol.accept(request))
        await stream.send_all(b"".join(protocol.data_to_send()))
        await after_handshake(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        yield f"ws://127.0.0.1:{port}/acp"
        nursery.cancel_scope.cancel()


def _client(
    url: str,
    *,
    ping_interval: float | None = None,
    ping_timeout: float | None = None,
    max_message_bytes: int = 1 << 20,
) -> AbstractAsyncContextManager[GatewayConnection]:
    return connect(
        url,
        headers={"Authorization": "Bearer t"},
        max_message_bytes=max_message_bytes,
        open_timeout=DEADLINE_SECS,
        close_timeout=2,
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
    )


@asynccontextmanager
async def _connected(handler: Handler, **options: Any) -> AsyncIterator[GatewayConnection]:
    """A ``GatewayConnection`` to a websockets server running ``handler``."""
    async with _server(handler) as url, _client(url, **options) as connection:
        yield connection


async def _receive_all(connection: GatewayConnection) -> tuple[list[bytes], list[int]]:
    """Every message until the server closes, and how many each ``receive()`` returned."""
    messages: list[bytes] = []
    batches: list[int] = []
    while True:
        try:
            batch = await connection.receive()
        except ConnectionClosed:
            return messages, batches
        messages.extend(batch)
        batches.append(len(batch))


async def test_messages_come_out_whole_and_in_order_many_per_read() -> None:
    outgoing: list[str | bytes | list[str]] = []
    expected: list[bytes] = []
    for n in range(300):
        if n % 50 == 7:
            parts = [f'{{"n":{n},', '"part":"two"', "}"]
            outgoing.append(parts)  # one message in three fragments
            expected.append("".join(parts).encode())
        elif n % 50 == 9:
            outgoing.append(f'{{"n":{n},"binary":true}}'.encode())
            expected.append(f'{{"n":{n},"binary":true}}'.encode())
        else:
            outgoing.append(f'{{"n":{n}}}')
            expected.append(f'{{"n":{n}}}'.encode())
    sent = trio.Event()

    async def handler(websocket: ServerConnection) -> None:
        for message in outgoing:
            await websocket.send(message)
        sent.set()
        await websocket.aclose()

    with trio.fail_after(DEADLINE_SECS):
        async with _connected(handler) as connection:
            await sent.wait()
            messages, batches = await _receive_all(connection)
            assert connection.closed is not None
            assert connection.closed.rcvd is not None
            assert connection.closed.rcvd.code == 1000
    assert messages == expected
    # Sent before the first read: they arrive in a few reads, not one read per message.
    assert len(batches) < len(expected) // 10


async def test_the_request_carries_the_path_query_and_headers() -> None:
    seen: list[Request] = []

    async def handler(websocket: ServerConnection) -> None:
        assert websocket.request is not None
        seen.append(websocket.request)
        await websocket.send(await websocket.recv())
        await websocket.wait_closed()

    with trio.fail_after(DEADLINE_SECS):
        async with _connected(handler) as connection:
            await connection.send('{"echo":1}')
            assert await connection.receive() == [b'{"echo":1}']
    [request] = seen
    assert request.path == "/acp?agent=x"
    assert request.headers["Authorization"] == "Bearer t"
    assert request.headers["User-Agent"] == "zeroclaw-acp-bridge"


async def test_a_refused_upgrade_raises_invalid_status_with_the_response() -> None:
    async def handler(websocket: ServerConnection) -> None:
        raise AssertionError("never upgraded")

    with trio.fail_after(DEADLINE_SECS):
        async with _server(handler, refuse_with=401) as url:
            with pytest.raises(InvalidStatus) as refused:
                async with _client(url):
                    pass
    assert refused.value.response.status_code == 401
    assert refused.value.response.body == b"no entry\n"


async def test_pings_are_answered_and_pongs_awaited() -> None:
    async def handler(websocket: ServerConnection) -> None:
        pong = await websocket.ping(b"srv")
        await pong.wait()
        await websocket.send("after the pong")
        await websocket.wait_closed()

    with trio.fail_after(DEADLINE_SECS):
        async with _connected(handler) as connection:
            messages: list[bytes] = []
            while not messages:  # the server's ping is answered while reading
                messages = await connection.receive()
            assert messages == [b"after the pong"]
            pong = await connection.ping()
            while not pong.is_set():
                await connection.receive()


async def test_a_peer_that_stops_answering_pings_fails_the_connection_with_1011() -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()  # never reads, so never answers a ping

    with trio.fail_after(DEADLINE_SECS):
        async with (
            _raw_server(silent) as url,
            _client(url, ping_interval=0.05, ping_timeout=0.1) as connection,
        ):
            await _receive_all(connection)
            closed = connection.closed
    assert closed is not None
    assert closed.sent is not None
    assert (closed.sent.code, closed.sent.reason) == (1011, KEEPALIVE_CLOSE_REASON)
    assert closed.rcvd is None


async def test_a_message_over_the_limit_closes_with_1009() -> None:
    async def handler(websocket: ServerConnection) -> None:
        await websocket.send("x" * 2000)
        await websocket.wait_closed()

    with trio.fail_after(DEADLINE_SECS):
        async with _connected(handler, max_message_bytes=1000) as connection:
            assert await _receive_all(connection) == ([], [])
            with pytest.raises(ConnectionClosed):
                await connection.send("{}")
            closed = connection.closed
    assert closed is not None
    assert closed.sent is not None
    assert closed.sent.code == 1009


async def test_closing_completes_the_handshake_with_the_code_given() -> None:
    codes: list[int | None] = []

    async def handler(websocket: ServerConnection) -> None:
        await websocket.wait_closed()
        codes.append(websocket.close_code)

    with trio.fail_after(DEADLINE_SECS):
        async with _connected(handler) as connection:
            await connection.aclose(1001, "bridge stopped")
            assert connection.closed is not None
            await connection.aclose()  # closing twice is harmless
        await trio.testing.wait_all_tasks_blocked()
    assert codes == [1001]


async def test_a_dropped_tcp_connection_is_a_close_without_frames() -> None:
    async def drop(stream: trio.SocketStream) -> None:
        protocol = ServerProtocol(state=State.OPEN)
        protocol.send_text(b"last words")
        await stream.send_all(b"".join(protocol.data_to_send()))
        await stream.aclose()  # no close frame

    with trio.fail_after(DEADLINE_SECS):
        async with _raw_server(drop) as url, _client(url) as connection:
            messages, _ = await _receive_all(connection)
            closed = connection.closed
    assert messages == [b"last words"]
    assert closed is not None
    assert (closed.rcvd, closed.sent) == (None, None)
