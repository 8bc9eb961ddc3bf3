"""Notifications a method sends right after its reply.

A handler may answer with ``ReplyThen(result, after)``: the connection writes ``result``
as the reply, then awaits ``after()`` in the same task, so what ``after`` sends follows
the reply on the wire. A session announces its slash commands this way after
``session/new``, ``session/load`` and ``session/resume`` (ACP
``available_commands_update``, sent even when the list is empty).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from acp_server.protocol.presentation.commands import commands_update

if TYPE_CHECKING:
    from acp_server.agent.runtime.session import Session
    from acp_server.protocol.services.connection_state import ConnectionState


class ReplyThen(msgspec.Struct, frozen=True):
    """A reply and what to send after it (never encoded itself)."""

    result: Any
    after: Callable[[], Awaitable[None]]


def with_commands(state: ConnectionState, result: Any, session: Session) -> ReplyThen:
    """``result``, followed by the session's ``available_commands_update``."""

    async def announce() -> None:
        if state.table.get(session.session_id) is not session:
            return  # closed (or replaced) before its reply went out
        commands = session.commands.changed(always=True)
        if commands is not None:
            await state.outbound.send_update(session.session_id, commands_update(commands))

    return ReplyThen(result, announce)
