"""The SSE streams of one Streamable HTTP connection (gateway/event_streams.py): numbering,
resuming with Last-Event-ID, the byte limits, the session stream cap, one reader each; and
the write timeout of a stream whose client stopped reading (gateway/streamable_http.py)."""

from __future__ import annotations

import h11
import pytest
import trio
import trio.testing

from acp_server.gateway.event_streams import (
    EventStreams,
    ResumeGap,
    SseEvent,
    UnknownEventId,
    encode_comment,
    encode_events,
)
from acp_server.gateway.streamable_http import DEFAULT_STREAM_WRITE_TIMEOUT_SECS, _ChunkWriter
from acp_server.protocol.transport import TransportClosed


def _streams(*, pending: int = 1 << 20, window: int = 1 << 20, sessions: int = 4) -> EventStreams:
    return EventStreams(
        max_pending_bytes=pending, resume_window_bytes=window, max_session_streams=sessions
    )


def test_frames_are_sse_events_with_their_number() -> None:
    events = [SseEvent(1, b'{"a":1}'), SseEvent(2, b'{"b":"x\\ny"}')]
    assert encode_events(events) == b'id: 1\ndata: {"a":1}\n\nid: 2\ndata: {"b":"x\\ny"}\n\n'
    assert encode_comment("gateway restarting,\n retry") == b": gateway restarting, retry\n\n"


async def test_events_are_numbered_across_the_connection_and_resumed_per_stream() -> None:
    streams = _streams()
    session = streams.register("s1")
    assert session is not None
    for payload, stream in [(b"c1", streams.connection), (b"s1", session), (b"s2", session)]:
        await streams.publish(stream, payload)
    assert [e.seq for e in streams.take(session, 1 << 20)] == [2, 3]
    assert [e.seq for e in streams.take(streams.connection, 1 << 20)] == [1]
    await streams.publish(session, b"s3")
    # A resume from event 2 gets what was written after it; what waits comes next anyway.
    assert [e.payload for e in streams.replay(session, 2)] == [b"s2"]
    assert streams.replay(session, 3) == []
    assert [e.seq for e in streams.take(session, 1 << 20)] == [4]
    with pytest.raises(UnknownEventId):
        streams.replay(session, 5)
    with pytest.raises(UnknownEventId):
        streams.replay(session, -1)


async def test_a_resume_past_the_window_is_refused_not_shortened() -> None:
    streams = _streams(window=10)
    stream = streams.connection
    for index in range(4):
        await streams.publish(stream, b"%04d" % index)  # 4 bytes each
        streams.take(stream, 1 << 20)
    # 16 bytes were written, 10 may be kept: events 1 and 2 are gone.
    assert [e.seq for e in stream.sent] == [3, 4]
    assert [e.seq for e in streams.replay(stream, 2)] == [3, 4]
    with pytest.raises(ResumeGap):
        streams.replay(stream, 1)


async def test_take_joins_events_up_to_a_size_but_always_one() -> None:
    streams = _streams()
    stream = streams.connection
    for payload in (b"x" * 10, b"y" * 10, b"z" * 10):
        await streams.publish(stream, payload)
    assert [len(e.payload) for e in streams.take(stream, 25)] == [10, 10]
    assert [len(e.payload) for e in streams.take(stream, 5)] == [10]
    assert streams.take(stream, 5) == []


async def test_unread_events_hold_back_the_publisher_until_a_reader_takes_them() -> None:
    streams = _streams(pending=20)
    stream = streams.connection
    await streams.publish(stream, b"a" * 15)
    published = trio.Event()

    async def publish_more() -> None:
        await streams.publish(stream, b"b" * 15)
        published.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(publish_more)
        await trio.testing.wait_all_tasks_blocked()
        assert not published.is_set()  # 30 bytes would pass the 20-byte limit
        assert streams.pending_bytes == 15
        streams.take(stream, 1 << 20)
        await published.wait()
    assert streams.pending_bytes == 15


async def test_a_closed_connection_refuses_new_events() -> None:
    streams = _streams()
    streams.close()
    with pytest.raises(TransportClosed):
        await streams.publish(streams.connection, b"late")


async def test_session_streams_are_capped_forgetting_idle_ones_first() -> None:
    streams = _streams(sessions=2)
    first, second = streams.register("s1"), streams.register("s2")
    assert first is not None
    assert second is not None
    await streams.publish(first, b"waiting")
    reader = streams.attach(second)
    # Both busy (one has an event waiting, one a reader): no room.
    assert streams.register("s3") is None
    streams.detach(second, reader)
    third = streams.register("s3")
    assert third is not None
    assert list(streams.sessions) == ["s1", "s3"]
    # An unknown session's messages go to the connection's stream.
    assert streams.route("s2") is streams.connection
    assert streams.route("s1") is first


async def test_a_new_reader_takes_the_stream_over() -> None:
    streams = _streams()
    stream = streams.connection
    old = streams.attach(stream)
    new = streams.attach(stream)
    assert stream.reader is new
    assert streams.readers == 1
    streams.detach(stream, old)  # the old reader ending leaves the new one in place
    assert (stream.reader, streams.readers) == (new, 1)
    streams.detach(stream, new)
    assert (stream.reader, streams.readers) == (None, 0)


async def test_a_stream_whose_client_stops_reading_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # lockstep: a write completes only when the other side reads it, as over a TCP
    # connection whose client has stopped reading and whose buffers are full.
    sender, _receiver = trio.testing.lockstep_stream_pair()
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(b"GET /acp HTTP/1.1\r\nHost: x\r\n\r\n")
    connection.next_event()
    connection.send(h11.Response(status_code=200, headers=[]))
    writer = _ChunkWriter(sender, connection)
    started = trio.current_time()
    with pytest.raises(trio.TooSlowError):
        await writer.write(b"data: {}\n\n")
    assert trio.current_time() - started == DEFAULT_STREAM_WRITE_TIMEOUT_SECS
