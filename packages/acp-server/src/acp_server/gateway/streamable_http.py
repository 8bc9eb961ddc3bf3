"""``/acp`` over ACP's Streamable HTTP: POST JSON-RPC, GET SSE streams, DELETE.

The ACP RFD "Streamable HTTP & WebSocket Transport" (the draft the official SDKs implement:
Python ``acp.http``, TypeScript ``@agentclientprotocol/sdk/experimental/http-client``) puts
both transports on one endpoint. A GET with ``Upgrade: websocket`` stays the WebSocket
(gateway/upgrade.py); the rest comes here (``wants_streamable_http``):

* ``POST`` one JSON-RPC message (``Content-Type: application/json``, else 415; a batch
  501). ``initialize`` without ``Acp-Connection-Id`` opens a connection and is answered
  200 with the JSON-RPC response and the ``Acp-Connection-Id`` header; anything else needs
  that header (400 without it, 404 for one that is unknown, closed, or opened with another
  token) and is answered 202 at once, its response arriving on a stream. ``session/prompt``,
  ``session/cancel``, ``session/close`` and ``session/set_config_option`` need
  ``Acp-Session-Id`` too (400), which must agree with ``params.sessionId``.
* ``GET`` with ``Accept: text/event-stream`` (else 406) and ``Acp-Connection-Id``: the
  connection-scoped SSE stream, or with ``Acp-Session-Id`` that session's stream. A session
  the connection has not seen yet is accepted: the TypeScript SDK opens a session's stream
  before it sends ``session/load`` for it. ``Last-Event-ID`` resumes a broken stream
  (gateway/event_streams.py).
* ``DELETE`` with ``Acp-Connection-Id``: the connection ends (its running turns are
  cancelled), 202.

How a request is read and checked lives in gateway/http_requests.py. Every request passes
the gateway's checks before anything of it is read: the Host/Origin
screen and proxy rules (gateway/handlers.py, gateway/client_address.py), then the bearer
token (``admit_token``, 401), exactly as a WebSocket upgrade. A connection is bound to the
token that opened it. One ``AcpConnection`` per connection id runs the same protocol code
as a WebSocket over ``HttpTransport`` (gateway/http_transport.py), in this module's
nursery; it counts against ``max_connections`` and takes part in the drain and in token
revocation like a WebSocket (gateway/state.py). A connection nobody reads (no stream open,
no POST being served) for ``DEFAULT_IDLE_TIMEOUT_SECS`` is closed.

HTTP/1.1 only: each POST and each stream is its own TCP connection (the draft asks for
HTTP/2; the SDKs' clients fall back to HTTP/1.1), and every response says
``Connection: close`` as the gateway's other routes do.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Final

import h11
import trio
from wsproto.frame_protocol import CloseReason

from acp_core import methods
from acp_core.gateway_contract import AGENT_QUERY_PARAMETER
from acp_server.gateway.event_streams import (
    SSE_KEEPALIVE,
    EventStream,
    ResumeGap,
    SseEvent,
    UnknownEventId,
    encode_comment,
    encode_events,
)
from acp_server.gateway.http import (
    DEFAULT_MAX_REQUEST_BODY_BYTES,
    HttpRequest,
    is_websocket_upgrade,
    send_response,
)
from acp_server.gateway.http_requests import (
    CONNECTION_ID_HEADER,
    EVENT_STREAM,
    LAST_EVENT_ID_HEADER,
    SESSION_ID_HEADER,
    STREAMABLE_HTTP_METHODS,
    Envelope,
    Refused,
    checked_session_id,
    cors_headers,
    preflight_headers,
    read_body,
    read_envelope,
    response_route,
)
from acp_server.gateway.http_transport import (
    HttpTransport,
    NoId,
)
from acp_server.gateway.routes import Exchange
from acp_server.gateway.state import GatewayState, LiveConnection
from acp_server.gateway.upgrade import Admission, admit_token, refused_new_connection
from acp_server.observability.logs import new_correlation_id, tag_this_task
from acp_server.observability.metrics import TRANSPORT_HTTP
from acp_server.protocol.connection import AcpConnection
from acp_server.protocol.transport import TransportClosed

logger = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT_SECS: Final = 120.0
"""A connection with no stream open and no POST being served for this long is closed."""
DEFAULT_INITIALIZE_TIMEOUT_SECS: Final = 30.0
"""How long the ``initialize`` POST waits for its answer (504 after)."""
DEFAULT_KEEPALIVE_SECS: Final = 15.0
"""A quiet stream gets an SSE comment this often (the SDKs' servers use 15 s): proxies keep
it open, and a client that has gone is found out by the write."""
DEFAULT_CLOSE_TIMEOUT_SECS: Final = 12.0
"""After a connection's input ends: how long its ACP layer may take to answer what was
cancelled (it allows 10 s) before the connection is closed regardless."""
DEFAULT_FLUSH_TIMEOUT_SECS: Final = 2.0
"""At the end: how long open streams get to write the events still waiting."""
DEFAULT_STREAM_WRITE_TIMEOUT_SECS: Final = 60.0
"""A stream whose client has not taken a write for this long is closed (its events stay
resumable)."""
DEFAULT_MAX_CONCURRENT_POSTS: Final = 16
"""POSTs served at once per connection; beyond, 429 (the SDKs send them one by one)."""
MAX_COALESCED_WRITE_BYTES: Final = 256 * 1024
TAKEN_OVER: Final = "another GET took this stream over"
MAX_STRAY_GET_BYTES: Final = 64 * 1024
"""Bytes a client may send on a stream's socket after its GET before it counts as gone."""


def wants_streamable_http(request: HttpRequest) -> bool:
    """Whether an ``/acp`` request is for Streamable HTTP rather than the WebSocket: any
    method but GET (POST, DELETE; the rest are answered 405), and a GET that is no upgrade
    but asks for an event stream or names a connection. Any other GET keeps the WebSocket
    answers (426 and its hint)."""
    if request.method != "GET":
        return True
    if is_websocket_upgrade(request):
        return False
    accept = (request.header("accept") or "").lower()
    return EVENT_STREAM in accept or request.header(CONNECTION_ID_HEADER) is not None


@dataclass(eq=False, slots=True)
class HttpConnection:
    """One Streamable HTTP connection: its id, transport, ACP connection and the token
    digest it is bound to (None when pairing is off)."""

    connection_id: str
    transport: HttpTransport
    acp: AcpConnection
    live: LiveConnection

    @property
    def label(self) -> str:
        """For logs: the peer and the start of the id (the id itself is not logged)."""
        return f"{self.live.peer} [{self.connection_id[:8]}]"


class StreamableHttp:
    """The Streamable HTTP side of ``/acp`` (see the module docstring)."""

    def __init__(
        self,
        state: GatewayState,
        *,
        idle_timeout_secs: float = DEFAULT_IDLE_TIMEOUT_SECS,
        keepalive_secs: float = DEFAULT_KEEPALIVE_SECS,
    ) -> None:
        self.state = state
        self.idle_timeout_secs = idle_timeout_secs
        self.keepalive_secs = keepalive_secs
        self._connections: dict[str, HttpConnection] = {}
        self._nursery: trio.Nursery | None = None

    def __len__(self) -> int:
        return len(self._connections)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery the connections run in, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def serve(self, exchange: Exchange) -> None:
        """Answer one Streamable HTTP request at ``/acp``."""
        stream, request = exchange.stream, exchange.request
        if request.method == "OPTIONS" and request.header("origin") is not None:
            await send_response(stream, 204, headers=preflight_headers(request))
            return
        if request.method not in STREAMABLE_HTTP_METHODS:
            await send_response(
                stream, 405, "Method not allowed\n", headers=[("Allow", "DELETE, GET, POST")]
            )
            return
        peer = exchange.peer if exchange.proxy is None else f"{exchange.peer} via {exchange.proxy}"
        admission = await admit_token(self.state, stream, request, peer)
        if admission is None:
            return
        exchange.authenticated()
        try:
            if request.method == "POST":
                await self._post(exchange, admission, peer)
            elif request.method == "GET":
                await self._get(exchange, admission)
            else:
                connection = self._connection(request, admission)
                connection.live.shut(CloseReason.NORMAL_CLOSURE, "closed by the client")
                logger.info("ACP connection %s: closed by DELETE", connection.label)
                await send_response(stream, 202, headers=cors_headers(request))
        except Refused as refused:
            await refused.send(stream, request)

    # ------------------------------------------------------------------ lookups

    def _connection(self, request: HttpRequest, admission: Admission) -> HttpConnection:
        connection_id = request.header(CONNECTION_ID_HEADER)
        if connection_id is None:
            raise Refused(
                400, f"{CONNECTION_ID_HEADER} is required (POST initialize first to get one)"
            )
        connection = self._connections.get(connection_id.strip())
        # Another token's connection answers exactly as one that does not exist.
        if (
            connection is None
            or connection.live.token_digest != admission.token_digest
            or connection.transport.closed
        ):
            raise self._gone()
        return connection

    def _gone(self) -> Refused:
        """The refusal for a connection that is not (or no longer) there."""
        if self.state.draining:
            return Refused(
                503, "Gateway restarting: reconnect and retry", code=-32603,
                headers=(("Retry-After", "1"),),
            )  # fmt: skip
        return Refused(
            404, f"unknown {CONNECTION_ID_HEADER}: the connection ended or never existed; "
            "initialize a new one",
        )  # fmt: skip

    # ------------------------------------------------------------------ POST

    async def _post(self, exchange: Exchange, admission: Admission, peer: str) -> None:
        request = exchange.request
        content_type = (request.header("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise Refused(415, "Content-Type must be application/json")
        if request.header(CONNECTION_ID_HEADER) is None:
            body, _ = await read_body(exchange, DEFAULT_MAX_REQUEST_BODY_BYTES, None)
            envelope = read_envelope(body)
            await self._initialize(exchange, admission, peer, envelope)
            return
        connection = self._connection(request, admission)
        transport = connection.transport
        if transport.posts_in_flight >= DEFAULT_MAX_CONCURRENT_POSTS:
            raise Refused(
                429, f"more than {DEFAULT_MAX_CONCURRENT_POSTS} POSTs at once on this connection",
                headers=(("Retry-After", "1"),),
            )  # fmt: skip
        transport.posts_in_flight += 1
        transport.touch()
        try:
            await self._post_message(exchange, connection)
        finally:
            transport.posts_in_flight -= 1
            transport.touch()

    async def _post_message(self, exchange: Exchange, connection: HttpConnection) -> None:
        request, transport = exchange.request, connection.transport
        body, held = await read_body(
            exchange, self.state.max_message_bytes, transport.inbound_bytes
        )
        try:
            envelope = read_envelope(body)
            route = response_route(request, envelope)
        except BaseException:
            if held:
                transport.inbound_bytes.give_back(held)
            raise
        try:
            await transport.deliver(envelope.text, held, envelope.key, route)
        except TransportClosed:
            raise self._gone() from None
        await send_response(exchange.stream, 202, headers=cors_headers(request))

    async def _initialize(
        self, exchange: Exchange, admission: Admission, peer: str, envelope: Envelope
    ) -> None:
        key = envelope.key
        if envelope.method != methods.INITIALIZE or isinstance(key, NoId):
            raise Refused(
                400, f"{CONNECTION_ID_HEADER} is required: a connection starts with an "
                "initialize request, answered with its id",
                request_id=None if isinstance(key, NoId) else key,
            )  # fmt: skip
        if await refused_new_connection(self.state, exchange.stream):
            return
        connection = self._open(exchange, admission, peer)
        transport = connection.transport
        capture = transport.capture(key)
        with trio.move_on_after(DEFAULT_INITIALIZE_TIMEOUT_SECS):
            try:
                await transport.deliver(envelope.text, 0, key, None)
            except TransportClosed:
                pass
            await capture.done.wait()
        if capture.payload is None:
            closed_first = capture.done.is_set()
            transport.close()
            if closed_first:
                raise Refused(
                    503, "the connection closed before initialize was answered; retry",
                    code=-32603, request_id=key, headers=(("Retry-After", "1"),),
                )  # fmt: skip
            raise Refused(504, "initialize was not answered in time", code=-32603, request_id=key)
        await send_response(
            exchange.stream,
            200,
            capture.payload,
            content_type="application/json",
            headers=[
                (CONNECTION_ID_HEADER, connection.connection_id),
                *cors_headers(exchange.request),
            ],
        )

    def _open(self, exchange: Exchange, admission: Admission, peer: str) -> HttpConnection:
        assert self._nursery is not None, "StreamableHttp.run is not running"
        state = self.state
        connection_id = secrets.token_hex(16)
        transport = HttpTransport(
            connection_id=connection_id, peer=peer, max_message_bytes=state.max_message_bytes
        )
        agent = exchange.request.query.get(AGENT_QUERY_PARAMETER, "").strip() or None
        acp = AcpConnection(
            state.app,
            transport,
            connection_default_agent=agent,
            remote=True,
            principal=admission.principal,
        )
        live = LiveConnection(
            transport, acp, admission.token_digest, peer, principal=admission.principal
        )
        connection = HttpConnection(connection_id, transport, acp, live)
        self._connections[connection_id] = connection
        state.connections.add(live)
        logger.info(
            "ACP connection %s over Streamable HTTP%s%s (%d open)",
            connection.label,
            f" as {admission.principal}" if admission.principal else "",
            f" with default agent {agent!r}" if agent else "",
            len(state.connections),
        )
        self._nursery.start_soon(self._run, connection)
        return connection

    # ------------------------------------------------------------------ running one

    async def _run(self, connection: HttpConnection) -> None:
        transport, live = connection.transport, connection.live
        # This task serves this connection only: its log lines and its turns' carry these.
        tag_this_task(correlation=new_correlation_id(), principal=connection.acp.principal)
        metrics = self.state.app.metrics
        metrics.connection_opened(TRANSPORT_HTTP)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reap_when_idle, connection)
                nursery.start_soon(self._close_after_input_ends, transport)
                try:
                    await connection.acp.run()
                except Exception:
                    logger.exception("ACP connection %s failed", connection.label)
                    live.close_reason = "internal error"
                transport.close_reason = live.close_reason or "connection closed"
                with trio.move_on_after(DEFAULT_FLUSH_TIMEOUT_SECS):
                    while transport.streams.pending_bytes and transport.streams.readers:
                        await transport.streams.wait_emptied()
                    transport.close()
                    # Readers end their responses properly (a drain cancels every socket
                    # task once the last connection is gone from the registry).
                    while transport.streams.readers:
                        await transport.wait_activity()
                transport.close()
                nursery.cancel_scope.cancel()
        finally:
            transport.close()
            del self._connections[connection.connection_id]
            self.state.connections.discard(live)
            metrics.connection_closed(TRANSPORT_HTTP)
            logger.info("ACP connection %s closed (%s)", connection.label, transport.close_reason)

    async def _reap_when_idle(self, connection: HttpConnection) -> None:
        transport = connection.transport
        while True:
            if not transport.idle:
                await transport.wait_activity()
                continue
            with trio.move_on_after(self.idle_timeout_secs):
                await transport.wait_activity()
                continue
            logger.warning(
                "ACP connection %s: no stream open and no request for %.0f s; closing it",
                connection.label,
                self.idle_timeout_secs,
            )
            connection.live.shut(CloseReason.GOING_AWAY, "idle: no stream open")
            transport.close_reason = "idle: no stream open"
            transport.close()
            return

    @staticmethod
    async def _close_after_input_ends(transport: HttpTransport) -> None:
        # Once input has ended, what the ACP layer still sends may have no reader (a client
        # that left): past the timeout, the writer waiting for room is released.
        await transport.input_ended.wait()
        await trio.sleep(DEFAULT_CLOSE_TIMEOUT_SECS)
        transport.close()

    # ------------------------------------------------------------------ GET

    async def _get(self, exchange: Exchange, admission: Admission) -> None:
        request = exchange.request
        accept = (request.header("accept") or "").lower()
        if EVENT_STREAM not in accept:
            raise Refused(406, f"Accept must include {EVENT_STREAM}")
        connection = self._connection(request, admission)
        streams = connection.transport.streams
        session_id = request.header(SESSION_ID_HEADER)
        stream: EventStream | None = streams.connection
        if session_id is not None:
            session_id = checked_session_id(session_id)
            stream = streams.register(session_id)
            if stream is None:
                raise Refused(
                    429, f"{streams.max_session_streams} session streams are open on this "
                    "connection", headers=(("Retry-After", "1"),),
                )  # fmt: skip
        assert stream is not None
        replay = _replay(connection, stream, request.header(LAST_EVENT_ID_HEADER))
        await self._serve_events(exchange, connection, stream, replay)

    async def _serve_events(
        self,
        exchange: Exchange,
        connection: HttpConnection,
        stream: EventStream,
        replay: list[SseEvent],
    ) -> None:
        socket, h11_connection = exchange.stream, exchange.request.connection
        transport = connection.transport
        token = transport.attach(stream)
        try:
            head = h11.Response(
                status_code=200,
                reason=b"OK",
                headers=[
                    (b"Content-Type", EVENT_STREAM.encode("ascii")),
                    (b"Cache-Control", b"no-store"),
                    (b"X-Content-Type-Options", b"nosniff"),
                    (b"X-Accel-Buffering", b"no"),  # nginx: pass events on, do not buffer
                    (b"Connection", b"close"),
                    *[
                        (name.encode("latin-1"), value.encode("latin-1"))
                        for name, value in cors_headers(exchange.request)
                    ],
                ],
            )
            await socket.send_all(h11_connection.send(head) or b"")
            writer = _ChunkWriter(socket, h11_connection)
            if replay:
                await writer.write(encode_events(replay))
            ended = False  # stays so when the client hangs up first
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_for_hangup, socket, nursery.cancel_scope)
                await self._pump(transport, stream, token, writer)
                ended = True
                nursery.cancel_scope.cancel()
            if ended:
                await writer.end()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away; what was taken stays resumable
        except trio.TooSlowError:
            # A reader that stopped reading would hold the connection's events (and so its
            # turns) forever: its stream ends; the idle timeout takes it from there.
            logger.warning(
                "ACP connection %s: a stream was not read for %.0f s; closing it",
                connection.label,
                DEFAULT_STREAM_WRITE_TIMEOUT_SECS,
            )
        finally:
            transport.detach(stream, token)

    async def _pump(
        self, transport: HttpTransport, stream: EventStream, token: object, writer: _ChunkWriter
    ) -> None:
        """Write the stream's events until the connection ends or another GET takes the
        stream over; the last thing written says which (an SSE comment)."""
        streams = transport.streams
        while True:
            if stream.reader is not token:
                await writer.write(encode_comment(TAKEN_OVER))
                return
            events = streams.take(stream, MAX_COALESCED_WRITE_BYTES)
            if events:
                await writer.write(encode_events(events))
                continue
            if streams.closed:
                await writer.write(encode_comment(transport.close_reason or "connection closed"))
                return
            with trio.move_on_after(self.keepalive_secs) as quiet:
                await stream.wait_changed()
            if quiet.cancelled_caught:
                await writer.write(SSE_KEEPALIVE)


class _ChunkWriter:
    """Writes a streamed response body through the h11 connection that read the request
    (chunked for HTTP/1.1 clients)."""

    def __init__(self, socket: trio.abc.Stream, connection: h11.Connection) -> None:
        self._socket = socket
        self._connection = connection

    async def write(self, data: bytes) -> None:
        """Raises ``trio.TooSlowError`` when the client has not read for
        ``DEFAULT_STREAM_WRITE_TIMEOUT_SECS``."""
        with trio.fail_after(DEFAULT_STREAM_WRITE_TIMEOUT_SECS):
            await self._socket.send_all(self._connection.send(h11.Data(data=data)) or b"")

    async def end(self) -> None:
        await self._socket.send_all(self._connection.send(h11.EndOfMessage()) or b"")


async def _watch_for_hangup(socket: trio.abc.Stream, scope: trio.CancelScope) -> None:
    """End the stream as soon as the client closes its side (or sends a flood)."""
    received = 0
    try:
        while received <= MAX_STRAY_GET_BYTES:
            data = await socket.receive_some(MAX_STRAY_GET_BYTES)
            if not data:
                break
            received += len(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()


def _replay(connection: HttpConnection, stream: EventStream, header: str | None) -> list[SseEvent]:
    """The events a resuming GET (``Last-Event-ID``) gets again first."""
    if header is None:
        return []
    try:
        last_event_id = int(header.strip())
        return connection.transport.streams.replay(stream, last_event_id)
    except (ValueError, UnknownEventId) as exc:
        raise Refused(400, f"{LAST_EVENT_ID_HEADER}: {exc}") from None
    except ResumeGap as exc:
        # 409, as the TypeScript SDK reads it on a session stream: reload the session.
        raise Refused(
            409, f"cannot resume: {exc}; open the stream afresh and session/load to recover"
        ) from None
