"""What ``session/load`` sends before it answers: the restored session's history as
``session/update`` notifications, then its title (acp_server/protocol/presentation/replay.py builds them)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import trio

from acp_core import methods, schema
from acp_server.agent.runtime.session import Session
from acp_server.agent.tools.registry import definition_of
from acp_server.model import ChatMessage
from acp_server.protocol.presentation.delivered import embed_delivered_file
from acp_server.protocol.presentation.replay import history_updates
from acp_server.protocol.services.session_table import SessionTable
from acp_server.storage import StoredSession

if TYPE_CHECKING:
    from acp_server.protocol.outbound import Outbound


async def send_restored(
    outbound: Outbound,
    table: SessionTable,
    session: Session,
    stored: StoredSession,
    history: Sequence[ChatMessage],
    *,
    replay: bool,
) -> None:
    """What session/load sends before answering: its history, then its title. A
    session/resume sends no session/update (ACP: resume does not replay).

    A session/close or session/stop served meanwhile (it is in the table already)
    ends the replay: once the close is answered, nothing more of that session follows.
    """
    session_id = session.session_id
    send_update = outbound.send_update
    if stored.dropped_messages:
        # The store kept only the newest whole turns; say so before anything else
        # (as ZeroClaw does: `_zeroclaw/history_trimmed`, on load and on resume).
        notice = schema.HistoryTrimmedParams(
            session_id=session_id,
            dropped_messages=stored.dropped_messages,
            kept_turns=stored.kept_turns,
            reason="stored history exceeds the restore limit; oldest turns omitted",
        )
        await outbound.send_notification(methods.HISTORY_TRIMMED, notice)
    if replay:
        # Delivered files are embedded again as the client saw them live: re-read and
        # re-hashed from uploads/, in a worker thread (replay.py bounds the total).
        embed = partial(embed_delivered_file, session.workspace / "uploads")
        # Each call is titled by its session's own tool (a skill's tool by its command).
        tools = session.tools
        updates = await trio.to_thread.run_sync(
            partial(
                history_updates,
                history,
                embed=embed,
                definitions=lambda name: definition_of(tools.get(name), name),
            )
        )
        for update in updates:
            if not table.is_current(session):
                return
            await send_update(session_id, update)
        if session.title is not None and table.is_current(session):
            await send_update(session_id, schema.SessionInfoUpdate(title=session.title))
