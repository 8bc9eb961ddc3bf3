"""What each ACP method does, and the dispatch table that names them.

``AcpHandlers.routes`` pairs every inbound method of ``acp_core.methods.METHODS`` with
its handler; the method's ``ordering`` there says which of the three shapes the handler
has (``Route``, acp_server/protocol/routes.py). The connection
(acp_server/protocol/connection.py) decodes each call's params once, into the method's
params type, and runs the route; failures become
JSON-RPC errors in one place (acp_server/errors.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from acp_core import methods, schema
from acp_core.aliases import resolve_restore_alias, resolve_session_alias
from acp_core.blobs import plan_prompt
from acp_core.errors import SessionBusyError, SessionNotFoundError
from acp_core.jsonrpc import Payload
from acp_core.methods import METHODS
from acp_server import __version__
from acp_server.agent.io.uploads import write_blobs
from acp_server.agent.limits.actions import SessionActions
from acp_server.agent.providers.base import ProviderError
from acp_server.agent.providers.images import agent_sees_images
from acp_server.agent.runtime.session import Session, Turn
from acp_server.agent.tools.mcp_servers import offers_mcp_over_http, select_mcp_servers
from acp_server.config import AnyMcpServerConfig, RiskProfileConfig, RuntimeProfileConfig
from acp_server.errors import AgentUnavailable, OperationFailed, SessionFenced
from acp_server.model import ChatMessage, CompletedTurn, PlanStep
from acp_server.observability.turns import observed_turn
from acp_server.protocol import config_options as options
from acp_server.protocol import ownership, visibility
from acp_server.protocol.auth_methods import auth_methods
from acp_server.protocol.client_profile import client_profile
from acp_server.protocol.followups import with_commands
from acp_server.protocol.fork import fork_session
from acp_server.protocol.modes import admit_set_mode
from acp_server.protocol.roots import (
    agent_risk_profile,
    attach_roots,
    canonical_roots,
    canonical_workspace,
    restored_roots,
    store_roots,
)
from acp_server.protocol.routes import Job, Route
from acp_server.protocol.sessions import SessionTable
from acp_server.security.sandbox import agent_posture
from acp_server.storage import AsyncSessionStore, TurnUnsaved

if TYPE_CHECKING:
    from acp_server.protocol.connection import AcpConnection

# The turn runtime, session/list and session/load's replay are imported by the handlers
# that use them: `zeroclaw acp` answers initialize and session/new without loading them
# (tests/e2e/test_startup_imports.py).

logger = logging.getLogger(__name__)

CANCEL_MARKER: Final = "[turn cancelled via client]"
UNSAVED_TURN_WARNING: Final = "[warning: this turn is not saved"


class AcpHandlers:
    """The ACP methods of one connection, over its session table."""

    def __init__(self, connection: AcpConnection) -> None:
        self.connection = connection
        self.app = connection.app
        self.config = connection.app.config
        self.table = SessionTable(self.config.acp.max_sessions, connection.app.live_sessions)
        # Running prompts by the text of their request id (for $/cancel_request).
        self._prompt_turns: dict[str, Turn] = {}

    def routes(self) -> dict[str, Route]:
        """The dispatch table: every inbound method of ``METHODS``, nothing else."""
        handlers: dict[str, tuple[Callable[..., Any], Callable[[msgspec.Raw], None] | None]] = {
            methods.INITIALIZE: (self.initialize, None),
            methods.SESSION_NEW: (self.new_session, None),
            methods.SESSION_PROMPT: (self.admit_prompt, self._prompt_precedence),
            methods.SESSION_CANCEL: (self.cancel, None),
            methods.SESSION_STOP: (self.admit_stop, None),
            methods.SESSION_LOAD: (partial(self.admit_restore, replay=True), None),
            methods.SESSION_RESUME: (partial(self.admit_restore, replay=False), None),
            methods.SESSION_CLOSE: (self.admit_close, None),
            methods.SESSION_LIST: (self.list_sessions, None),
            methods.SESSION_DELETE: (self.admit_delete, None),
            methods.SESSION_SET_CONFIG_OPTION: (partial(options.admit_choice, self), None),
            methods.SESSION_SET_MODE: (partial(admit_set_mode, self), None),
            methods.SESSION_FORK: (partial(fork_session, self), None),
            methods.SESSION_UPDATE: (self.inbound_update, None),
            methods.SESSION_EVENT: (self.inbound_update, None),
            methods.CANCEL_REQUEST: (self.cancel_request, None),
        }
        routes: dict[str, Route] = {}
        for name, spec in METHODS.items():
            if spec.inbound_params is None:
                continue
            handler, precedence = handlers.pop(name)
            routes[name] = Route(spec, spec.inbound_params, handler, precedence)
        assert not handlers, f"handlers for methods METHODS does not list: {sorted(handlers)}"
        return routes

    # ------------------------------------------------------------------ lifecycle

    def cancel_all(self) -> None:
        """The connection is ending: cancel every turn and let every session go."""
        for session in self.table:
            if session.turn is not None:
                session.turn.cancel()
            session.close()

    def reap_idle(self) -> None:
        self.table.reap_idle(trio.current_time(), self.config.acp.idle_session_timeout)

    # ------------------------------------------------------------------ inline

    def cancel(self, params: schema.SessionIdParams, request_key: str) -> Payload:
        session = self.table.get(params.session_id)
        if session is not None and session.turn is not None:
            session.turn.cancel()
        return schema.EmptyResult()

    def cancel_request(self, params: schema.CancelRequestParams, request_key: str) -> Payload:
        # The client gave up on one of its requests: a running prompt is cancelled (and
        # still answered, with stopReason "cancelled"); anything else is quick.
        turn = self._prompt_turns.get(params.request_key)
        if turn is not None:
            turn.cancel()
        return schema.EmptyResult()

    # ------------------------------------------------------------------ admitted

    def admit_prompt(self, params: schema.PromptParams, request_key: str) -> Job:
        # Reserve the turn now, so a cancel or a second prompt that arrives right after
        # this one sees it (-32002 is decided in arrival order, before any blob write).
        store = self.app.store
        if params.session_id in self.table.reaped and store is not None:
            return self._admit_reaped_prompt(params, request_key, store)
        session = self.table.live(params.session_id)
        if session.busy:
            raise SessionBusyError(session.session_id)
        turn = session.start_turn()
        if request_key:
            self._prompt_turns[request_key] = turn
        return partial(self._prompt, session, turn, request_key, params)

    def _admit_reaped_prompt(
        self, params: schema.PromptParams, request_key: str, store: AsyncSessionStore
    ) -> Job:
        """A prompt for a session the idle reaper dropped: restored as session/resume
        would (nothing replayed), then prompted, so an editor left open keeps working."""
        session_id = params.session_id
        self.table.check_capacity()
        self.table.check_not_active(session_id)
        opening = self.table.begin_opening(session_id)

        async def restore_then_prompt() -> Payload:
            await ownership.check_reaped_owner(self.table, store, session_id, opening)
            restore = schema.RestoreParams(session_id=session_id)
            await self._restore(session_id, store, opening, replay=False, params=restore)
            session = self.table.live(session_id)
            if session.busy:
                raise SessionBusyError(session_id)
            turn = session.start_turn()
            if request_key:
                self._prompt_turns[request_key] = turn
            return await self._prompt(session, turn, request_key, params)

        return restore_then_prompt

    def _prompt_precedence(self, raw: msgspec.Raw) -> None:
        """An unknown or busy session outranks a malformed prompt (ZeroClaw's order)."""
        session_id = schema.decode_inbound(schema.SessionIdParams, raw).session_id
        if self.table.live(session_id).busy:
            raise SessionBusyError(session_id)

    def admit_close(self, params: schema.SessionIdParams, request_key: str) -> Job:
        # The session leaves the table now, in arrival order (as a prompt's turn is
        # reserved): a prompt sent right behind a close is refused with -32000, never
        # started (and persisted) after the client closed the session. A close right
        # behind a load of the same id waits for the load, then closes what it opened.
        restoring = self.table.restore_in_progress(params.session_id)
        if restoring is not None:
            return partial(self._after_restore, restoring, params.session_id, self._close)
        session = self.table.detach(params.session_id)
        return partial(self._close, session)

    def admit_stop(self, params: schema.SessionIdParams, request_key: str) -> Job:
        restoring = self.table.restore_in_progress(params.session_id)
        if restoring is not None:
            return partial(self._after_restore, restoring, params.session_id, self._stop)
        session = self.table.detach(params.session_id)
        return partial(self._stop, session)

    def admit_delete(self, params: schema.SessionIdParams, request_key: str) -> Job:
        """ACP ``session/delete``: a live copy is closed first (as ``session/close``, in
        arrival order), then the session and its history leave the store. Uploads stay:
        they are content-addressed and other sessions may share them."""
        session_id = params.session_id
        restoring = self.table.restore_in_progress(session_id)
        if restoring is not None:
            return partial(self._after_restore, restoring, session_id, self._close_and_delete)
        session = self.table.get(session_id)
        if session is not None:
            return partial(self._close_and_delete, self.table.detach(session_id))
        return partial(self._delete_stored, session_id)

    async def _close_and_delete(self, session: Session) -> Payload:
        closed = await self._close(session)
        if self.app.store is None:
            return closed  # an in-memory session: closing it is all there is to delete
        return await self._delete_stored(session.session_id)

    async def _delete_stored(self, session_id: str) -> Payload:
        store = self.app.store
        if store is None:
            raise SessionNotFoundError(session_id)
        await visibility.require_visible(store, self.connection.principal, session_id)
        await self.table.wait_closed(session_id)  # a closing copy's last turn is saved first
        try:
            deleted = await store.delete_session(session_id)
        except Exception as exc:
            raise OperationFailed("Failed to delete session") from exc
        self.table.reaped.discard(session_id)
        if not deleted:
            raise SessionNotFoundError(session_id)
        logger.info("session %s deleted", session_id)
        return schema.EmptyResult()

    async def _after_restore(
        self,
        restoring: trio.Event,
        session_id: str,
        finish: Callable[[Session], Awaitable[Payload]],
    ) -> Payload:
        await restoring.wait()
        return await finish(self.table.detach(session_id))  # -32000 if the restore failed

    async def _close(self, session: Session) -> Payload:
        if session.turn is not None:
            session.turn.cancel()
        await self.table.finish_detached(session)
        return schema.EmptyResult()

    async def _stop(self, session: Session) -> Payload:
        await self.table.finish_detached(session)  # stop waits for the turn; never cancels
        return schema.StopResult(session_id=session.session_id)

    # ------------------------------------------------------------------ concurrent

    async def initialize(self, params: schema.InitializeParams) -> Payload:
        self.connection.client_capabilities = params.client_capabilities
        self.connection.client_profile = client_profile(params)
        self.connection.shares_filesystem = params.shared_filesystem
        return schema.initialize_result(
            store_available=self.app.store is not None,
            version=__version__,
            default_model=self.config.default_model,
            max_sessions=self.config.acp.max_sessions,
            session_timeout_secs=self.config.acp.session_timeout_secs,
            sandbox=agent_posture(self.config, self.connection.connection_default_agent).meta(),
            image=agent_sees_images(self.config, self.connection.connection_default_agent),
            mcp_over_http=offers_mcp_over_http(
                self.config, self.connection.connection_default_agent
            ),
            auth_methods=auth_methods(terminal_auth=params.terminal_auth),
        )

    async def list_sessions(self, params: schema.ListSessionsParams) -> Payload:
        """ACP ``session/list``: the store's sessions, newest first, one page at a time
        (storage/session_list.py); without a store there is nothing to list."""
        from acp_server.protocol.listing import list_stored_sessions

        principal = visibility.listed_principal(self.connection.principal)
        return await list_stored_sessions(self.app.store, params, principal=principal)

    def _agent_table(self) -> dict[str, bool]:
        return {alias: agent.dispatchable for alias, agent in self.config.agents.items()}

    async def new_session(self, request: schema.NewSessionParams) -> Payload:
        alias = resolve_session_alias(
            explicit=request.agent_alias,
            connection_default=self.connection.connection_default_agent,
            config_default=self.config.acp.default_agent,
            agents=self._agent_table(),
        )
        raw_cwd = request.cwd if request.cwd and request.cwd.strip() else None
        # A few stat/readlink calls on a path the client named: quick enough to run inline
        # (a thread hop here would make session/new ordering depend on thread timing).
        risk = agent_risk_profile(self.config, alias)
        workspace = canonical_workspace(raw_cwd, self.app.launch_dir, risk)
        extra_roots = canonical_roots(request.additional_directories, workspace, risk)
        mcp_servers = select_mcp_servers(
            self.config.agents[alias], request.mcp_servers, remote=self.connection.remote
        )
        self.table.check_capacity()
        session_id = str(uuid.uuid4())
        with self.table.reserving(session_id):
            session = self._build_session(session_id, alias, workspace, mcp_servers=mcp_servers)
            attach_roots(session, extra_roots)
            try:
                store = self.app.store
                if store is not None:
                    try:
                        await store.create_session(
                            session_id, alias, str(workspace), principal=self.connection.principal
                        )
                    except Exception as exc:
                        raise OperationFailed("Failed to persist session") from exc
                    if extra_roots:
                        await store_roots(store, session_id, extra_roots)
                    session.epoch = ownership.CREATOR_EPOCH
            except BaseException:
                session.close()
                raise
            self.table.add(session)
        logger.info("session %s opened (agent %s, cwd %s)", session_id, alias, workspace)
        sandbox = schema.SessionZeroclawMeta(sandbox=agent_posture(self.config, alias).meta())
        result = schema.NewSessionResult(
            session_id=session_id,
            workspace_dir=str(workspace),
            modes=options.session_modes(self.config, session),
            config_options=options.config_options(self.config, session),
            meta=schema.NewSessionMeta(zeroclaw=sandbox),
        )
        return with_commands(self.connection, result, session)

    def _build_session(
        self,
        session_id: str,
        alias: str,
        workspace: Path,
        history: Iterable[ChatMessage] = (),
        plan: tuple[PlanStep, ...] | None = None,
        *,
        mcp_servers: Sequence[AnyMcpServerConfig] = (),
    ) -> Session:
        config = self.config
        agent = config.agents[alias]
        provider_config = config.providers.get(agent.model_provider)
        if provider_config is None:
            raise AgentUnavailable(f"model provider `{agent.model_provider}` is not configured")
        try:
            provider = self.app.provider_factory(provider_config)
        except ProviderError as exc:
            raise AgentUnavailable(str(exc)) from exc
        try:
            risk = config.risk_profiles.get(agent.risk_profile, RiskProfileConfig())
            runtime = config.runtime_profiles.get(agent.runtime_profile, RuntimeProfileConfig())
            policy = self.app.policy_factory(risk, workspace)
            tools = self.app.tools_factory(agent, workspace, config)
        except (ValueError, OSError) as exc:
            raise OperationFailed("Failed to create agent") from exc
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
            provider_ref=agent.model_provider,
            risk_level=risk.level,
            context_window=provider_config.context_window or 0,
            metrics=self.app.metrics,
        )
        principal = self.connection.principal
        session.cost = self.app.cost_meter(
            session_id, agent, provider_config, provider.model, principal
        )
        session.actions = SessionActions(
            session.action_budget, self.app.principal_actions.for_principal(principal)
        )
        if mcp_servers:
            # Imported only when a session has MCP servers: agent/tools/mcp.py is not
            # needed to answer a plain session/new (tests/e2e/test_startup_imports.py).
            from acp_server.agent.tools.mcp import start_mcp_tools

            # Started in the connection's nursery: they outlive this request and stop
            # when the session leaves memory or the connection ends.
            session.mcp = start_mcp_tools(
                mcp_servers, nursery=self.connection.nursery, cwd=workspace
            )
        session.touch()
        return session

    async def _prompt(
        self, session: Session, turn: Turn, request_key: str, request: schema.PromptParams
    ) -> Payload:
        try:
            with observed_turn(self.app.metrics, session.agent.alias, session.session_id) as seen:
                result = await self._run_prompt(session, turn, request)
                seen.outcome = result.stop_reason
                return result
        finally:
            session.finish_turn(turn)
            if self._prompt_turns.get(request_key) is turn:
                del self._prompt_turns[request_key]

    async def _run_prompt(
        self, session: Session, turn: Turn, request: schema.PromptParams
    ) -> schema.PromptResult:
        from acp_server.agent.runtime.turn import run_turn
        from acp_server.protocol.presentation.turn_channel import TurnChannel
        from acp_server.protocol.presentation.usage import prompt_usage
        from acp_server.protocol.titles import title_from_prompt

        session_id = session.session_id
        await ownership.check_still_held(self.table, self.app.store, session)
        plan = plan_prompt(request.prompt, uploads_dir=session.uploads_path)
        if plan.writes:
            await trio.to_thread.run_sync(write_blobs, session.workspace, plan.writes)
        if session.title is None:
            # The user's own words only: a resource link or an image names nothing.
            texts = [part.text for part in request.prompt if isinstance(part, schema.TextContent)]
            await self._name_session(session, title_from_prompt(texts))
        io = TurnChannel(
            self.connection, session_id, permission_timeout=self.config.acp.permission_timeout
        )
        outcome = None
        with turn.scope:
            outcome = await run_turn(session, plan.text, io)
        if outcome is None:
            partial_text = turn.partial_text
            if self.connection.client_profile.cancel_marker_tool_call:
                # Opt-in only: clients draw any tool_call as a tool (acpx prints it, avante
                # stays on "tool calling"); stopReason and content carry the cancel.
                await self.connection.send_update(
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
                with self.app.metrics.timed_store_commit():
                    await store.append_turn(session_id, turn_record, epoch=session.epoch)
            except SessionFenced as exc:
                raise ownership.fenced_turn(self.table, session) from exc
            except Exception as exc:
                await self._turn_not_saved(session_id, exc)
        return schema.PromptResult(
            session_id=session_id,
            stop_reason="end_turn",
            content=outcome.content,
            usage=prompt_usage(outcome.usage),
        )

    async def _name_session(self, session: Session, title: str | None) -> None:
        """Give an untitled session ``title``: stored (best effort: the turn goes on if the
        store cannot write it) and announced as ACP ``session_info_update``."""
        if title is None:
            return
        session.title = title
        await self._store_title(session.session_id, title)
        await self.connection.send_update(session.session_id, schema.SessionInfoUpdate(title=title))

    async def _store_title(self, session_id: str, title: str) -> None:
        store = self.app.store
        if store is None:
            return
        try:
            await store.set_title(session_id, title)
        except Exception as exc:
            logger.warning("could not store the title of %s: %s", session_id, exc)

    async def _turn_not_saved(self, session_id: str, exc: Exception) -> None:
        """Tell the client its turn is not on disk: a warning streamed in the turn while the
        store keeps it for the next commit; an error when the store could not keep it."""
        if isinstance(exc, TurnUnsaved) and not exc.kept:
            raise OperationFailed("The turn could not be saved and is lost") from exc
        logger.warning("could not persist a turn of session %s: %s", session_id, exc)
        if isinstance(exc, TurnUnsaved):
            warning = (
                f"{UNSAVED_TURN_WARNING}: the session store could not write it; it is kept"
                f" ({exc.pending} unsaved) and written with the next turn that can be saved"
                " (lost if the server stops before the store can write again)]"
            )
        else:
            warning = f"{UNSAVED_TURN_WARNING}: the session store could not write it]"
        chunk = schema.AgentMessageChunk(content=schema.text_block(f"\n\n{warning}"))
        await self.connection.send_update(session_id, chunk)

    async def inbound_update(self, request: schema.InboundUpdateParams) -> Payload:
        session = self.table.live(request.session_id)
        session.touch()
        return schema.InboundUpdateResult(session_id=request.session_id, type=request.event_type)

    def admit_restore(self, params: schema.RestoreParams, request_key: str, *, replay: bool) -> Job:
        """session/load (replay) and session/resume, in ZeroClaw's error order. The id
        is marked as being restored in arrival order, so a close sent right behind it
        waits for the restore and then closes the session."""
        session_id = params.session_id
        store = self.app.store
        if store is None:
            raise SessionNotFoundError(session_id)
        self.table.check_capacity()
        self.table.check_not_active(session_id)
        opening = self.table.begin_opening(session_id)
        return partial(self._restore, session_id, store, opening, replay=replay, params=params)

    async def _restore(
        self,
        session_id: str,
        store: AsyncSessionStore,
        opening: trio.Event,
        *,
        replay: bool,
        params: schema.RestoreParams,
    ) -> Payload:
        try:
            await visibility.require_visible(store, self.connection.principal, session_id)
            return await self._restore_and_replay(session_id, store, replay=replay, params=params)
        finally:
            self.table.end_opening(session_id, opening)

    async def _restore_and_replay(
        self,
        session_id: str,
        store: AsyncSessionStore,
        *,
        replay: bool,
        params: schema.RestoreParams,
    ) -> Payload:
        with self.table.reserving(session_id):
            epoch, stored = await ownership.claim_and_load(self.table, store, session_id)
            choices = await options.stored_choices(store, session_id)
            alias = resolve_restore_alias(
                stored=stored.info.agent_alias,
                config_default=self.config.acp.default_agent,
                agents=self._agent_table(),
            )
            history = [message for message in stored.messages if message.role != "system"]
            workspace = Path(stored.info.workspace_dir)
            risk = agent_risk_profile(self.config, alias)
            extra_roots = await restored_roots(
                store, session_id, params.additional_directories, workspace, risk
            )
            mcp_servers = select_mcp_servers(
                self.config.agents[alias], params.mcp_servers, remote=self.connection.remote
            )
            session = self._build_session(
                session_id,
                alias,
                workspace,
                history,
                stored.plan,
                mcp_servers=mcp_servers,
            )
            attach_roots(session, extra_roots)
            # None for a session stored before sessions had titles: its next prompt names it.
            session.title = stored.info.title
            options.apply_stored_choices(self.app, session, choices)
            session.epoch = epoch
            self.table.add(session)
        from acp_server.protocol.restore_replay import send_restored

        try:
            await send_restored(
                self.connection, self.table, session, stored, history, replay=replay
            )
        except BaseException:
            # The client is told the load failed, so the session must not stay half-open
            # (holding its max_sessions slot and refusing a retry as "already active").
            if self.table.remove_if_current(session):
                if session.turn is not None:  # a prompt the client sent too early
                    session.turn.cancel()
                session.close()
            raise
        return with_commands(
            self.connection, options.restored_result(self.config, session), session
        )
