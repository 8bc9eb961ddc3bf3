"""A session's life on one connection: ``session/new``, ``session/load`` and
``session/resume`` (restore), ``session/close``, ``session/stop``, ``session/delete``, the
restore a prompt for a reaped session makes, and the ``Session`` each opening builds.

Each admission runs in the read loop in arrival order (``Route``, protocol/routes.py) and
moves the id in the connection's ``SessionTable`` (services/session_table.py, whose states
are services/session_state.py); the job it returns does the slow part in its own task.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

import trio

from acp_core import schema
from acp_core.aliases import resolve_restore_alias, resolve_session_alias
from acp_core.errors import SessionNotFoundError
from acp_core.jsonrpc import Payload
from acp_server.agent.limits.actions import SessionActions
from acp_server.agent.providers.base import ProviderError
from acp_server.agent.runtime.session import Session
from acp_server.agent.tools.mcp_servers import select_mcp_servers
from acp_server.config import (
    AnyMcpServerConfig,
    Config,
    RiskProfileConfig,
    RuntimeProfileConfig,
)
from acp_server.errors import AgentUnavailable, OperationFailed
from acp_server.model import ChatMessage, PlanStep
from acp_server.protocol.routes import Job
from acp_server.protocol.services import config_options as options
from acp_server.protocol.services import ownership, visibility
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.protocol.services.followups import with_commands
from acp_server.protocol.services.roots import (
    agent_risk_profile,
    attach_roots,
    canonical_roots,
    canonical_workspace,
    restored_roots,
    store_roots,
)
from acp_server.security.sandbox import agent_posture
from acp_server.storage import AsyncSessionStore

# session/load's replay is imported by the restore that uses it: `zeroclaw acp` answers
# initialize and session/new without loading it (tests/e2e/test_startup_imports.py).

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------- session/new


async def new_session(state: ConnectionState, request: schema.NewSessionParams) -> Payload:
    config, outbound, table = state.config, state.outbound, state.table
    alias = resolve_session_alias(
        explicit=request.agent_alias,
        connection_default=outbound.connection_default_agent,
        config_default=config.acp.default_agent,
        agents=state.agent_table(),
    )
    raw_cwd = request.cwd if request.cwd and request.cwd.strip() else None
    # A few stat/readlink calls on a path the client named: quick enough to run inline
    # (a thread hop here would make session/new ordering depend on thread timing).
    risk = agent_risk_profile(config, alias)
    workspace = canonical_workspace(raw_cwd, state.app.launch_dir, risk)
    extra_roots = canonical_roots(request.additional_directories, workspace, risk)
    mcp_servers = select_mcp_servers(
        config.agents[alias], request.mcp_servers, remote=outbound.remote
    )
    table.check_capacity()
    session_id = str(uuid.uuid4())
    with table.reserving(session_id):
        session = build_session(state, session_id, alias, workspace, mcp_servers=mcp_servers)
        attach_roots(session, extra_roots)
        try:
            store = state.app.store
            if store is not None:
                try:
                    await store.create_session(
                        session_id, alias, str(workspace), principal=outbound.principal
                    )
                except Exception as exc:
                    raise OperationFailed("Failed to persist session") from exc
                if extra_roots:
                    await store_roots(store, session_id, extra_roots)
                session.epoch = ownership.CREATOR_EPOCH
        except BaseException:
            session.close()
            raise
        table.add(session)
    logger.info("session %s opened (agent %s, cwd %s)", session_id, alias, workspace)
    return with_commands(state, opened_result(config, session), session)


def opened_result(config: Config, session: Session) -> schema.NewSessionResult:
    """What ``session/new`` and ``session/fork`` answer for the ``session`` they opened:
    its id, workspace, modes and options, and the sandbox its agent runs commands in."""
    sandbox = schema.SessionZeroclawMeta(sandbox=agent_posture(config, session.agent.alias).meta())
    return schema.NewSessionResult(
        session_id=session.session_id,
        workspace_dir=str(session.workspace),
        modes=options.session_modes(config, session),
        config_options=options.config_options(config, session),
        meta=schema.NewSessionMeta(zeroclaw=sandbox),
    )


def build_session(
    state: ConnectionState,
    session_id: str,
    alias: str,
    workspace: Path,
    history: Iterable[ChatMessage] = (),
    plan: tuple[PlanStep, ...] | None = None,
    *,
    mcp_servers: Sequence[AnyMcpServerConfig] = (),
) -> Session:
    """A live ``Session`` of agent ``alias`` in ``workspace`` (session/new, a restore, a
    fork), with its provider, tools, policy, spending and action budgets, MCP servers."""
    app = state.app
    config = state.config
    agent = config.agents[alias]
    provider_config = config.providers.get(agent.model_provider)
    if provider_config is None:
        raise AgentUnavailable(f"model provider `{agent.model_provider}` is not configured")
    try:
        provider = app.provider_factory(provider_config)
    except ProviderError as exc:
        raise AgentUnavailable(str(exc)) from exc
    try:
        risk = config.risk_profiles.get(agent.risk_profile, RiskProfileConfig())
        runtime = config.runtime_profiles.get(agent.runtime_profile, RuntimeProfileConfig())
        policy = app.policy_factory(risk, workspace)
        tools = app.tools_factory(agent, workspace, config)
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
        metrics=app.metrics,
    )
    principal = state.outbound.principal
    session.cost = app.cost_meter(session_id, agent, provider_config, provider.model, principal)
    session.actions = SessionActions(
        session.action_budget, app.principal_actions.for_principal(principal)
    )
    if mcp_servers:
        # Imported only when a session has MCP servers: agent/tools/mcp.py is not
        # needed to answer a plain session/new (tests/e2e/test_startup_imports.py).
        from acp_server.agent.tools.mcp import start_mcp_tools

        # Started in the connection's nursery: they outlive this request and stop
        # when the session leaves memory or the connection ends.
        session.mcp = start_mcp_tools(mcp_servers, nursery=state.outbound.nursery, cwd=workspace)
    session.touch()
    return session


# ---------------------------------------------------------------------- restore


def admit_restore(
    state: ConnectionState, params: schema.RestoreParams, request_key: str, *, replay: bool
) -> Job:
    """session/load (replay) and session/resume, in ZeroClaw's error order. The id
    is marked as being restored in arrival order, so a close sent right behind it
    waits for the restore and then closes the session."""
    session_id = params.session_id
    store = state.app.store
    if store is None:
        raise SessionNotFoundError(session_id)
    state.table.check_capacity()
    state.table.check_not_active(session_id)
    opening = state.table.begin_opening(session_id)
    return partial(restore, state, session_id, store, opening, replay=replay, params=params)


def admit_reaped_restore(
    state: ConnectionState,
    session_id: str,
    store: AsyncSessionStore,
    then: Callable[[Session], Awaitable[Payload]],
) -> Job:
    """A request for a session the idle reaper dropped: restored as session/resume
    would (nothing replayed), then handed to ``then`` (a prompt), so an editor left
    open keeps working."""
    table = state.table
    table.check_capacity()
    table.check_not_active(session_id)
    opening = table.begin_opening(session_id)

    async def restore_then() -> Payload:
        await ownership.check_reaped_owner(table, store, session_id, opening)
        params = schema.RestoreParams(session_id=session_id)
        await restore(state, session_id, store, opening, replay=False, params=params)
        return await then(table.live(session_id))

    return restore_then


async def restore(
    state: ConnectionState,
    session_id: str,
    store: AsyncSessionStore,
    opening: trio.Event,
    *,
    replay: bool,
    params: schema.RestoreParams,
) -> Payload:
    try:
        await visibility.require_visible(store, state.outbound.principal, session_id)
        return await _restore_and_replay(state, session_id, store, replay=replay, params=params)
    finally:
        state.table.end_opening(session_id, opening)


async def _restore_and_replay(
    state: ConnectionState,
    session_id: str,
    store: AsyncSessionStore,
    *,
    replay: bool,
    params: schema.RestoreParams,
) -> Payload:
    config, table = state.config, state.table
    with table.reserving(session_id):
        epoch, stored = await ownership.claim_and_load(table, store, session_id)
        choices = await options.stored_choices(store, session_id)
        alias = resolve_restore_alias(
            stored=stored.info.agent_alias,
            config_default=config.acp.default_agent,
            agents=state.agent_table(),
        )
        history = [message for message in stored.messages if message.role != "system"]
        workspace = Path(stored.info.workspace_dir)
        risk = agent_risk_profile(config, alias)
        extra_roots = await restored_roots(
            store, session_id, params.additional_directories, workspace, risk
        )
        mcp_servers = select_mcp_servers(
            config.agents[alias], params.mcp_servers, remote=state.outbound.remote
        )
        session = build_session(
            state,
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
        options.apply_stored_choices(state.app, session, choices)
        session.epoch = epoch
        table.add(session)
    from acp_server.protocol.services.restore_replay import send_restored

    try:
        await send_restored(state.outbound, table, session, stored, history, replay=replay)
    except BaseException:
        # The client is told the load failed, so the session must not stay half-open
        # (holding its max_sessions slot and refusing a retry as "already active").
        if table.remove_if_current(session):
            if session.turn is not None:  # a prompt the client sent too early
                session.turn.cancel()
            session.close()
        raise
    return with_commands(state, options.restored_result(config, session), session)


# ---------------------------------------------------------------------- close, stop, delete


def admit_close(state: ConnectionState, params: schema.SessionIdParams, request_key: str) -> Job:
    # The session leaves the table now, in arrival order (as a prompt's turn is
    # reserved): a prompt sent right behind a close is refused with -32000, never
    # started (and persisted) after the client closed the session. A close right
    # behind a load of the same id waits for the load, then closes what it opened.
    restoring = state.table.restore_in_progress(params.session_id)
    if restoring is not None:
        return partial(_after_restore, state, restoring, params.session_id, close)
    session = state.table.detach(params.session_id)
    return partial(close, state, session)


def admit_stop(state: ConnectionState, params: schema.SessionIdParams, request_key: str) -> Job:
    restoring = state.table.restore_in_progress(params.session_id)
    if restoring is not None:
        return partial(_after_restore, state, restoring, params.session_id, stop)
    session = state.table.detach(params.session_id)
    return partial(stop, state, session)


def admit_delete(state: ConnectionState, params: schema.SessionIdParams, request_key: str) -> Job:
    """ACP ``session/delete``: a live copy is closed first (as ``session/close``, in
    arrival order), then the session and its history leave the store. Uploads stay:
    they are content-addressed and other sessions may share them."""
    session_id = params.session_id
    table = state.table
    restoring = table.restore_in_progress(session_id)
    if restoring is not None:
        return partial(_after_restore, state, restoring, session_id, _close_and_delete)
    session = table.get(session_id)
    if session is not None:
        return partial(_close_and_delete, state, table.detach(session_id))
    return partial(_delete_stored, state, session_id)


async def _close_and_delete(state: ConnectionState, session: Session) -> Payload:
    closed = await close(state, session)
    if state.app.store is None:
        return closed  # an in-memory session: closing it is all there is to delete
    return await _delete_stored(state, session.session_id)


async def _delete_stored(state: ConnectionState, session_id: str) -> Payload:
    store = state.app.store
    if store is None:
        raise SessionNotFoundError(session_id)
    await visibility.require_visible(store, state.outbound.principal, session_id)
    await state.table.wait_closed(session_id)  # a closing copy's last turn is saved first
    try:
        deleted = await store.delete_session(session_id)
    except Exception as exc:
        raise OperationFailed("Failed to delete session") from exc
    state.table.forget_reaped(session_id)
    if not deleted:
        raise SessionNotFoundError(session_id)
    logger.info("session %s deleted", session_id)
    return schema.EmptyResult()


async def _after_restore(
    state: ConnectionState,
    restoring: trio.Event,
    session_id: str,
    finish: Callable[[ConnectionState, Session], Awaitable[Payload]],
) -> Payload:
    await restoring.wait()
    return await finish(state, state.table.detach(session_id))  # -32000 if the restore failed


async def close(state: ConnectionState, session: Session) -> Payload:
    if session.turn is not None:
        session.turn.cancel()
    await state.table.finish_detached(session)
    return schema.EmptyResult()


async def stop(state: ConnectionState, session: Session) -> Payload:
    await state.table.finish_detached(session)  # stop waits for the turn; never cancels
    return schema.StopResult(session_id=session.session_id)


# ---------------------------------------------------------------------- session/update


async def inbound_update(state: ConnectionState, request: schema.InboundUpdateParams) -> Payload:
    session = state.table.live(request.session_id)
    session.touch()
    return schema.InboundUpdateResult(session_id=request.session_id, type=request.event_type)
