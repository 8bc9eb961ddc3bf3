"""The session table of one connection: live sessions, ids being opened, ids being closed.

Each id's state (``SessionState``, services/session_state.py) is read with ``state_of``,
and every move the table makes is first checked against that module's ``TRANSITIONS``:

* ``IDLE`` / ``PROMPTING``: in ``sessions``, serving prompts (one turn at a time);
* ``RESERVED``: being created or restored (it counts towards ``max_sessions``, as in
  ZeroClaw's implementation, and a second ``session/load`` of it is refused as already active);
* ``OPENING``: for the whole of a ``session/load`` or ``session/resume`` (restore and
  replay): a close or stop of it that arrives meanwhile waits for the restore to end, then
  closes what it opened, so a close pipelined right behind a load is not lost;
* ``CLOSING``: detached by ``session/close`` or ``session/stop`` while its last turn is
  still ending; a ``session/load`` of it waits for that turn to be saved first;
* ``REAPED`` / ``TAKEN_OVER``: gone, and remembered why.

What the table holds for these (the events a close or a restore waits on, the epoch a
reaped id was held at) stays beside the state. The two notes of why an id left, reaped and
taken over, outlast a restore in progress: a second prompt for a reaped id that is being
restored is refused as already active, as the first restore's own checks refuse it, and a
request for a taken-over id being restored again is still told it was taken over.

Every table of a process shares one ``LiveSessions`` registry (protocol/services/ownership.py): a
table holds an id there from the start of its restore (or its ``session/new``) until the
copy has left it and its last turn is saved, and another table that restores the id takes
it over through ``surrender``. An id taken over stays ``taken_over`` here, so a request
for it is told why it is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from acp_core.errors import (
    InvalidParamsError,
    SessionBusyError,
    SessionLimitError,
    SessionNotFoundError,
)
from acp_server.agent.runtime.session import Session, Turn
from acp_server.errors import SessionTakenOver
from acp_server.protocol.services.ownership import LiveSessions
from acp_server.protocol.services.session_state import (
    ACTIVE_STATES,
    LIVE_STATES,
    SessionEvent,
    SessionState,
    next_state,
)

logger = logging.getLogger(__name__)


class SessionTable:
    def __init__(self, max_sessions: int, live: LiveSessions | None = None) -> None:
        self.max_sessions = max_sessions
        self.live_sessions = live if live is not None else LiveSessions()
        self.taken_over: set[str] = set()
        """Ids a restore elsewhere took from this table (and nothing opened again since)."""
        self.reaped_epochs: dict[str, int | None] = {}
        """The fencing epoch each reaped id was held at when it was dropped."""
        self.sessions: dict[str, Session] = {}
        self._reserved: set[str] = set()
        self._closing: dict[str, trio.Event] = {}
        self._opening: dict[str, trio.Event] = {}
        self.reaped: set[str] = set()
        """Ids ``reap_idle`` dropped and nothing opened again since: a prompt for one
        restores it from the store."""

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self.sessions.values()))

    def get(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    def state_of(self, session_id: str) -> SessionState:
        """Where ``session_id`` is on this connection; when two things are under way at
        once, the first in session_state.py's order."""
        session = self.sessions.get(session_id)
        if session is not None:
            return SessionState.IDLE if session.turn is None else SessionState.PROMPTING
        if session_id in self._reserved:
            return SessionState.RESERVED
        if session_id in self._opening:
            return SessionState.OPENING
        if session_id in self._closing:
            return SessionState.CLOSING
        if session_id in self.taken_over:
            return SessionState.TAKEN_OVER
        if session_id in self.reaped:
            return SessionState.REAPED
        return SessionState.CLOSED

    def _move(self, session_id: str, event: SessionEvent) -> None:
        """Check that ``event`` may happen to ``session_id`` now (``SessionStateError``
        if ``TRANSITIONS`` has no such move); the caller then makes it."""
        next_state(session_id, self.state_of(session_id), event)

    def live(self, session_id: str) -> Session:
        """The live session, or -32000."""
        if self.state_of(session_id) in LIVE_STATES:
            return self.sessions[session_id]
        if self.was_taken_over(session_id):
            raise SessionTakenOver(session_id)
        raise SessionNotFoundError(session_id)

    def start_turn(self, session: Session) -> Turn:
        """Reserve the live ``session``'s one turn (-32002 while one runs)."""
        if self.state_of(session.session_id) is SessionState.PROMPTING:
            raise SessionBusyError(session.session_id)
        self._move(session.session_id, SessionEvent.PROMPT)
        return session.start_turn()

    def check_not_prompting(self, session_id: str) -> None:
        """-32000 for an id that is not live, -32002 for one whose turn is running."""
        self.live(session_id)
        if self.state_of(session_id) is SessionState.PROMPTING:
            raise SessionBusyError(session_id)

    def check_capacity(self) -> None:
        if len(self.sessions) + len(self._reserved) >= self.max_sessions:
            raise SessionLimitError(self.max_sessions)

    def check_not_active(self, session_id: str) -> None:
        if self.state_of(session_id) in ACTIVE_STATES:
            raise InvalidParamsError(
                f"Session already active: {session_id}. Call session/close first."
            )

    @contextmanager
    def reserving(self, session_id: str) -> Iterator[None]:
        """Hold ``session_id``'s slot while it is being opened (released on the way out;
        ``add`` it before leaving to keep it)."""
        restoring = self.state_of(session_id) is SessionState.OPENING
        self._move(session_id, SessionEvent.RESERVE if restoring else SessionEvent.CREATE)
        self._reserved.add(session_id)
        try:
            yield
        finally:
            self._reserved.discard(session_id)
            self.release_claim(session_id)

    def begin_opening(self, session_id: str) -> trio.Event:
        """Mark ``session_id`` as being restored (see the module doc) until ``end_opening``."""
        self._move(session_id, SessionEvent.BEGIN_RESTORE)
        done = trio.Event()
        self._opening[session_id] = done
        return done

    def end_opening(self, session_id: str, done: trio.Event) -> None:
        if self._opening.get(session_id) is done:
            del self._opening[session_id]
        done.set()

    def restore_in_progress(self, session_id: str) -> trio.Event | None:
        """The event set when the restore of ``session_id`` ends, if one is running and the
        session is not live yet."""
        if self.state_of(session_id) in LIVE_STATES:
            return None
        return self._opening.get(session_id)

    def add(self, session: Session) -> None:
        session_id = session.session_id
        self._move(session_id, SessionEvent.GO_LIVE)
        self.sessions[session_id] = session
        self.reaped.discard(session_id)
        self.reaped_epochs.pop(session_id, None)
        self.taken_over.discard(session_id)
        self.live_sessions.claim(session_id, self)

    def remove_if_current(self, session: Session) -> bool:
        """Drop ``session`` if it is still the live copy of its id."""
        if self.sessions.get(session.session_id) is session:
            del self.sessions[session.session_id]
            self.live_sessions.release(session.session_id, self)
            return True
        return False

    async def take_over(self, session_id: str) -> None:
        """Hold ``session_id`` in the process's registry from now on (a restore of it has
        begun here); a copy another table holds is detached and its last turn saved before
        this returns (``surrender``).

        Raises:
            SessionTakenOver: a restore on yet another table took the id meanwhile.
        """
        previous = self.live_sessions.claim(session_id, self)
        if previous is not None:
            await previous.surrender(session_id)
            self.check_claim(session_id)

    def check_claim(self, session_id: str) -> None:
        """The restore of ``session_id`` running here still holds it in the registry (if
        not, the id answers as taken over from now on)."""
        if not self.live_sessions.holds(session_id, self):
            self.mark_taken_over(session_id)
            raise SessionTakenOver(session_id)

    def mark_taken_over(self, session_id: str) -> None:
        """A restore of ``session_id`` running here lost it to one elsewhere: requests for
        it are told so until it is opened here again."""
        self._move(session_id, SessionEvent.TAKE_OVER)
        self.taken_over.add(session_id)

    def was_taken_over(self, session_id: str) -> bool:
        return session_id in self.taken_over

    def was_reaped(self, session_id: str) -> bool:
        """The idle reaper dropped ``session_id`` and nothing opened it again since (a
        prompt for it restores it)."""
        return session_id in self.reaped

    def forget_reaped(self, session_id: str) -> None:
        """A prompt for ``session_id`` no longer restores it (it left the store, or was
        claimed elsewhere since it was reaped)."""
        self.reaped.discard(session_id)
        self.reaped_epochs.pop(session_id, None)

    def release_claim(self, session_id: str) -> None:
        """A restore of ``session_id`` ended without making it live: let the id go."""
        if session_id not in self.sessions and session_id not in self._closing:
            self.live_sessions.release(session_id, self)

    async def surrender(self, session_id: str) -> None:
        """Another table is taking ``session_id`` over: detach this table's copy with close
        semantics (its running turn cancelled), and return once its last turn is saved.
        A restore of it running here is waited for (it then finds it lost the id)."""
        while True:
            if self.state_of(session_id) in LIVE_STATES:
                session = self.sessions[session_id]
                self._move(session_id, SessionEvent.TAKE_OVER)
                self.detach(session_id)
                self.taken_over.add(session_id)
                if session.turn is not None:
                    session.turn.cancel()
                logger.info("session %s taken over by another connection", session_id)
                await self.finish_detached(session)
                return
            pending = self._closing.get(session_id) or self._opening.get(session_id)
            if pending is None:
                return
            await pending.wait()
            if pending is self._closing.get(session_id):
                return

    def fence(self, session: Session) -> None:
        """The store refused ``session``'s turn (claimed elsewhere): it leaves this table
        and its id answers as taken over."""
        if self.is_current(session):
            self._move(session.session_id, SessionEvent.TAKE_OVER)
            self.remove_if_current(session)
            self.taken_over.add(session.session_id)
            session.close()

    def release_all(self) -> None:
        """The connection has ended (every turn with it): let every id it held go."""
        for session_id in [*self.sessions, *self._closing, *self._opening]:
            self.live_sessions.release(session_id, self)

    def is_current(self, session: Session) -> bool:
        return self.sessions.get(session.session_id) is session

    def detach(self, session_id: str) -> Session:
        """Take a live session out of the table, in arrival order (close and stop)."""
        session = self.live(session_id)
        self._move(session_id, SessionEvent.DETACH)
        del self.sessions[session_id]
        if session.turn is not None:
            self._closing[session_id] = session.turn.done
        return session

    async def finish_detached(self, session: Session) -> None:
        """Wait for a detached session's turn to end, then let it go."""
        session_id = session.session_id
        try:
            if session.turn is not None:
                await session.turn.done.wait()
        finally:
            # The turn may have ended before this task ran; a set event is never needed again.
            closing = self._closing.get(session_id)
            if closing is not None and closing.is_set():
                del self._closing[session_id]
            if session_id not in self.sessions and session_id not in self._opening:
                self.live_sessions.release(session_id, self)
        session.close()

    async def wait_closed(self, session_id: str) -> None:
        """A copy of ``session_id`` that is closing has saved its last turn."""
        closing = self._closing.get(session_id)
        if closing is not None:
            await closing.wait()

    def reap_idle(self, now: float, idle_timeout: float) -> None:
        """Drop sessions with no turn and no activity for ``idle_timeout`` seconds."""
        for session_id, session in list(self.sessions.items()):
            if (
                self.state_of(session_id) is SessionState.IDLE
                and now - session.last_activity > idle_timeout
            ):
                self._move(session_id, SessionEvent.REAP)
                del self.sessions[session_id]
                self.live_sessions.release(session_id, self)
                self.reaped.add(session_id)
                self.reaped_epochs[session_id] = session.epoch
                session.close()
                logger.info("session %s idle for over %ss; dropped", session_id, idle_timeout)
