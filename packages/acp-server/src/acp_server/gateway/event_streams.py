"""The server-sent event streams of one Streamable HTTP connection: what waits, what was sent.

ACP's Streamable HTTP draft (the ACP RFD "Streamable HTTP & WebSocket Transport") carries
every server→client message on long-lived GET responses in the SSE format (WHATWG HTML,
"Server-sent events"): one connection-scoped stream (a GET with ``Acp-Connection-Id``) and
one stream per session (with ``Acp-Session-Id`` too). This module is the bookkeeping of
those streams, without socket I/O:

* Every event gets a number, increasing over the whole connection, sent as its SSE ``id``.
  A client whose GET broke may open it again with ``Last-Event-ID`` (MCP's Streamable
  HTTP, "Resumability and Redelivery", which the ACP draft lists as future work): the
  events of that stream after that number are written again, as long as the connection
  still holds them. Written events are kept within ``resume_window_bytes`` for the whole
  connection, oldest dropped first; a resume that would skip a dropped event is refused
  (``ResumeGap``), never silently short.
* Events routed to a stream nobody reads yet (a client opens a session's stream once it
  has learnt the session id) wait, up to ``max_pending_bytes`` for the whole connection;
  beyond that ``publish`` waits (backpressure, as for a WebSocket peer that does not read).
* One reader per stream: a new GET takes a stream over and the previous reader ends (a
  client reconnecting after a network failure may reach us before the old socket is
  known to be dead). ``attach`` hands out the token that says who the reader is.
* Session streams are capped (``max_session_streams``): past the cap the stream least
  recently used that has no reader and nothing waiting is forgotten; if every stream is
  busy, ``register`` refuses.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import trio

from acp_server.protocol.limits import ByteBudget
from acp_server.protocol.transport import TransportClosed

SSE_KEEPALIVE: Final = b": keepalive\n\n"
"""An SSE comment: ignored by clients, but it keeps proxies from timing out a quiet stream
and shows us a client that has gone."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server→client JSON-RPC message and its event number."""

    seq: int
    payload: bytes


def encode_events(events: Iterable[SseEvent]) -> bytes:
    """SSE frames: ``id: N`` and one ``data:`` line each (serialised JSON has no raw
    newline), ended by a blank line."""
    return b"".join([b"id: %d\ndata: %b\n\n" % (event.seq, event.payload) for event in events])


def encode_comment(text: str) -> bytes:
    """An SSE comment line (what a person reading the stream sees; clients ignore it)."""
    return b": " + " ".join(text.split()).encode("utf-8") + b"\n\n"


class ResumeGap(Exception):
    """Some events after the client's ``Last-Event-ID`` are no longer held."""


class UnknownEventId(Exception):
    """``Last-Event-ID`` names an event this connection never sent."""


class EventStream:
    """One stream (``scope``: None for the connection's, else a session id)."""

    __slots__ = ("_changed", "_waiting", "evicted_through", "pending", "reader", "scope", "sent")

    def __init__(self, scope: str | None) -> None:
        self.scope = scope
        self.pending: deque[SseEvent] = deque()
        """Routed here, not yet handed to a reader."""
        self.sent: deque[SseEvent] = deque()
        """Handed to a reader, kept for a resume (within the connection's window)."""
        self.evicted_through = 0
        """The highest number of this stream's events dropped from ``sent``."""
        self.reader: object | None = None
        self._changed = trio.Event()
        self._waiting = False

    @property
    def idle(self) -> bool:
        """No reader and nothing waiting: the stream can be forgotten without loss."""
        return self.reader is None and not self.pending

    async def wait_changed(self) -> None:
        """Until an event is routed here, the reader changes or the streams close."""
        self._waiting = True
        try:
            await self._changed.wait()
        finally:
            self._waiting = False

    def notify(self) -> None:
        # Only a waiting reader needs waking (one that is writing takes what is queued
        # next): a busy stream costs no event per message.
        if self._waiting:
            self._changed.set()
            self._changed = trio.Event()


class EventStreams:
    """The connection-scoped stream and the session streams of one connection."""

    def __init__(
        self, *, max_pending_bytes: int, resume_window_bytes: int, max_session_streams: int
    ) -> None:
        self.connection = EventStream(None)
        self.sessions: OrderedDict[str, EventStream] = OrderedDict()
        self.max_session_streams = max_session_streams
        self._pending = ByteBudget(max_pending_bytes)
        self._resume_window_bytes = resume_window_bytes
        self._window: deque[tuple[EventStream, SseEvent]] = deque()
        self._window_bytes = 0
        self._last_seq = 0
        self._readers = 0
        self.closed = False
        self._emptied = trio.Event()

    # ------------------------------------------------------------------ streams

    @property
    def readers(self) -> int:
        """Streams someone is reading now."""
        return self._readers

    def route(self, session_id: str | None) -> EventStream:
        """Where a message for ``session_id`` goes: the session's stream when the client
        has one (or the gateway opened one for it), else the connection's."""
        if session_id is not None:
            stream = self.sessions.get(session_id)
            if stream is not None:
                return stream
        return self.connection

    def register(self, session_id: str) -> EventStream | None:
        """The stream of ``session_id``, made if need be; None when the cap is reached and
        every session stream is busy."""
        stream = self.sessions.get(session_id)
        if stream is not None:
            self.sessions.move_to_end(session_id)
            return stream
        if len(self.sessions) >= self.max_session_streams and not self._forget_one_idle():
            return None
        stream = EventStream(session_id)
        self.sessions[session_id] = stream
        return stream

    def _forget_one_idle(self) -> bool:
        for session_id, stream in self.sessions.items():
            if stream.idle:
                del self.sessions[session_id]
                if stream.sent:
                    self._window = deque(entry for entry in self._window if entry[0] is not stream)
                    self._window_bytes -= sum(len(event.payload) for event in stream.sent)
                return True
        return False

    def streams(self) -> list[EventStream]:
        return [self.connection, *self.sessions.values()]

    # ------------------------------------------------------------------ publishing

    async def publish(self, stream: EventStream, payload: bytes) -> None:
        """Number ``payload`` and queue it on ``stream``; waits while the connection holds
        ``max_pending_bytes`` of unread events.

        Raises:
            TransportClosed: the streams are closed.
        """
        if self.closed:
            raise TransportClosed("the Streamable HTTP connection is closed")
        size = len(payload)
        await self._pending.take(size)
        if self.closed:
            self._pending.give_back(size)
            raise TransportClosed("the Streamable HTTP connection is closed")
        self._last_seq += 1
        stream.pending.append(SseEvent(self._last_seq, payload))
        stream.notify()

    def take(self, stream: EventStream, max_bytes: int) -> list[SseEvent]:
        """The events waiting on ``stream`` (at least one, then up to ``max_bytes``), now
        counted as sent: kept for a resume within the window."""
        taken: list[SseEvent] = []
        size = 0
        pending = stream.pending
        while pending and (not taken or size + len(pending[0].payload) <= max_bytes):
            event = pending.popleft()
            taken.append(event)
            size += len(event.payload)
        if taken:
            self._pending.give_back(size)
            self._remember(stream, taken, size)
            if not self._pending.held:
                self._emptied.set()
                self._emptied = trio.Event()
        return taken

    async def wait_emptied(self) -> None:
        """Until no event waits for a reader (returns at once when none does)."""
        if self._pending.held:
            await self._emptied.wait()

    def _remember(self, stream: EventStream, events: list[SseEvent], size: int) -> None:
        stream.sent.extend(events)
        self._window.extend((stream, event) for event in events)
        self._window_bytes += size
        while self._window_bytes > self._resume_window_bytes and self._window:
            owner, event = self._window.popleft()
            dropped = owner.sent.popleft()
            assert dropped is event, "the window and the streams disagree on order"
            owner.evicted_through = event.seq
            self._window_bytes -= len(event.payload)

    def replay(self, stream: EventStream, last_event_id: int) -> list[SseEvent]:
        """The events of ``stream`` written after ``last_event_id``, to be written again.

        Raises:
            UnknownEventId: this connection never numbered that event.
            ResumeGap: some of them are no longer held.
        """
        if last_event_id < 0 or last_event_id > self._last_seq:
            raise UnknownEventId(f"no event {last_event_id} was sent on this connection")
        if stream.evicted_through > last_event_id:
            raise ResumeGap(
                f"events after {last_event_id} are no longer held (the oldest kept is past "
                f"{stream.evicted_through})"
            )
        return [event for event in stream.sent if event.seq > last_event_id]

    # ------------------------------------------------------------------ readers

    def attach(self, stream: EventStream) -> object:
        """Make the caller ``stream``'s reader (the previous one, if any, stops)."""
        token = object()
        if stream.reader is None:
            self._readers += 1
        stream.reader = token
        stream.notify()
        return token

    def detach(self, stream: EventStream, token: object) -> None:
        """The reader holding ``token`` has ended (a no-op when it was taken over)."""
        if stream.reader is token:
            stream.reader = None
            self._readers -= 1

    def close(self) -> None:
        """No more events: readers write what is waiting and end; publishers fail."""
        self.closed = True
        for stream in self.streams():
            stream.notify()

    @property
    def pending_bytes(self) -> int:
        return self._pending.held
