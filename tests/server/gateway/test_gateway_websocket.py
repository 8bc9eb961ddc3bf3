"""The WebSocket MessageTransport over in-memory streams, driven by a wsproto client."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Event, Ping, Pong, TextMessage
from wsproto.frame_protocol import CloseReason

from acp_core.errors import RemoteProtocolError
from acp_server.gateway.websocket import WebSocketTransport
from acp_server.protocol.transport import TransportClosed


@dataclass
class Client:
    """The peer: a raw wsproto client connection over the other end of the pipe."""

    stream: trio.abc.Stream
    ws: Connection = field(default_factory=lambda: Connection(ConnectionType.CLIENT))

    async def send(self, event: Event) -> None:
        await self.stream.send_all(self.ws.send(event))

    async def next_event(self) -> Event:
        while True:
            for event in self.ws.events():
                return event
            data = await self.stream.receive_some(65536)
            self.ws.receive_data(bytes(data) if data else None)

    async def text_messages(self, count: int) -> list[str]:
        """The next ``count`` whole text messages (any other frame fails the test)."""
        received: list[str] = []
        parts: list[str] = []
        while len(received) < count:
            event = await self.next_event()
            assert isinstance(event, TextMessage)
            parts.append(event.data)
            if event.message_finished:
                received.append("".join(parts))
                parts.clear()
        return received


@pytest.fixture
async def pair(nursery: trio.Nursery) -> tuple[WebSocketTransport, Client]:
    server_stream, client_stream = trio.testing.memory_stream_pair()
    transport = WebSocketTransport(
        server_stream, peer="test", max_message_bytes=1000, ping_interval_secs=0
    )
    nursery.start_soon(transport.run_reader)
    return transport, Client(client_stream)


async def test_text_frames_in_and_out(pair: tuple[WebSocketTransport, Client]) -> None:
    transport, client = pair
    with trio.fail_after(5):
        await client.send(TextMessage(data='{"jsonrpc":"2.0","id":1,"method":"initialize"}'))
        assert await transport.receive_message() == '{"jsonrpc":"2.0","id":1,"method":"initialize"}'
        await transport.send_message(b'{"jsonrpc":"2.0","id":1,"result":{}}')
        event = await client.next_event()
    assert isinstance(event, TextMessage)
    assert event.data == '{"jsonrpc":"2.0","id":1,"result":{}}'


async def test_large_outbound_message_uses_the_64_bit_length(
    pair: tuple[WebSocketTransport, Client],
) -> None:
    transport, client = pair
    payload = b'"' + b"x" * 70_000 + b'"'
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.send_message, payload)
            received = ""
            while True:
                event = await client.next_event()
                assert isinstance(event, TextMessage)
                received += event.data
                if event.message_finished:
                    break
    assert received.encode() == payload


async def test_fragmented_message_is_reassembled(pair: tuple[WebSocketTransport, Client]) -> None:
    transport, client = pair
    with trio.fail_after(5):
        await client.send(TextMessage(data='{"a":', message_finished=False))
        await client.send(TextMessage(data='"é"}', message_finished=True))
        assert await transport.receive_message() == '{"a":"é"}'


async def _reassembled(parts: list[str | bytes]) -> str | RemoteProtocolError | None:
    """What the transport makes of one message sent as ``parts`` (text or binary fragments)."""
    server_stream, client_stream = trio.testing.memory_stream_pair()
    transport = WebSocketTransport(server_stream, peer="test", ping_interval_secs=0)
    client = Client(client_stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(transport.run_reader)
        for index, part in enumerate(parts):
            finished = index == len(parts) - 1
            event: Event = (
                TextMessage(data=part, message_finished=finished)
                if isinstance(part, str)
                else BytesMessage(data=part, message_finished=finished)
            )
            await client.send(event)
        try:
            received: str | RemoteProtocolError | None = await transport.receive_message()
        except RemoteProtocolError as exc:
            received = exc
        nursery.cancel_scope.cancel()
    return received


def _split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({0, len(text), *(cut % (len(text) + 1) for cut in cuts)})
    return [text[start:end] for start, end in itertools.pairwise(points)] or [text]


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=60), st.lists(st.integers(min_value=0), max_size=12))
def test_any_fragmentation_reassembles_the_same_message(text: str, cuts: list[int]) -> None:
    parts = _split(text, cuts)
    assert trio.run(_reassembled, list[str | bytes](parts)) == text
    encoded = text.encode("utf-8")
    byte_parts = [part.encode("utf-8") for part in parts]
    assert trio.run(_reassembled, list[str | bytes](byte_parts)) == encoded.decode()


async def test_fragmented_binary_that_is_not_utf8_is_a_parse_error() -> None:
    with trio.fail_after(5):
        received = await _reassembled([b'{"a":"', b"\xff", b'"}'])
    assert isinstance(received, RemoteProtocolError)
    assert received.reply_hint is not None
    assert received.reply_hint.error.code == -32700


async def test_tiny_fragments_count_against_the_limit_at_their_size(
    pair: tuple[WebSocketTransport, Client],
) -> None:
    """1,000 one-byte fragments fill the 1,000-byte limit exactly; one more closes 1009."""
    transport, client = pair
    with trio.fail_after(10):
        for _ in range(999):
            await client.send(TextMessage(data="x", message_finished=False))
        await client.send(TextMessage(data="x", message_finished=True))
        assert await transport.receive_message() == "x" * 1000
        for _ in range(1001):
            await client.send(TextMessage(data="y", message_finished=False))
        event = await client.next_event()
        assert isinstance(event, CloseConnection)
        assert event.code == CloseReason.MESSAGE_TOO_BIG


async def test_binary_frames_are_decoded_as_utf8(pair: tuple[WebSocketTransport, Client]) -> None:
    transport, client = pair
    with trio.fail_after(5):
        await client.send(BytesMessage(data='{"x":"ü"}'.encode()))
        assert await transport.receive_message() == '{"x":"ü"}'
        await client.send(BytesMessage(data=b"\xff\xfe"))
        with pytest.raises(RemoteProtocolError) as caught:
            await transport.receive_message()
        assert caught.value.reply_hint is not None
        assert caught.value.reply_hint.error.code == -32700
        # ...and the connection keeps serving.
        await client.send(TextMessage(data="{}"))
        assert await transport.receive_message() == "{}"


async def test_oversized_message_closes_with_1009(pair: tuple[WebSocketTransport, Client]) -> None:
    transport, client = pair
    with trio.fail_after(5):
        await client.send(TextMessage(data="x" * 600, message_finished=False))
        await client.send(TextMessage(data="y" * 600, message_finished=True))
        event = await client.next_event()
        assert isinstance(event, CloseConnection)
        assert event.code == CloseReason.MESSAGE_TOO_BIG
        assert "limit" in (event.reason or "")
        assert await transport.receive_message() is None
        with pytest.raises(TransportClosed):
            await transport.send_message(b"{}")


async def test_pings_are_answered(pair: tuple[WebSocketTransport, Client]) -> None:
    _transport, client = pair
    with trio.fail_after(5):
        await client.send(Ping(payload=b"hi"))
        event = await client.next_event()
    assert event == Pong(payload=b"hi")


async def test_peer_close_ends_input_and_is_echoed(pair: tuple[WebSocketTransport, Client]) -> None:
    transport, client = pair
    with trio.fail_after(5):
        await client.send(CloseConnection(code=1000, reason="bye"))
        assert await transport.receive_message() is None
        event = await client.next_event()
        assert isinstance(event, CloseConnection)
        assert event.code == 1000
        await transport.peer_gone.wait()
    assert transport.close_code == 1000


async def test_close_sends_code_and_reason(pair: tuple[WebSocketTransport, Client]) -> None:
    transport, client = pair
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.close, CloseReason.SERVICE_RESTART, "gateway restarting")
            event = await client.next_event()
            assert isinstance(event, CloseConnection)
            assert (event.code, event.reason) == (1012, "gateway restarting")
            await client.send(event.response())
    assert not transport.open


async def test_silent_peer_is_dropped_after_a_ping(autojump_clock: trio.abc.Clock) -> None:
    server_stream, client_stream = trio.testing.memory_stream_pair()
    transport = WebSocketTransport(server_stream, peer="silent", ping_interval_secs=10)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.run_reader)
            nursery.start_soon(transport.run_keepalive)
            # The client never reads nor answers: after one interval a ping goes out, after
            # another the peer is dropped and the ACP layer sees the end of the stream.
            assert await transport.receive_message() is None
            assert transport.close_code == CloseReason.GOING_AWAY
            assert trio.current_time() >= 20
    del client_stream


async def test_answering_peer_is_kept(autojump_clock: trio.abc.Clock) -> None:
    server_stream, client_stream = trio.testing.memory_stream_pair()
    transport = WebSocketTransport(server_stream, peer="alive", ping_interval_secs=10)
    client = Client(client_stream)
    with trio.fail_after(200):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.run_reader)
            nursery.start_soon(transport.run_keepalive)
            for _ in range(5):
                event = await client.next_event()
                assert isinstance(event, Ping)
                await client.send(event.response())
            assert transport.open
            nursery.cancel_scope.cancel()


async def test_batched_messages_arrive_as_separate_frames_in_order(
    pair: tuple[WebSocketTransport, Client],
) -> None:
    transport, client = pair
    payloads = [f'{{"n":{index}}}'.encode() for index in range(50)]
    payloads.insert(25, b'"' + b"b" * 300_000 + b'"')  # forces a write in the middle
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.send_messages, payloads)
            received = await client.text_messages(len(payloads))
    assert [text.encode() for text in received] == payloads


LENGTH_BOUNDARIES = (0, 1, 125, 126, 127, 65_535, 65_536, 65_537)
"""Payload sizes where RFC 6455 §5.2 moves from a 7-bit to a 16-bit to a 64-bit length."""


async def _batch_as_received(payloads: list[bytes]) -> list[str]:
    """The text messages a wsproto client reads after one ``send_messages(payloads)``."""
    server_stream, client_stream = trio.testing.memory_stream_pair()
    transport = WebSocketTransport(server_stream, peer="test", ping_interval_secs=0)
    await transport.send_messages(payloads)
    return await Client(client_stream).text_messages(len(payloads))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(LENGTH_BOUNDARIES), st.text(max_size=8)), min_size=1, max_size=6
    )
)
def test_every_payload_of_a_batch_is_one_text_message_of_its_own(
    shapes: list[tuple[int, str]],
) -> None:
    # Padded up to each length boundary, with any text (multi-byte included) at the end.
    payloads = [b"x" * max(0, size - len(text.encode())) + text.encode() for size, text in shapes]
    received = trio.run(_batch_as_received, payloads)
    assert [message.encode() for message in received] == payloads


async def test_peer_that_stops_reading_is_dropped_and_the_writer_released(
    autojump_clock: trio.abc.Clock,
) -> None:
    # lockstep: every send_all waits until the peer reads, and this peer never reads.
    server_stream, client_stream = trio.testing.lockstep_stream_pair()
    transport = WebSocketTransport(server_stream, peer="stuck", ping_interval_secs=10)
    outcome: list[str] = []

    async def write() -> None:
        try:
            await transport.send_message(b'{"jsonrpc":"2.0","method":"session/update"}')
        except TransportClosed:
            outcome.append("closed")

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.run_reader)
            nursery.start_soon(transport.run_keepalive)
            nursery.start_soon(write)
            assert await transport.receive_message() is None
            await transport.close(
                CloseReason.NORMAL_CLOSURE, ""
            )  # bounded even with a stuck writer
    assert outcome == ["closed"]
    assert transport.close_code == CloseReason.GOING_AWAY
    del client_stream
