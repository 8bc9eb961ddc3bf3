"""The relay's shortcut past ``recv()`` for messages websockets has already received.

A real websockets (trio) server and client in-process: a burst of messages, with binary and
fragmented ones among them, must come out whole and in order whether each was taken from
the queue directly or left to ``recv()``. The shortcut reads websockets' private attributes
(``acp_bridge.ready_messages``); the first test fails when the installed websockets no
longer has them as assumed, so that an upgrade cannot silently slow the relay down.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import partial

import trio
from websockets.trio.client import ClientConnection, connect
from websockets.trio.server import ServerConnection, serve

from acp_bridge.ready_messages import ReadyMessageTaker, ready_message_taker

Outgoing = str | bytes | list[str]


@asynccontextmanager
async def _client_receiving(
    messages: Iterable[Outgoing], *, max_queue: int | None = None
) -> AsyncIterator[ClientConnection]:
    """A client connected to a server that sends ``messages`` as soon as it connects
    (a list of strings is one message sent as that many fragments). ``max_queue``: the
    client's flow control (None: it buffers everything)."""

    async def handler(websocket: ServerConnection) -> None:
        for message in messages:
            await websocket.send(message)
        await websocket.wait_closed()

    async with trio.open_nursery() as nursery:
        server = await nursery.start(partial(serve, handler, 0, host="127.0.0.1", compression=None))
        port = server.listeners[0].socket.getsockname()[1]
        async with connect(
            f"ws://127.0.0.1:{port}", compression=None, proxy=None, max_queue=max_queue
        ) as client:
            yield client
        await server.aclose()
        nursery.cancel_scope.cancel()


async def _queued_frames(client: ClientConnection, count: int) -> None:
    """Wait until websockets holds ``count`` received frames (all of them have arrived)."""
    queue = client.recv_messages.recv_frames
    while queue.statistics().current_buffer_used < count:
        await trio.testing.wait_all_tasks_blocked(0.001)


def _shortcut(client: ClientConnection) -> ReadyMessageTaker:
    take = ready_message_taker(client)
    assert take is not None, "websockets' internals changed: the relay falls back to recv()"
    return take


async def test_the_installed_websockets_has_the_internals_the_shortcut_reads() -> None:
    with trio.fail_after(20):
        async with _client_receiving(['{"a":1}', '{"b":2}']) as client:
            assembler = client.recv_messages
            assert isinstance(assembler.recv_frames, trio.MemoryReceiveChannel)
            waiting = assembler.send_frames._state.data
            assert isinstance(waiting, deque)
            assert assembler.get_in_progress is False
            assert callable(assembler.maybe_resume)
            await _queued_frames(client, 2)
            # The queue websockets' flow control reads holds the very frames recv() returns.
            assert [bytes(frame.data) for frame in waiting] == [b'{"a":1}', b'{"b":2}']
            take = _shortcut(client)
            assert take() == b'{"a":1}'
            assert len(waiting) == 1
            assert await client.recv(decode=False) == b'{"b":2}'
            assert take() is None


async def _read_all(client: ClientConnection, count: int) -> tuple[list[bytes], int]:
    """The relay's reading pattern: one ``recv()``, then whatever is ready, repeated."""
    take = _shortcut(client)
    received: list[bytes] = []
    taken = 0
    while len(received) < count:
        received.append(await client.recv(decode=False))
        while (ready := take()) is not None:
            received.append(ready)
            taken += 1
    return received, taken


async def test_ready_messages_come_out_whole_and_in_order() -> None:
    messages: list[Outgoing] = []
    expected: list[bytes] = []
    frames = 0
    for n in range(200):
        if n % 50 == 7:
            parts = [f'{{"n":{n},', '"part":"two"', "}"]
            messages.append(parts)
            expected.append("".join(parts).encode())
            frames += len(parts)
        elif n % 50 == 9:
            messages.append(f'{{"n":{n},"binary":true}}'.encode())
            expected.append(f'{{"n":{n},"binary":true}}'.encode())
            frames += 1
        else:
            messages.append(f'{{"n":{n}}}')
            expected.append(f'{{"n":{n}}}'.encode())
            frames += 1
    with trio.fail_after(20):
        async with _client_receiving(messages) as client:
            await _queued_frames(client, frames)
            received, taken = await _read_all(client, len(expected))
            assert take_nothing_more(client)
    assert received == expected
    # All 200 were queued before reading: all but the first and those after a fragmented
    # message came by the shortcut.
    assert taken >= len(expected) - 1 - 4


def take_nothing_more(client: ClientConnection) -> bool:
    return _shortcut(client)() is None


async def test_taking_ready_messages_keeps_websockets_flow_control_going() -> None:
    """With a small receive queue websockets stops reading the socket when it fills; taking
    messages by the shortcut must let it read again (``maybe_resume``), as ``recv()`` does,
    or every message after the first pause would trickle in through ``recv()`` alone."""
    messages = [f'{{"n":{n}}}' for n in range(2000)]
    with trio.fail_after(20):
        async with _client_receiving(messages, max_queue=4) as client:
            await _queued_frames(client, 5)  # above max_queue: websockets has paused reading
            received, taken = await _read_all(client, len(messages))
    assert received == [message.encode() for message in messages]
    assert taken > 0


async def test_a_fragmented_message_at_the_head_is_left_to_recv() -> None:
    parts = ['{"a":', "1}"]
    with trio.fail_after(20):
        async with _client_receiving([parts, '{"b":2}']) as client:
            await _queued_frames(client, 3)
            take = _shortcut(client)
            assert take() is None  # the head frame is only the first fragment
            assert await client.recv(decode=False) == b'{"a":1}'
            assert take() == b'{"b":2}'
            assert take() is None
