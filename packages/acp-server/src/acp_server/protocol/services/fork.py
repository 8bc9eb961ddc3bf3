"""ACP ``session/fork`` (ACP's unstable schema, behind ``sessionCapabilities.fork``): a new
session that starts with a copy of another session's history.

The fork gets its own id and title ("<source title> (fork)"), the source's agent, plan,
extra roots (unless the request names its own ``additionalDirectories``) and config
choices (mode and model, re-checked against the configuration), and is stored at once,
history included, through the store contract, so either backend keeps it and it can be
listed, loaded and deleted like any session. The source is only read: its history, its
fencing epoch and a live copy of it stay as they were. The fork is live on the calling
connection, as a ``session/new`` session is.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from acp_core import schema
from acp_core.aliases import resolve_restore_alias
from acp_core.errors import SessionNotFoundError
from acp_server.agent.tools.mcp_servers import select_mcp_servers
from acp_server.errors import OperationFailed
from acp_server.model import ChatMessage, CompletedTurn, PlanStep
from acp_server.protocol.services import config_options as options
from acp_server.protocol.services import ownership, visibility
from acp_server.protocol.services.followups import ReplyThen, with_commands
from acp_server.protocol.services.lifecycle import build_session, opened_result
from acp_server.protocol.services.roots import (
    agent_risk_profile,
    attach_roots,
    canonical_roots,
    canonical_workspace,
    restored_roots,
)
from acp_server.storage import DEFAULT_MAX_RESTORED_MESSAGES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from acp_server.agent.runtime.session import Session
    from acp_server.protocol.services.connection_state import ConnectionState
    from acp_server.storage import AsyncSessionStore

logger = logging.getLogger(__name__)

FORK_TITLE_SUFFIX: Final = " (fork)"


def fork_title(title: str | None) -> str | None:
    """The fork's own title; an untitled source gives an untitled fork (its first prompt
    names it, as any session's)."""
    return f"{title}{FORK_TITLE_SUFFIX}" if title else None


def as_turns(
    messages: Sequence[ChatMessage], plan: tuple[PlanStep, ...] | None
) -> list[CompletedTurn]:
    """``messages`` cut into the turns the store keeps (each starts with a user message),
    the plan with the last, so the fork is trimmed by whole turns as its source is."""
    turns: list[list[ChatMessage]] = []
    for message in messages:
        if message.role == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    return [
        CompletedTurn(messages=tuple(turn), plan=plan if index == len(turns) - 1 else None)
        for index, turn in enumerate(turns)
    ]


def restored_window(turns: Sequence[CompletedTurn]) -> list[ChatMessage]:
    """The messages the live fork holds: its newest whole turns within
    ``DEFAULT_MAX_RESTORED_MESSAGES``, as a ``session/load`` of it would (the stored copy
    is whole)."""
    kept: list[CompletedTurn] = []
    count = 0
    for turn in reversed(turns):
        count += len(turn.messages)
        if kept and count > DEFAULT_MAX_RESTORED_MESSAGES:
            break
        kept.append(turn)
    return [message for turn in reversed(kept) for message in turn.messages]


async def fork_session(state: ConnectionState, params: schema.ForkParams) -> ReplyThen:
    """``session/fork``: the new session's result, shaped as ``session/new``'s.

    Raises:
        SessionNotFoundError: no store, or no such source session (as ``session/load``).
        InvalidParamsError: the ``cwd`` or an extra root may not be used.
        OperationFailed: the store could not read the source or write the fork.
    """
    store = state.app.store
    source_id = params.session_id
    if store is None:
        raise SessionNotFoundError(source_id)
    table, config, outbound = state.table, state.config, state.outbound
    table.check_capacity()
    # Another principal's session forks exactly as a missing one (services/visibility.py).
    await visibility.require_visible(store, outbound.principal, source_id)
    stored = await ownership.read_to_fork(table, store, source_id)
    choices = await options.stored_choices(store, source_id)
    alias = resolve_restore_alias(
        stored=stored.info.agent_alias,
        config_default=config.acp.default_agent,
        agents=state.agent_table(),
    )
    risk = agent_risk_profile(config, alias)
    if params.cwd is not None and params.cwd.strip():
        workspace = canonical_workspace(params.cwd, state.app.launch_dir, risk)
    else:
        workspace = Path(stored.info.workspace_dir)
    if params.additional_directories is not None:
        extra_roots = canonical_roots(params.additional_directories, workspace, risk)
    else:
        extra_roots = await restored_roots(store, source_id, None, workspace, risk)
    turns = as_turns(stored.messages, stored.plan)
    history = [message for message in restored_window(turns) if message.role != "system"]
    fork_id = str(uuid.uuid4())
    table.check_capacity()
    with table.reserving(fork_id):
        session = build_session(
            state,
            fork_id,
            alias,
            workspace,
            history,
            stored.plan,
            mcp_servers=select_mcp_servers(
                config.agents[alias], params.mcp_servers, remote=outbound.remote
            ),
        )
        attach_roots(session, extra_roots)
        session.title = fork_title(stored.info.title)
        options.apply_stored_choices(state.app, session, choices)
        try:
            await _store_fork(store, session, turns, extra_roots, outbound.principal)
        except BaseException:
            session.close()
            raise
        session.epoch = ownership.CREATOR_EPOCH
        table.add(session)
    logger.info("session %s forked from %s (%d messages)", fork_id, source_id, len(history))
    return with_commands(state, opened_result(config, session), session)


async def _store_fork(
    store: AsyncSessionStore,
    session: Session,
    turns: Sequence[CompletedTurn],
    extra_roots: Sequence[Path],
    principal: str | None,
) -> None:
    """Write the fork whole (owned by ``principal``, the forking connection's): the session, its copied history (one transaction), title,
    extra roots and choices. A failure part way removes what was written, so no
    half-copied fork is ever listed."""
    fork_id = session.session_id
    try:
        await store.create_session(
            fork_id, session.agent.alias, str(session.workspace), principal=principal
        )
    except Exception as exc:
        raise OperationFailed("Failed to persist the fork") from exc
    try:
        if turns:
            await store.append_history(fork_id, turns)
        if session.title is not None:
            await store.set_title(fork_id, session.title)
        if extra_roots:
            await store.set_additional_dirs(fork_id, [str(root) for root in extra_roots])
        await store.set_config_choices(fork_id, options.session_choices(session))
    except BaseException as exc:
        try:
            with trio.CancelScope(shield=True):  # removed even when the request is cancelled
                await store.delete_session(fork_id)
        except Exception as cleanup:
            logger.warning("could not remove the half-written fork %s: %s", fork_id, cleanup)
        if isinstance(exc, Exception):
            raise OperationFailed("Failed to persist the fork") from exc
        raise
