"""One live copy per session: the process's registry, and the store's fencing epoch.

A session is live in at most one place (docs/persistence.md, "One live copy per session").

* Within a process, ``LiveSessions`` names the connection (its ``SessionTable``,
  services/session_table.py) that holds each session id. A ``session/load`` or
  ``session/resume`` on another connection takes the id over: the holder's copy is
  detached with close semantics (its running turn cancelled, its last answered turn
  saved, since a turn is committed before it is answered) and only then is the store read.
* Across processes sharing one store, the session row's fencing epoch does the same: a
  restore claims the session (``claim_session`` bumps the epoch, and a claim always wins,
  so a holder that died never blocks anyone), every turn commit carries the epoch its copy
  holds, and a commit of an older epoch writes nothing (``SessionFenced``). A prompt checks
  the epoch before its turn starts, so a copy claimed elsewhere learns it at its next
  request rather than after a model call.

* Across replicas on one PostgreSQL store, each live session also holds a lock there
  (services/replica_leases.py): a restore claims the session through the lock keeper,
  which tells the replica holding it, and that replica detaches its copy at once, through
  the same ``surrender`` an in-process takeover uses.

Either way the detached copy's client is answered ``SessionTakenOver`` for that session
until it loads it again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import trio

from acp_core.errors import SessionNotFoundError
from acp_server.errors import OperationFailed, SessionFenced, SessionTakenOver, StoreError
from acp_server.storage import CREATOR_EPOCH as CREATOR_EPOCH

if TYPE_CHECKING:
    from acp_server.agent.runtime.session import Session
    from acp_server.protocol.services.session_table import SessionTable
    from acp_server.storage import AsyncSessionStore, StoredSession

logger = logging.getLogger(__name__)


class SessionLocks(Protocol):
    """Where a process's live sessions are also locked for other processes to see
    (services/replica_leases.py ``ReplicaLeases``)."""

    def changed(self, session_id: str) -> None:
        """The process now holds ``session_id``, or no longer does (``LiveSessions``)."""

    async def acquire(self, session_id: str) -> int | None:
        """Claim the session for this process (its new fencing epoch; None: not stored),
        taking it from whichever process held it. Raises ``SessionFenced`` when another
        process claimed it again meanwhile, ``StoreError`` when the store failed."""


class LiveSessions:
    """Which connection's session table holds each live (or opening, or closing) session
    id of this process. Only the trio thread touches it."""

    def __init__(self) -> None:
        self._holders: dict[str, SessionTable] = {}
        self.locks: SessionLocks | None = None
        """Set while the process locks its live sessions in a shared store."""

    def __len__(self) -> int:
        return len(self._holders)

    def holder(self, session_id: str) -> SessionTable | None:
        return self._holders.get(session_id)

    def holds(self, session_id: str, table: SessionTable) -> bool:
        return self._holders.get(session_id) is table

    def claim(self, session_id: str, table: SessionTable) -> SessionTable | None:
        """``table`` holds ``session_id`` from now on; returns the table that held it
        before (None when none did, or it was ``table`` itself)."""
        previous = self._holders.get(session_id)
        self._holders[session_id] = table
        if previous is None and self.locks is not None:
            self.locks.changed(session_id)
        return previous if previous is not table else None

    def release(self, session_id: str, table: SessionTable) -> None:
        """``table`` lets ``session_id`` go (nothing happens if another table holds it)."""
        if self._holders.get(session_id) is table:
            del self._holders[session_id]
            if self.locks is not None:
                self.locks.changed(session_id)


async def claim_and_load(
    table: SessionTable, store: AsyncSessionStore, session_id: str
) -> tuple[int, StoredSession]:
    """A restore's reads: take the id over in this process (a copy on another connection
    is detached and its last turn saved), wait for a copy this connection is closing,
    claim the session in the store, and only then read it. Returns the epoch the restored
    copy holds, and the stored session.

    With shared session locks the claim goes through them, so the replica holding the
    session detaches its copy before this one reads it.

    Raises:
        SessionNotFoundError: no such session in the store.
        SessionTakenOver: a restore on another connection took the id meanwhile.
        OperationFailed: the store could not be written or read.
    """
    await table.take_over(session_id)
    await table.wait_closed(session_id)  # the closed copy's last turn is saved
    locks = table.live_sessions.locks
    try:
        if locks is not None:
            epoch = await locks.acquire(session_id)
        else:
            epoch = await store.claim_session(session_id)
        stored = await store.load_session(session_id) if epoch is not None else None
    except SessionFenced:
        table.mark_taken_over(session_id)  # claimed again elsewhere before this load read it
        raise SessionTakenOver(session_id) from None
    except Exception as exc:
        raise OperationFailed("Failed to load session") from exc
    if epoch is None or stored is None:
        raise SessionNotFoundError(session_id)
    table.check_claim(session_id)  # no restore elsewhere took it meanwhile
    return epoch, stored


async def read_to_fork(
    table: SessionTable, store: AsyncSessionStore, session_id: str
) -> StoredSession:
    """A fork's read of its source, whole: nothing is claimed (the source stays where it is
    live, its epoch and history untouched); a copy this connection is closing has saved
    its last turn first. Unknown ids fail exactly as a restore's do.

    Raises:
        SessionNotFoundError: no such session in the store.
        OperationFailed: the store could not be read.
    """
    await table.wait_closed(session_id)
    try:
        stored = await store.load_session(session_id, max_messages=None)
    except Exception as exc:
        raise OperationFailed("Failed to load session") from exc
    if stored is None:
        raise SessionNotFoundError(session_id)
    return stored


async def check_still_held(
    table: SessionTable, store: AsyncSessionStore | None, session: Session
) -> None:
    """At a prompt's start: the session is still held at this copy's epoch in the store.

    Raises:
        SessionTakenOver: it was claimed elsewhere; the copy has left ``table``.
    """
    if store is None or session.epoch is None:
        return
    try:
        current = await store.current_epoch(session.session_id)
    except StoreError as exc:
        # The turn's commit checks the epoch again; a store that cannot be read now is
        # reported there, as for any turn.
        logger.warning("could not check who holds session %s: %s", session.session_id, exc)
        return
    if current is not None and current != session.epoch:
        table.fence(session)
        logger.info("session %s is open elsewhere (epoch %s)", session.session_id, current)
        raise SessionTakenOver(session.session_id)


def fenced_turn(table: SessionTable, session: Session) -> SessionTakenOver:
    """The store refused a turn's commit (the session was claimed elsewhere during the
    turn): the copy leaves ``table``; returns the error the prompt is answered with."""
    table.fence(session)
    logger.warning("session %s: turn not saved, the session is open elsewhere", session.session_id)
    return SessionTakenOver(session.session_id, turn_unsaved=True)


async def check_reaped_owner(
    table: SessionTable, store: AsyncSessionStore, session_id: str, opening: trio.Event
) -> None:
    """Before a prompt restores a session the idle reaper dropped: if it was claimed
    elsewhere since, it is not taken back; the prompt is answered as taken over (and the
    restore marked by ``opening`` ends here)."""
    epoch = table.reaped_epochs.get(session_id)
    if epoch is None:
        return
    try:
        current = await store.current_epoch(session_id)
    except StoreError:
        return  # the restore reports a store that cannot be read
    if current is None or current == epoch:
        return
    table.forget_reaped(session_id)
    table.mark_taken_over(session_id)
    table.end_opening(session_id, opening)
    raise SessionTakenOver(session_id)
