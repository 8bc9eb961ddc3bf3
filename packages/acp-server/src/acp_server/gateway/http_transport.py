"""One Streamable HTTP connection as a ``MessageTransport``: POST bodies in, SSE events out.

The ACP connection (protocol/connection.py) runs over this exactly as it runs over a
WebSocket. ``receive_message`` hands it the JSON-RPC messages the client POSTed, in the
order their bodies were read (gateway/streamable_http.py reads and checks them); its single
writer's ``send_messages`` routes every outbound message to one of the connection's SSE
streams (gateway/event_streams.py), by the rules of ACP's Streamable HTTP draft (the ACP
RFD "Streamable HTTP & WebSocket Transport") as the official SDKs read them:

* the response to ``initialize`` is not streamed: the POST that carried it answers with it
  (``capture``), with the ``Acp-Connection-Id`` header;
* a response to ``session/new``, ``session/load`` or ``session/resume`` goes on the
  connection-scoped stream (the client has no stream for that session yet), and when it is
  a success the session's stream is opened on our side, so that what follows for the
  session waits there until the client's GET for it arrives;
* a response to another request goes on the stream of the request's session (its
  ``Acp-Session-Id`` header, else its ``params.sessionId``) when that session has one;
* our own requests and notifications (``session/update``, ``session/request_permission``)
  go on the stream of their ``params.sessionId`` when it has one;
* everything else goes on the connection-scoped stream.

Memory is bounded per connection: bodies read and not yet taken by the ACP layer
(``inbound_bytes``, the message limit, taken as the body arrives), complete messages
waiting (``DEFAULT_MAX_PENDING_INBOUND_MESSAGES``), events not yet written to a stream
(``DEFAULT_MAX_PENDING_EVENT_BYTES``) and written events kept for a resume
(``DEFAULT_RESUME_WINDOW_BYTES``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

import msgspec
import trio

from acp_server.gateway.event_streams import EventStream, EventStreams
from acp_server.protocol.limits import ByteBudget
from acp_server.protocol.transport import TransportClosed

logger = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_INBOUND_MESSAGES: Final = 4
"""Complete messages POSTed ahead of the ACP layer; a POST past them waits for a slot."""
DEFAULT_MAX_PENDING_EVENT_BYTES: Final = 8 * 1024 * 1024
"""Events routed to streams and not yet written, per connection; beyond it the ACP layer's
writer waits (and its bounded outbox then holds back the turns)."""
DEFAULT_RESUME_WINDOW_BYTES: Final = 512 * 1024
"""Written events kept per connection for a ``Last-Event-ID`` resume (a few seconds of a
fast turn, a minute or more of a model's usual pace)."""
DEFAULT_MAX_SESSION_STREAMS: Final = 64
"""Session-scoped SSE streams per connection (streams with nothing to deliver are
forgotten first)."""

IdKey: TypeAlias = int | float | str | None
"""A JSON-RPC id as a value: ``1`` and ``"1"`` differ, ``"a\\u0062"`` and ``"ab"`` do not."""
_ID_TYPE: Final = int | float | str | None


class _SessionRef(msgspec.Struct, rename="camel"):
    """The one field routing needs from params or a result (the rest is skipped)."""

    session_id: str | None = None


class _Outbound(msgspec.Struct):
    """What routing needs of an outbound JSON-RPC message, in one pass (params are always
    an object in ACP; the rest of them is skipped); absent fields stay empty."""

    method: str | None = None
    id: msgspec.Raw = msgspec.Raw(b"")
    params: _SessionRef | None = None
    result: msgspec.Raw = msgspec.Raw(b"")


_decode_outbound = msgspec.json.Decoder(_Outbound).decode
_decode_session_ref = msgspec.json.Decoder(_SessionRef).decode
_decode_id = msgspec.json.Decoder(_ID_TYPE).decode


class NoId:
    """No usable JSON-RPC id (a notification, or an id that is not a string or number)."""

    __slots__ = ()


NO_ID: Final = NoId()


def id_key(raw: msgspec.Raw) -> IdKey | NoId:
    """The id's value, or ``NO_ID`` when absent or not a JSON-RPC id."""
    if not raw:
        return NO_ID
    try:
        value: IdKey = _decode_id(raw)
    except msgspec.DecodeError:
        return NO_ID
    return value


def session_of(raw: msgspec.Raw) -> str | None:
    """``sessionId`` of a params or result object, if it has one."""
    if not raw:
        return None
    try:
        return _decode_session_ref(raw).session_id
    except msgspec.DecodeError:
        return None


@dataclass(frozen=True, slots=True)
class ResponseRoute:
    """Where the answer to a client's request goes (see the module docstring)."""

    session_id: str | None
    establishes: bool
    """``session/new``, ``session/load`` or ``session/resume``: answered on the connection
    stream; a success opens the session's stream."""


class Capture:
    """The answer to one request, taken off the streams (``initialize``)."""

    __slots__ = ("done", "payload")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.payload: bytes | None = None
        """The response; None when the connection closed first."""


class HttpTransport:
    """The transport of one Streamable HTTP connection (see the module docstring)."""

    def __init__(
        self,
        *,
        connection_id: str,
        peer: str,
        max_message_bytes: int,
        max_pending_event_bytes: int = DEFAULT_MAX_PENDING_EVENT_BYTES,
        resume_window_bytes: int = DEFAULT_RESUME_WINDOW_BYTES,
        max_session_streams: int = DEFAULT_MAX_SESSION_STREAMS,
    ) -> None:
        self.connection_id = connection_id
        self.peer = peer
        self.streams = EventStreams(
            max_pending_bytes=max_pending_event_bytes,
            resume_window_bytes=resume_window_bytes,
            max_session_streams=max_session_streams,
        )
        self.inbound_bytes = ByteBudget(max_message_bytes)
        """Bytes of POST bodies read (or being read) and not yet taken by the ACP layer."""
        self._inbound_send, self._inbound_receive = trio.open_memory_channel[tuple[str, int]](
            DEFAULT_MAX_PENDING_INBOUND_MESSAGES
        )
        self._responses: dict[IdKey, ResponseRoute] = {}
        self._captures: dict[IdKey, Capture] = {}
        self._publishers: set[trio.CancelScope] = set()
        self.posts_in_flight = 0
        self.input_ended = trio.Event()
        self.closed = False
        self.close_reason = ""
        """Said (as an SSE comment) at the end of every stream when the connection ends."""
        self._activity = trio.Event()

    # ------------------------------------------------------------------ MessageTransport

    async def receive_message(self) -> str | None:
        try:
            text, size = await self._inbound_receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None
        if size:
            self.inbound_bytes.give_back(size)
        return text

    async def send_message(self, payload: bytes) -> None:
        await self.send_messages((payload,))

    async def send_messages(self, payloads: Sequence[bytes]) -> None:
        """Route each message to its stream (or to a waiting POST); waits while the
        connection holds its limit of unwritten events.

        Raises:
            TransportClosed: the connection was closed (an idle client reaped, a drain's
                last step); nothing more can be delivered.
        """
        scope = trio.CancelScope()
        self._publishers.add(scope)
        try:
            with scope:
                streams = self.streams
                for payload in payloads:
                    stream = self._route(payload)
                    if stream is not None:
                        await streams.publish(stream, payload)
        finally:
            self._publishers.discard(scope)
        if scope.cancelled_caught:
            raise TransportClosed("the Streamable HTTP connection was closed")

    async def aclose(self) -> None:
        self.close()

    # ------------------------------------------------------------------ routing

    def _route(self, payload: bytes) -> EventStream | None:
        streams = self.streams
        try:
            message = _decode_outbound(payload)
        except msgspec.DecodeError:  # not ours to judge: the connection stream carries it
            return streams.connection
        if message.method is not None:
            return streams.route(None if message.params is None else message.params.session_id)
        key = id_key(message.id)
        if isinstance(key, NoId):
            return streams.connection
        capture = self._captures.pop(key, None)
        if capture is not None:
            capture.payload = payload
            capture.done.set()
            return None
        route = self._responses.pop(key, None)
        if route is None:
            return streams.connection
        if route.establishes:
            if message.result:
                session_id = session_of(message.result) or route.session_id
                if session_id is not None:
                    streams.register(session_id)
            return streams.connection
        return streams.route(route.session_id)

    # ------------------------------------------------------------------ the endpoint's side

    def capture(self, key: IdKey) -> Capture:
        """Take the answer to request ``key`` off the streams, for the POST to return."""
        capture = Capture()
        self._captures[key] = capture
        return capture

    async def deliver(
        self, text: str, held_bytes: int, key: IdKey | NoId, route: ResponseRoute | None
    ) -> None:
        """Queue one POSTed message for the ACP layer (waits for a slot); its
        ``held_bytes`` of ``inbound_bytes`` are given back when the layer takes it.

        Raises:
            TransportClosed: the connection's input has ended; the bytes were given back.
        """
        if route is not None and not isinstance(key, NoId):
            self._responses[key] = route
        try:
            await self._inbound_send.send((text, held_bytes))
        except BaseException as exc:
            if held_bytes:
                self.inbound_bytes.give_back(held_bytes)
            if not isinstance(key, NoId):
                self._responses.pop(key, None)
            if isinstance(exc, trio.ClosedResourceError | trio.BrokenResourceError):
                raise TransportClosed("the connection no longer takes messages") from exc
            raise

    def attach(self, stream: EventStream) -> object:
        token = self.streams.attach(stream)
        self.touch()
        return token

    def detach(self, stream: EventStream, token: object) -> None:
        self.streams.detach(stream, token)
        self.touch()

    @property
    def idle(self) -> bool:
        """Nobody reads any stream and no POST is being served: the client may be gone."""
        return self.streams.readers == 0 and self.posts_in_flight == 0

    def touch(self) -> None:
        """Something changed that the idle reaper watches (a reader, a POST)."""
        self._activity.set()
        self._activity = trio.Event()

    async def wait_activity(self) -> None:
        await self._activity.wait()

    # ------------------------------------------------------------------ ending

    def end_input(self) -> None:
        """No more inbound messages: the ACP layer gets None once the queued ones are
        consumed; responses and updates keep flowing (cancelled turns still answer)."""
        self._inbound_send.close()
        self.input_ended.set()

    def close(self) -> None:
        """End everything: input, the streams (readers write what waits, then end),
        publishers waiting for room, and POSTs waiting for an answer. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.end_input()
        self.streams.close()
        for scope in self._publishers:
            scope.cancel()
        for capture in self._captures.values():
            capture.done.set()
        self._captures.clear()
        self.touch()
