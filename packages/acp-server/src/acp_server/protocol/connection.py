"""One ACP connection over any ``MessageTransport``: reading, dispatch, the outbox.

`zeroclaw acp` (stdio) and `zeroclaw gateway` (WebSocket) both call ``serve_connection``
once per peer over the process's ``AcpApp`` (acp_server/protocol/services/context.py);
every line of protocol logic lives behind it:

* one nursery per connection; the read loop never awaits a handler: each call runs in the
  shape its method's ``ordering`` gives (acp_core/methods.py): ``inline`` in the reader,
  ``admitted`` with an admission step in the reader, else in its own task, so
  ``session/cancel`` is never stuck behind a running prompt;
* each call's params are decoded once, straight from the frame's raw JSON into the
  method's params type (``schema.decode_inbound``);
* one writer task owns the transport and drains a bounded outbox in FIFO order, so every
  ``session/update`` of a turn is written before that turn's result; the outbox and the
  requests in flight are bounded by bytes as well as by count (``ByteBudget``), so a peer
  that never reads, or sends a few huge requests, holds a bounded amount of memory;
* a failed call is answered through ``acp_server.errors.rpc_error_for``, the one mapping
  from exceptions to JSON-RPC errors; notifications are never answered, not even with an
  error.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from acp_core import methods, schema
from acp_core.connection import CallReceived, ResponseReceived, RpcConnection
from acp_core.errors import InternalError, MethodNotFoundError, RemoteProtocolError, RpcError
from acp_core.jsonrpc import ErrorResponse, Frame, Payload, RequestId, Response, serialize_message
from acp_server.errors import rpc_error_for
from acp_server.protocol.client_profile import BEFORE_INITIALIZE
from acp_server.protocol.limits import ByteBudget, shortened
from acp_server.protocol.router import build_routes
from acp_server.protocol.routes import Job, Route
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.protocol.services.context import AcpApp
from acp_server.protocol.services.followups import ReplyThen
from acp_server.protocol.transport import MessageTransport, TransportClosed

if TYPE_CHECKING:
    from acp_server.agent.runtime.session import Session

logger = logging.getLogger(__name__)

DEFAULT_MAX_OUTBOX_MESSAGES: Final = 1024
"""Frames queued for the writer; a full outbox slows the agent down (backpressure)."""
DEFAULT_MAX_OUTBOX_BYTES: Final = 16 * 1024 * 1024
"""Bytes queued for the writer (and being written); beyond it producers wait, like a full
outbox. One frame larger than this still goes out alone."""
DEFAULT_MAX_IN_FLIGHT_REQUEST_BYTES: Final = 64 * 1024 * 1024
"""Bytes of the requests being served at once (their raw params); beyond it the read loop
waits. A request of up to ``SMALL_REQUEST_BYTES`` is not counted: the count limit
(``DEFAULT_MAX_CONCURRENT_REQUESTS``) bounds those, and a permission answer queued behind
them is never held up by big requests."""
SMALL_REQUEST_BYTES: Final = 64 * 1024
MAX_ERROR_MESSAGE_CHARS: Final = 1024
"""Longest error message sent back; longer ones (a message quoting a huge value the client
sent) are cut, and say by how much."""
DEFAULT_MAX_WRITE_BATCH: Final = 256
"""Most frames the writer joins into one write when the outbox is busy."""
DEFAULT_MAX_CONCURRENT_REQUESTS: Final = 256
"""Requests handled at once; beyond it the read loop waits (a flood cannot grow tasks).
Two slots per session are added on top, so turns waiting for a permission answer (and
stop/close waiting for them) can never starve the read loop that delivers the answer."""
DEFAULT_SENDS_PER_YIELD: Final = 32
"""A producer queuing frames yields to the scheduler at least this often."""
DEFAULT_REAP_INTERVAL_SECS: Final = 60.0
DEFAULT_SHUTDOWN_GRACE_SECS: Final = 10.0
"""After the input ends: how long cancelled turns get to answer before the rest is cut."""


async def serve_connection(
    transport: MessageTransport,
    app: AcpApp,
    *,
    connection_default_agent: str | None = None,
    reap_idle_sessions: bool = False,
    principal: str | None = None,
) -> None:
    """Serve one ACP peer until its stream ends; cancels in-flight turns on the way out.

    Each call has its own session table, ``max_sessions`` budget and ``zc-out-N`` counter.

    Args:
        connection_default_agent: the gateway's ``?agent=`` (step 2 of the alias precedence).
        reap_idle_sessions: drop sessions idle longer than ``[acp]
            idle_session_timeout_secs`` (ZeroClaw's implementation does this in stdio mode only).
        principal: who the peer is (``AcpConnection.principal``); None: the local operator.
    """
    connection = AcpConnection(
        app, transport, connection_default_agent=connection_default_agent, principal=principal
    )
    await connection.run(reap_idle_sessions=reap_idle_sessions)


class _PendingCall:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: Response | ErrorResponse | None = None


class AcpConnection:
    """Everything about one peer: its calls, outbound requests and the outbox.

    It is the services' ``Outbound`` (protocol/outbound.py): they send through it and
    read what the peer is from it, and never see the rest.
    """

    def __init__(
        self,
        app: AcpApp,
        transport: MessageTransport,
        *,
        connection_default_agent: str | None = None,
        max_outbox_messages: int = DEFAULT_MAX_OUTBOX_MESSAGES,
        max_outbox_bytes: int = DEFAULT_MAX_OUTBOX_BYTES,
        max_in_flight_request_bytes: int = DEFAULT_MAX_IN_FLIGHT_REQUEST_BYTES,
        remote: bool = False,
        principal: str | None = None,
    ) -> None:
        self.app = app
        # Who the peer is: a gateway token's principal, whose sessions alone it sees; None
        # for the local operator (stdio), who sees every session (protocol/services/visibility.py).
        self.principal = principal
        # A gateway peer (``remote``) may run on another machine: its files are not ours
        # unless its initialize says so (protocol/presentation/client_calls.py).
        self.remote = remote
        self.shares_filesystem = False
        self.client_capabilities: schema.ClientCapabilities | None = None
        self.client_profile = BEFORE_INITIALIZE
        self.config = app.config
        self.transport = transport
        self.connection_default_agent = connection_default_agent
        self.rpc = RpcConnection()
        self._outbox_send, self._outbox_receive = trio.open_memory_channel[bytes](
            max_outbox_messages
        )
        self.outbox_bytes = ByteBudget(max_outbox_bytes)
        self.request_bytes = ByteBudget(max_in_flight_request_bytes)
        self._calls: dict[str, _PendingCall] = {}
        self._active_requests = 0
        self._request_slots = trio.Semaphore(
            DEFAULT_MAX_CONCURRENT_REQUESTS + 2 * app.config.acp.max_sessions
        )
        self._idle = trio.Event()
        self._idle.set()
        self._refusal: str | None = None
        self._nursery: trio.Nursery | None = None
        self._sends_since_yield = 0
        self.state = ConnectionState(app, self)
        self._routes: dict[str, Route] = build_routes(self.state)

    @property
    def sessions(self) -> dict[str, Session]:
        """The live sessions by id (read-only use: tests and the gateway's drain)."""
        return self.state.table.sessions

    @property
    def nursery(self) -> trio.Nursery:
        """The connection's nursery: what outlives one request (MCP servers) runs here."""
        assert self._nursery is not None
        return self._nursery

    # ------------------------------------------------------------------ lifecycle

    @property
    def active_requests(self) -> int:
        """Requests and notifications being served right now (what a drain waits for)."""
        return self._active_requests

    async def wait_idle(self) -> None:
        """Return once nothing is being served."""
        while self._active_requests:
            await self._idle.wait()

    def refuse_new_requests(self, message: str) -> None:
        """From now on answer every new request with an internal error carrying ``message``
        (a gateway drain); responses and notifications still go through, so running turns
        can end."""
        self._refusal = message

    async def run(self, *, reap_idle_sessions: bool = False) -> None:
        async with trio.open_nursery() as outer:
            outer.start_soon(self._write_loop, outer.cancel_scope)
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    reaper = trio.CancelScope()
                    if reap_idle_sessions:
                        nursery.start_soon(self._reap_loop, reaper)
                    await self._read_loop()
                    reaper.cancel()
                    await self._shutdown(nursery)
            finally:
                # The writer drains what is queued, then stops at end-of-channel.
                self._outbox_send.close()
                self.state.table.release_all()  # every turn has ended with the nursery

    async def _shutdown(self, nursery: trio.Nursery) -> None:
        """Input ended: cancel every turn, give them a moment to answer, then cut."""
        self.state.cancel_all()
        with trio.move_on_after(DEFAULT_SHUTDOWN_GRACE_SECS):
            await self._idle.wait()
        nursery.cancel_scope.cancel()

    async def _write_loop(self, connection_scope: trio.CancelScope) -> None:
        send_many = getattr(self.transport, "send_messages", None)
        receive = self._outbox_receive
        try:
            async for payload in receive:
                if send_many is None:
                    await self.transport.send_message(payload)
                    self.outbox_bytes.give_back(len(payload))
                    continue
                batch = [payload]
                self._drain_into(batch)
                if len(batch) == 1:
                    # A lone frame: let producers that are ready run first (a turn's last
                    # chunk and its result usually are), so their frames share one write
                    # and one wake-up of the client instead of one each.
                    await trio.lowlevel.cancel_shielded_checkpoint()
                    self._drain_into(batch)
                await send_many(batch)
                self.outbox_bytes.give_back(sum(len(frame) for frame in batch))
        except TransportClosed:
            logger.info("the client went away; closing the connection")
            connection_scope.cancel()

    def _drain_into(self, batch: list[bytes]) -> None:
        while len(batch) < DEFAULT_MAX_WRITE_BATCH:
            try:
                batch.append(self._outbox_receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                return

    async def _reap_loop(self, scope: trio.CancelScope) -> None:
        timeout = self.config.acp.idle_session_timeout
        with scope:
            while True:
                await trio.sleep(min(DEFAULT_REAP_INTERVAL_SECS, timeout))
                self.state.reap_idle()

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        while True:
            try:
                text = await self.transport.receive_message()
                if text is None:
                    return
                event = self.rpc.receive_frame(text)
            except RemoteProtocolError as exc:
                logger.warning("bad message from the client: %s", exc)
                if exc.reply_hint is not None:
                    await self._send(serialize_message(exc.reply_hint))
                continue
            if isinstance(event, CallReceived):
                await self._on_call(event.frame)
            elif isinstance(event, ResponseReceived):
                pending = self._calls.get(event.request_id)
                if pending is not None:
                    pending.response = event.response
                    pending.event.set()
            else:
                logger.debug("dropping a response to an unknown request id")

    async def _on_call(self, frame: Frame) -> None:
        method = frame.method
        reply = frame.kind == "request"
        request_id = frame.id
        if reply and self._refusal is not None:
            # Draining: requests already accepted finish; new ones are refused (a cancel, a
            # notification, still gets through).
            await self._send_error(request_id, InternalError(self._refusal))
            return
        route = self._routes.get(method)
        if route is None:
            if reply:
                await self._send_error(request_id, MethodNotFoundError(method))
            else:
                logger.debug("ignoring notification %s", method)
            return
        request_key = str(request_id) if reply else ""
        try:
            params = self._decode(route, frame.payload)
            ordering = route.ordering
            if ordering == "inline":
                result: Payload = route.handler(params, request_key)
                if reply:
                    await self._send(self.rpc.send_result(request_id, result))
                return
            if ordering == "admitted":
                job: Job = route.handler(params, request_key)
            else:
                job = partial(route.handler, params)
        except Exception as exc:
            await self._answer_failure(method, exc, request_id, reply)
            return
        try:
            self._request_slots.acquire_nowait()  # the usual case: no scheduler round trip
        except trio.WouldBlock:
            await self._request_slots.acquire()
        size = len(frame.payload) if len(frame.payload) > SMALL_REQUEST_BYTES else 0
        if size:
            try:
                await self.request_bytes.take(size)
            except BaseException:
                self._request_slots.release()
                raise
        self._spawn(size, self._serve_request, method, job, request_id, reply)

    @staticmethod
    def _decode(route: Route, raw: msgspec.Raw) -> Any:
        try:
            return schema.decode_inbound(route.params_type, raw)
        except RpcError:
            if route.precedence is not None:
                route.precedence(raw)
            raise

    def _spawn(self, size: int, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        """Start a request task; the caller holds one of ``_request_slots`` for it, and
        ``size`` bytes of ``request_bytes``."""
        assert self._nursery is not None
        self._active_requests += 1
        if self._idle.is_set():
            self._idle = trio.Event()
        self._nursery.start_soon(self._tracked, size, fn, *args)

    async def _tracked(self, size: int, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        try:
            await fn(*args)
        finally:
            if size:
                self.request_bytes.give_back(size)
            self._request_slots.release()
            self._active_requests -= 1
            if self._active_requests == 0:
                self._idle.set()

    async def _serve_request(
        self, method: str, job: Job, request_id: RequestId, reply: bool
    ) -> None:
        try:
            result = await job()
        except Exception as exc:
            await self._answer_failure(method, exc, request_id, reply)
            return
        after = None
        if isinstance(result, ReplyThen):  # protocol/services/followups.py
            result, after = result.result, result.after
        if reply:
            await self._send(self.rpc.send_result(request_id, result))
        if after is not None:
            await after()

    async def _answer_failure(
        self, method: str, exc: Exception, request_id: RequestId, reply: bool
    ) -> None:
        error = rpc_error_for(exc, method=method, acp_codes=self.config.acp.error_codes == "acp")
        if not reply:
            logger.info("notification %s failed: %s", shortened(method, 80), error.message[:200])
            return
        await self._send_error(request_id, error)

    async def _send_error(self, request_id: RequestId, error: RpcError) -> None:
        if len(error.message) > MAX_ERROR_MESSAGE_CHARS:
            error = RpcError(shortened(error.message, MAX_ERROR_MESSAGE_CHARS), code=error.code)
        await self._send(self.rpc.send_error(request_id, error))

    # ------------------------------------------------------------------ writing

    async def _send(self, payload: bytes) -> None:
        """Queue one frame for the writer (FIFO: the order of calls is the wire order).

        A full outbox blocks the caller (backpressure). Otherwise the frame is queued
        without a trip through the scheduler, and the caller yields only every
        ``DEFAULT_SENDS_PER_YIELD`` frames: a streaming turn then hands the writer frames in
        batches (one write each) and still lets the read loop in, so a cancel gets through.
        """
        size = len(payload)
        await self.outbox_bytes.take(size)
        try:
            self._outbox_send.send_nowait(payload)
        except trio.WouldBlock:
            try:
                await self._outbox_send.send(payload)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                self.outbox_bytes.give_back(size)
                logger.debug("outbox closed; dropping a frame")
            except BaseException:
                self.outbox_bytes.give_back(size)
                raise
            return
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.outbox_bytes.give_back(size)
            logger.debug("outbox closed; dropping a frame")
        self._sends_since_yield += 1
        if self._sends_since_yield >= DEFAULT_SENDS_PER_YIELD:
            self._sends_since_yield = 0
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()

    async def send_update(self, session_id: str, update: schema.SessionUpdate) -> None:
        params = schema.SessionNotification(session_id=session_id, update=update)
        await self._send(self.rpc.send_notification(methods.SESSION_UPDATE, params))

    async def send_notification(self, method: str, params: Payload) -> None:
        await self._send(self.rpc.send_notification(method, params))

    async def call(self, method: str, params: Payload) -> Response | ErrorResponse:
        """Send a request to the client and wait for its answer (cancellable)."""
        request_id, payload = self.rpc.send_request(method, params)
        pending = _PendingCall()
        self._calls[request_id] = pending
        try:
            await self._send(payload)
            await pending.event.wait()
        finally:
            del self._calls[request_id]
            if pending.response is None:
                # Abandoned (turn cancelled, timed out): forget it and tell the client it
                # can drop its dialog. Never blocks: we may be inside a cancelled scope.
                self.rpc.forget_request(request_id)
                notice = self.rpc.send_notification(
                    methods.CANCEL_REQUEST, schema.CancelRequestParams(request_id=request_id)
                )
                # A small notice, taken past the byte budget rather than dropped.
                self.outbox_bytes.take_now(len(notice))
                try:
                    self._outbox_send.send_nowait(notice)
                except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                    self.outbox_bytes.give_back(len(notice))
        assert pending.response is not None
        return pending.response
