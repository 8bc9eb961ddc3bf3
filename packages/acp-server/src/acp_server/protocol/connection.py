"""The ACP server: per-connection protocol state over any ``MessageTransport``.

`zeroclaw acp` (stdio) and `zeroclaw gateway` (WebSocket) both build one ``AcpApp`` per
process and call ``serve_connection`` once per connection; every line of protocol logic
lives behind it (aesthetics.md §2.4):

* one nursery per connection; the read loop never awaits a handler: each request runs in
  its own task, so ``session/cancel`` is never stuck behind a running prompt;
* one writer task owns the transport and drains a bounded outbox in FIFO order, so every
  ``session/update`` of a turn is written before that turn's result;
* ``_serve_request`` is the one place exceptions become JSON-RPC errors: an ``RpcError``
  keeps its code, anything else is -32603 with a generic message (details go to stderr);
* notifications are never answered, not even with an error.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Final, TypeAlias

import trio

from acp_core import methods, schema
from acp_core.aliases import resolve_restore_alias, resolve_session_alias
from acp_core.blobs import plan_prompt
from acp_core.connection import (
    NotificationReceived,
    RequestReceived,
    ResponseReceived,
    RpcConnection,
)
from acp_core.errors import (
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    RemoteProtocolError,
    RpcError,
    SessionBusyError,
    SessionLimitError,
    SessionNotFoundError,
)
from acp_core.jsonrpc import (
    ErrorResponse,
    JsonValue,
    Payload,
    RequestId,
    Response,
    serialize_message,
)
from acp_server import __version__
from acp_server.agent.conversation import ChatMessage, CompletedTurn, PlanEntry
from acp_server.agent.providers.base import ProviderError
from acp_server.agent.replay import history_updates, plan_update
from acp_server.agent.session import Session, Turn
from acp_server.agent.tools.mcp import select_mcp_servers, start_mcp_tools
from acp_server.agent.turn import TurnFailed, embed_delivered_file, run_turn
from acp_server.app import AcpApp
from acp_server.config import (
    McpServerConfig,
    RiskProfileConfig,
    RuntimeProfileConfig,
)
from acp_server.protocol.transport import MessageTransport, TransportClosed
from acp_server.storage.sqlite import StoredSession
from acp_server.storage.uploads import write_blobs

logger = logging.getLogger(__name__)

DEFAULT_MAX_OUTBOX_MESSAGES: Final = 1024
"""Frames queued for the writer; a full outbox slows the agent down (backpressure)."""
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
CANCEL_MARKER: Final = "[turn cancelled via client]"
INTERNAL_ERROR_MESSAGE: Final = "Internal error: the server log has the details"

Handler: TypeAlias = Callable[[JsonValue], Awaitable[Payload]]


async def serve_connection(
    transport: MessageTransport,
    app: AcpApp,
    *,
    connection_default_agent: str | None = None,
    reap_idle_sessions: bool = False,
) -> None:
    """Serve one ACP peer until its stream ends; cancels in-flight turns on the way out.

    Each call has its own session map, ``max_sessions`` budget and ``zc-out-N`` counter.

    Args:
        connection_default_agent: the gateway's ``?agent=`` (step 2 of the alias precedence).
        reap_idle_sessions: drop sessions idle longer than ``session_timeout_secs``
            (the reference does this in stdio mode only).
    """
    connection = AcpConnection(app, transport, connection_default_agent=connection_default_agent)
    await connection.run(reap_idle_sessions=reap_idle_sessions)


class _PendingCall:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: Response | ErrorResponse | None = None


class AcpConnection:
    """Everything about one peer: sessions, outbound calls, the outbox."""

    def __init__(
        self,
        app: AcpApp,
        transport: MessageTransport,
        *,
        connection_default_agent: str | None = None,
        max_outbox_messages: int = DEFAULT_MAX_OUTBOX_MESSAGES,
    ) -> None:
        self.app = app
        self.config = app.config
        self.transport = transport
        self.connection_default_agent = connection_default_agent
        self.rpc = RpcConnection()
        self._outbox_send, self._outbox_receive = trio.open_memory_channel[bytes](
            max_outbox_messages
        )
        self.sessions: dict[str, Session] = {}
        # Ids being created or restored: they count towards max_sessions (reference).
        self._reserved: set[str] = set()
        # Ids closed or stopped whose last turn is still ending (and being saved): a
        # session/load of one waits for it, so it reads that turn from the store.
        self._closing: dict[str, trio.Event] = {}
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
        # Running prompts by the text of their request id (for $/cancel_request).
        self._prompt_turns: dict[str, Turn] = {}
        self._handlers: dict[str, Handler] = {
            methods.INITIALIZE: self._initialize,
            methods.SESSION_NEW: self._new_session,
            methods.SESSION_LOAD: partial(self._restore, replay=True),
            methods.SESSION_RESUME: partial(self._restore, replay=False),
            methods.SESSION_UPDATE: self._inbound_update,
            methods.SESSION_EVENT: self._inbound_update,
        }

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

    async def _shutdown(self, nursery: trio.Nursery) -> None:
        """Input ended: cancel every turn, give them a moment to answer, then cut."""
        for session in self.sessions.values():
            if session.turn is not None:
                session.turn.cancel()
            session.close()
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
        timeout = self.config.acp.session_timeout_secs
        with scope:
            while True:
                await trio.sleep(min(DEFAULT_REAP_INTERVAL_SECS, timeout))
                now = trio.current_time()
                for session_id, session in list(self.sessions.items()):
                    if session.turn is None and now - session.last_activity > timeout:
                        del self.sessions[session_id]
                        session.close()
                        logger.info("session %s idle for over %ss; dropped", session_id, timeout)

    # ------------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        while True:
            try:
                text = await self.transport.receive_message()
                if text is None:
                    return
                event = self.rpc.receive(text)
            except RemoteProtocolError as exc:
                logger.warning("bad message from the client: %s", exc)
                if exc.reply_hint is not None:
                    await self._send(serialize_message(exc.reply_hint))
                continue
            if isinstance(event, RequestReceived):
                request = event.request
                await self._on_call(request.method, request.params, request_id=request.id)
            elif isinstance(event, NotificationReceived):
                note = event.notification
                await self._on_call(note.method, note.params, request_id=None, reply=False)
            elif isinstance(event, ResponseReceived):
                pending = self._calls.get(event.request_id)
                if pending is not None:
                    pending.response = event.response
                    pending.event.set()
            else:
                logger.debug("dropping a response to an unknown request id")

    async def _on_call(
        self, method: str, params: JsonValue, *, request_id: RequestId, reply: bool = True
    ) -> None:
        if reply and self._refusal is not None:
            await self._send(self.rpc.send_error(request_id, InternalError(self._refusal)))
            return
        if method == methods.CANCEL_REQUEST:
            # The client gave up on one of its requests: a running prompt is cancelled
            # (and still answered, with stopReason "cancelled"); anything else is quick.
            if isinstance(params, dict):
                turn = self._prompt_turns.get(str(params.get("requestId")))
                if turn is not None:
                    turn.cancel()
            if reply:  # a notification by definition, but a request must still be answered
                await self._send(self.rpc.send_result(request_id, schema.EmptyResult()))
            return
        if method == methods.SESSION_CANCEL:
            # Handled inline, in arrival order: a cancel is never queued behind anything.
            try:
                result = self._cancel(params)
            except RpcError as exc:
                if reply:
                    await self._send(self.rpc.send_error(request_id, exc))
                return
            if reply:
                await self._send(self.rpc.send_result(request_id, result))
            return
        handler = self._handlers.get(method)
        if method == methods.SESSION_PROMPT:
            # Reserve the turn now, so a cancel or a second prompt that arrives right after
            # this line sees it (-32002 is decided in arrival order, before any blob write).
            try:
                reservation = self._reserve_turn(params)
            except RpcError as exc:
                if reply:
                    await self._send(self.rpc.send_error(request_id, exc))
                return
            request_key = str(request_id) if reply else ""
            handler = partial(self._prompt, reservation, request_key)
            if reply:
                self._prompt_turns[request_key] = reservation[1]
        elif method in (methods.SESSION_CLOSE, methods.SESSION_STOP):
            # The session leaves the map now, in arrival order (as a prompt's turn is
            # reserved above): a prompt sent right behind a close is refused with -32000,
            # never started (and persisted) after the client closed the session.
            try:
                session = self._detach_session(params)
            except RpcError as exc:
                if reply:
                    await self._send(self.rpc.send_error(request_id, exc))
                return
            handler = partial(
                self._close if method == methods.SESSION_CLOSE else self._stop, session
            )
        if handler is None:
            if reply:
                await self._send(self.rpc.send_error(request_id, MethodNotFoundError(method)))
            else:
                logger.debug("ignoring notification %s", method)
            return
        try:
            self._request_slots.acquire_nowait()  # the usual case: no scheduler round trip
        except trio.WouldBlock:
            await self._request_slots.acquire()
        self._spawn(self._serve_request, method, handler, params, request_id, reply)

    def _spawn(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        """Start a request task; the caller holds one of ``_request_slots`` for it."""
        assert self._nursery is not None
        self._active_requests += 1
        if self._idle.is_set():
            self._idle = trio.Event()
        self._nursery.start_soon(self._tracked, fn, *args)

    async def _tracked(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        try:
            await fn(*args)
        finally:
            self._request_slots.release()
            self._active_requests -= 1
            if self._active_requests == 0:
                self._idle.set()

    async def _serve_request(
        self,
        method: str,
        handler: Handler,
        params: JsonValue,
        request_id: RequestId,
        reply: bool,
    ) -> None:
        """Run one handler; the only place exceptions become JSON-RPC errors."""
        try:
            result = await handler(params)
        except RpcError as exc:
            if not reply:
                logger.info("notification %s failed: %s", method, exc.message)
                return
            payload = self.rpc.send_error(request_id, exc)
        except Exception:
            logger.exception("internal error while handling %s", method)
            if not reply:
                return
            payload = self.rpc.send_error(request_id, InternalError(INTERNAL_ERROR_MESSAGE))
        else:
            if not reply:
                return
            payload = self.rpc.send_result(request_id, result)
        await self._send(payload)

    # ------------------------------------------------------------------ writing

    async def _send(self, payload: bytes) -> None:
        """Queue one frame for the writer (FIFO: the order of calls is the wire order).

        A full outbox blocks the caller (backpressure). Otherwise the frame is queued
        without a trip through the scheduler, and the caller yields only every
        ``DEFAULT_SENDS_PER_YIELD`` frames: a streaming turn then hands the writer frames in
        batches (one write each) and still lets the read loop in, so a cancel gets through.
        """
        try:
            self._outbox_send.send_nowait(payload)
        except trio.WouldBlock:
            try:
                await self._outbox_send.send(payload)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                logger.debug("outbox closed; dropping a frame")
            return
        except (trio.ClosedResourceError, trio.BrokenResourceError):
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
                    methods.CANCEL_REQUEST, {"requestId": request_id}
                )
                with contextlib.suppress(
                    trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError
                ):
                    self._outbox_send.send_nowait(notice)
        assert pending.response is not None
        return pending.response

    # ------------------------------------------------------------------ handlers

    async def _initialize(self, params: JsonValue) -> Payload:
        schema.decode_params(schema.InitializeParams, params)
        return schema.initialize_result(
            store_available=self.app.store is not None,
            version=__version__,
            default_model=self.config.default_model,
            max_sessions=self.config.acp.max_sessions,
            session_timeout_secs=self.config.acp.session_timeout_secs,
        )

    def _agent_table(self) -> dict[str, bool]:
        return {alias: agent.dispatchable for alias, agent in self.config.agents.items()}

    def _check_capacity(self) -> None:
        limit = self.config.acp.max_sessions
        if len(self.sessions) + len(self._reserved) >= limit:
            raise SessionLimitError(limit)

    async def _new_session(self, params: JsonValue) -> Payload:
        request = schema.decode_params(schema.NewSessionParams, params)
        alias = resolve_session_alias(
            explicit=request.agent_alias,
            connection_default=self.connection_default_agent,
            config_default=self.config.acp.default_agent,
            agents=self._agent_table(),
        )
        raw_cwd = request.cwd if request.cwd and request.cwd.strip() else None
        base = self.app.launch_dir
        # A few stat/readlink calls on a path the client named: quick enough to run inline
        # (a thread hop here would make session/new ordering depend on thread timing).
        workspace = canonical_workspace(raw_cwd, base)
        mcp_servers = select_mcp_servers(self.config.agents[alias], request.mcp_servers)
        self._check_capacity()
        session_id = str(uuid.uuid4())
        self._reserved.add(session_id)
        try:
            session = self._build_session(session_id, alias, workspace, mcp_servers=mcp_servers)
            try:
                store = self.app.store
                if store is not None:
                    try:
                        await store.create_session(session_id, alias, str(workspace))
                    except Exception as exc:
                        logger.warning("could not persist new session %s: %s", session_id, exc)
                        raise InternalError(f"Failed to persist session: {exc}") from exc
            except BaseException:
                session.close()
                raise
            self.sessions[session_id] = session
        finally:
            self._reserved.discard(session_id)
        logger.info("session %s opened (agent %s, cwd %s)", session_id, alias, workspace)
        return schema.NewSessionResult(session_id=session_id, workspace_dir=str(workspace))

    def _build_session(
        self,
        session_id: str,
        alias: str,
        workspace: Path,
        history: Iterable[ChatMessage] = (),
        plan: tuple[PlanEntry, ...] | None = None,
        *,
        mcp_servers: Sequence[McpServerConfig] = (),
    ) -> Session:
        config = self.config
        agent = config.agents[alias]
        provider_config = config.providers.get(agent.model_provider)
        if provider_config is None:
            raise InternalError(
                f"Failed to create agent: model provider `{agent.model_provider}` is not configured"
            )
        try:
            provider = self.app.provider_factory(provider_config)
            risk = config.risk_profiles.get(agent.risk_profile, RiskProfileConfig())
            runtime = config.runtime_profiles.get(agent.runtime_profile, RuntimeProfileConfig())
            policy = self.app.policy_factory(risk, workspace)
            tools = self.app.tools_factory(agent, workspace, config)
        except (ProviderError, ValueError, OSError) as exc:
            raise InternalError(f"Failed to create agent: {exc}") from exc
        session = Session(
            session_id=session_id,
            agent=agent,
            workspace=workspace,
            provider=provider,
            tools=tools,
            policy=policy,
            runtime_profile=runtime,
            history=list(history),
            plan=plan,
        )
        if mcp_servers:
            assert self._nursery is not None
            # Started in the connection's nursery: they outlive this request and stop
            # when the session leaves memory or the connection ends.
            session.mcp = start_mcp_tools(mcp_servers, nursery=self._nursery, cwd=workspace)
        session.touch()
        return session

    def _active_session(self, params: JsonValue) -> Session:
        session_id = schema.decode_params(schema.SessionIdParams, params).session_id
        session = self.sessions.get(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        return session

    def _reserve_turn(self, params: JsonValue) -> tuple[Session, Turn]:
        session = self._active_session(params)
        if session.busy:
            raise SessionBusyError(session.session_id)
        return session, session.start_turn()

    async def _prompt(
        self, reservation: tuple[Session, Turn], request_key: str, params: JsonValue
    ) -> Payload:
        session, turn = reservation
        try:
            return await self._run_prompt(session, turn, params)
        finally:
            session.finish_turn(turn)
            if self._prompt_turns.get(request_key) is turn:
                del self._prompt_turns[request_key]

    async def _run_prompt(self, session: Session, turn: Turn, params: JsonValue) -> Payload:
        session_id = session.session_id
        request = schema.decode_params(schema.PromptParams, params)
        plan = plan_prompt(request.prompt, uploads_dir=session.uploads_path)
        if plan.writes:
            await trio.to_thread.run_sync(write_blobs, session.workspace, plan.writes)
        io = _TurnChannel(self, session, turn)
        outcome = None
        try:
            with turn.scope:
                outcome = await run_turn(session, plan.text, io)
        except TurnFailed as exc:
            raise InternalError(str(exc)) from exc
        if outcome is None:
            partial_text = turn.partial_text
            await self.send_update(
                session_id, schema.turn_cancelled_update(session_id, CANCEL_MARKER)
            )
            content = f"{partial_text}\n\n{CANCEL_MARKER}" if partial_text else CANCEL_MARKER
            logger.info("session %s: turn cancelled", session_id)
            return schema.PromptResult(
                session_id=session_id, stop_reason="cancelled", content=content
            )
        session.history.extend(outcome.messages)
        store = self.app.store
        if store is not None:
            turn_record = CompletedTurn(
                messages=tuple(outcome.messages), plan=outcome.plan, usage=outcome.usage
            )
            try:
                await store.append_turn(session_id, turn_record)
            except Exception as exc:  # a store failure never fails the answered turn
                logger.warning("could not persist a turn of session %s: %s", session_id, exc)
        return schema.PromptResult(
            session_id=session_id, stop_reason="end_turn", content=outcome.content
        )

    def _cancel(self, params: JsonValue) -> Payload:
        session_id = schema.decode_params(schema.SessionIdParams, params).session_id
        session = self.sessions.get(session_id)
        if session is not None and session.turn is not None:
            session.turn.cancel()
        return schema.EmptyResult()

    def _detach_session(self, params: JsonValue) -> Session:
        session = self._active_session(params)
        del self.sessions[session.session_id]
        if session.turn is not None:
            self._closing[session.session_id] = session.turn.done
        return session

    async def _finish_detached(self, session: Session) -> None:
        if session.turn is not None:
            await session.turn.done.wait()
        # The turn may have ended before this task ran; a set event is never needed again.
        closing = self._closing.get(session.session_id)
        if closing is not None and closing.is_set():
            del self._closing[session.session_id]
        session.close()

    async def _stop(self, session: Session, params: JsonValue) -> Payload:
        await self._finish_detached(session)  # stop waits for the turn; it does not cancel it
        return schema.StopResult(session_id=session.session_id)

    async def _close(self, session: Session, params: JsonValue) -> Payload:
        if session.turn is not None:
            session.turn.cancel()
        await self._finish_detached(session)
        return schema.EmptyResult()

    async def _inbound_update(self, params: JsonValue) -> Payload:
        request = schema.decode_params(schema.InboundUpdateParams, params)
        session = self.sessions.get(request.session_id)
        if session is None:
            raise SessionNotFoundError(request.session_id)
        session.touch()
        return schema.InboundUpdateResult(session_id=request.session_id, type=request.event_type)

    async def _restore(self, params: JsonValue, *, replay: bool) -> Payload:
        """session/load (replay) and session/resume, in the reference's error order."""
        session_id = schema.decode_params(schema.SessionIdParams, params).session_id
        store = self.app.store
        if store is None:
            raise SessionNotFoundError(session_id)
        self._check_capacity()
        if session_id in self.sessions or session_id in self._reserved:
            raise InvalidParamsError(
                f"Session already active: {session_id}. Call session/close first."
            )
        self._reserved.add(session_id)
        try:
            closing = self._closing.get(session_id)
            if closing is not None:
                await closing.wait()  # the closed copy's last turn is saved first
            try:
                stored = await store.load_session(session_id)
            except Exception as exc:
                logger.warning("could not load session %s: %s", session_id, exc)
                raise InternalError(f"Failed to load session: {exc}") from exc
            if stored is None:
                raise SessionNotFoundError(session_id)
            alias = resolve_restore_alias(
                stored=stored.info.agent_alias,
                config_default=self.config.acp.default_agent,
                agents=self._agent_table(),
            )
            history = [message for message in stored.messages if message.role != "system"]
            session = self._build_session(
                session_id,
                alias,
                Path(stored.info.workspace_dir),
                history,
                stored.plan,
                mcp_servers=select_mcp_servers(self.config.agents[alias], ()),
            )
            self.sessions[session_id] = session
        finally:
            self._reserved.discard(session_id)
        try:
            await self._replay(session, stored, history, replay=replay)
        except BaseException:
            # The client is told the load failed, so the session must not stay half-open
            # (holding its max_sessions slot and refusing a retry as "already active").
            if self.sessions.get(session_id) is session:
                del self.sessions[session_id]
                if session.turn is not None:  # a prompt the client sent too early
                    session.turn.cancel()
                session.close()
            raise
        return schema.EmptyResult()

    async def _replay(
        self,
        session: Session,
        stored: StoredSession,
        history: Sequence[ChatMessage],
        *,
        replay: bool,
    ) -> None:
        """What session/load (all of it) or session/resume (the plan) sends before answering.

        A session/close or session/stop served meanwhile (it is in ``sessions`` already)
        ends the replay: once the close is answered, nothing more of that session follows.
        """
        session_id = session.session_id

        def still_open() -> bool:
            return self.sessions.get(session_id) is session

        if stored.dropped_messages:
            # The store kept only the newest whole turns; say so before anything else
            # (reference: `_zeroclaw/history_trimmed`, on load and on resume).
            notice = schema.HistoryTrimmedParams(
                session_id=session_id,
                dropped_messages=stored.dropped_messages,
                kept_turns=stored.kept_turns,
                reason="stored history exceeds the restore limit; oldest turns omitted",
            )
            await self._send(self.rpc.send_notification(methods.HISTORY_TRIMMED, notice))
        if replay:
            # Delivered files are embedded again as the client saw them live: re-read and
            # re-hashed from uploads/, in a worker thread (replay.py bounds the total).
            embed = partial(embed_delivered_file, session.workspace / "uploads")
            updates = await trio.to_thread.run_sync(partial(history_updates, history, embed=embed))
            for update in updates:
                if not still_open():
                    return
                await self.send_update(session_id, update)
        elif session.plan and still_open():
            await self.send_update(session_id, plan_update(session.plan))


class _TurnChannel:
    """The ``TurnIO`` one turn uses: updates for its session, approvals with a timeout."""

    def __init__(self, connection: AcpConnection, session: Session, turn: Turn) -> None:
        self._connection = connection
        self._session_id = session.session_id
        self._turn = turn
        self._timeout = connection.config.acp.session_timeout_secs

    async def send_update(self, update: schema.SessionUpdate) -> None:
        await self._connection.send_update(self._session_id, update)

    async def send_text(self, text: str, *, thought: bool = False) -> None:
        content = schema.TextContent(text=text)
        if thought:
            await self.send_update(schema.AgentThoughtChunk(content=content))
        else:
            self._turn.streamed.append(text)
            await self.send_update(schema.AgentMessageChunk(content=content))

    async def request_permission(
        self, params: schema.RequestPermissionParams
    ) -> schema.PermissionOutcome | None:
        with trio.move_on_after(self._timeout):
            response = await self._connection.call(methods.SESSION_REQUEST_PERMISSION, params)
            if isinstance(response, ErrorResponse):
                logger.info("permission request answered with an error: %s", response.error.message)
                return None
            return schema.parse_permission_outcome(response.result)
        logger.warning(
            "session %s: no answer to a permission request within %ss; denied",
            self._session_id,
            self._timeout,
        )
        return None


def canonical_workspace(raw: str | None, launch_dir: Path) -> Path:
    """The session's jail: ``cwd`` canonicalised (symlinks and ``..`` resolved) so it cannot
    escape, relative paths taken from the launch directory, omitted → the launch directory.

    Raises:
        InvalidParamsError: the path does not exist or is not a directory.
    """
    if raw is None:
        return launch_dir.resolve()
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = launch_dir / path
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InvalidParamsError(f"cwd is not a usable directory ({raw}): {reason}") from None
    if not resolved.is_dir():
        raise InvalidParamsError(f"cwd is not a usable directory ({raw}): Not a directory")
    return resolved
