"""The states a session id goes through on one connection, and the one table of moves.

Rule 1 (as h11's ``_state.py`` has it): every legal move is in ``TRANSITIONS``; the session
table (services/session_table.py) asks ``next_state`` before it moves an id, and a move the
table does not list is a bug, refused with ``SessionStateError`` naming the id, the event
and the state. Rule 2: nothing here knows about JSON-RPC or the store; the errors a client
is answered with (-32000 unknown or taken over, -32002 busy, -32602 already active) stay
where they are raised today.

Theory of operation. A session id is, on one connection:

* ``CLOSED``: not here (never opened, or closed with its last turn saved);
* ``OPENING``: a restore was admitted (``session/load``, ``session/resume``, a prompt for
  a reaped session) and is checking who may see it; a close or stop of the id waits for it;
* ``RESERVED``: being built (``session/new``, ``session/fork``, or a restore past its
  checks); it holds one of ``max_sessions`` slots;
* ``IDLE`` / ``PROMPTING``: live, without or with its one running turn (a second prompt
  while ``PROMPTING`` is -32002);
* ``CLOSING``: detached by ``session/close`` or ``session/stop`` while its turn still runs;
  a restore of it waits for that turn to be saved;
* ``REAPED``: dropped by the idle reaper; a prompt for it restores it;
* ``TAKEN_OVER``: a restore elsewhere took it (another connection, replica or store
  claim); a request for it is told so.

``OPENING``, ``RESERVED``, ``IDLE`` and ``PROMPTING`` are active: a ``session/load`` of an
active id is refused. ``CLOSED``, ``REAPED`` and ``TAKEN_OVER`` are at rest, and a restore
may start from them or from ``CLOSING``.

The table derives an id's state from what it holds (``SessionTable.state_of``): the live
``Session`` (and whether it has a turn), the reservations, the restores and closes in
progress, and what it remembers of ids that left. Two of those can overlap for a moment
(a restore of an id whose older copy is still closing; a restore of a reaped or taken-over
id), and the state shown is then the first in the order ``PROMPTING``/``IDLE``,
``RESERVED``, ``OPENING``, ``CLOSING``, ``TAKEN_OVER``, ``REAPED``, ``CLOSED``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final


class SessionState(enum.Enum):
    """Where one session id is on one connection (see the module doc)."""

    #: Not on this connection.
    CLOSED = "closed"
    #: A restore admitted, before it holds a slot.
    OPENING = "opening"
    #: Being built; holds a ``max_sessions`` slot.
    RESERVED = "reserved"
    #: Live, no turn running.
    IDLE = "idle"
    #: Live, its one turn running.
    PROMPTING = "prompting"
    #: Detached by close or stop; its last turn still running.
    CLOSING = "closing"
    #: Dropped by the idle reaper; a prompt restores it.
    REAPED = "reaped"
    #: Taken by a restore elsewhere; requests for it are told so.
    TAKEN_OVER = "taken_over"


class SessionEvent(enum.Enum):
    """What moves a session id (the table method that applies it in brackets)."""

    #: session/new or session/fork reserves a fresh id (``reserving``).
    CREATE = "create"
    #: session/load, session/resume or a reaped id's prompt is admitted (``begin_opening``).
    BEGIN_RESTORE = "begin_restore"
    #: The restore may see the session: it reads and builds it under a slot (``reserving``).
    RESERVE = "reserve"
    #: The built session joins the table (``add``).
    GO_LIVE = "go_live"
    #: Creation or restore failed before the session went live (``reserving``, ``end_opening``).
    ABANDON = "abandon"
    #: A prompt reserves the session's turn (``start_turn``).
    PROMPT = "prompt"
    #: The turn ended: a live session is idle again, a closing one is gone (``finish_detached``).
    TURN_ENDS = "turn_ends"
    #: session/close, session/stop or session/delete takes it out of the table (``detach``).
    DETACH = "detach"
    #: Idle for longer than ``[acp] idle_session_timeout_secs`` (``reap_idle``).
    REAP = "reap"
    #: A restore elsewhere, or the store's fencing epoch, took it (``surrender``, ``fence``,
    #: ``check_claim``).
    TAKE_OVER = "take_over"


ACTIVE_STATES: Final = frozenset(
    {SessionState.OPENING, SessionState.RESERVED, SessionState.IDLE, SessionState.PROMPTING}
)
"""A ``session/load`` or ``session/resume`` of an id in one of these is refused (-32602)."""
LIVE_STATES: Final = frozenset({SessionState.IDLE, SessionState.PROMPTING})
"""The id has a ``Session`` in the table."""
RESTING_STATES: Final = frozenset(
    {SessionState.CLOSED, SessionState.REAPED, SessionState.TAKEN_OVER}
)
"""Nothing of the id runs here; a restore may start."""

_S = SessionState
TRANSITIONS: Final[Mapping[SessionEvent, Mapping[SessionState, SessionState]]] = {
    SessionEvent.CREATE: {_S.CLOSED: _S.RESERVED},
    SessionEvent.BEGIN_RESTORE: {
        _S.CLOSED: _S.OPENING,
        _S.REAPED: _S.OPENING,
        _S.TAKEN_OVER: _S.OPENING,
        _S.CLOSING: _S.OPENING,  # the restore waits for the older copy's last turn
    },
    SessionEvent.RESERVE: {_S.OPENING: _S.RESERVED},
    SessionEvent.GO_LIVE: {_S.RESERVED: _S.IDLE},
    SessionEvent.ABANDON: {_S.OPENING: _S.CLOSED, _S.RESERVED: _S.CLOSED},
    SessionEvent.PROMPT: {_S.IDLE: _S.PROMPTING},
    SessionEvent.TURN_ENDS: {_S.PROMPTING: _S.IDLE, _S.CLOSING: _S.CLOSED},
    SessionEvent.DETACH: {_S.IDLE: _S.CLOSED, _S.PROMPTING: _S.CLOSING},
    SessionEvent.REAP: {_S.IDLE: _S.REAPED},
    SessionEvent.TAKE_OVER: {
        _S.OPENING: _S.TAKEN_OVER,
        _S.RESERVED: _S.TAKEN_OVER,
        _S.IDLE: _S.TAKEN_OVER,
        _S.PROMPTING: _S.TAKEN_OVER,  # its turn is cancelled; its last turn is saved
        _S.CLOSING: _S.TAKEN_OVER,
    },
}
"""event -> {state it may happen in: state it leads to}. Nothing else may happen."""
del _S


class SessionStateError(RuntimeError):
    """A move ``TRANSITIONS`` does not allow: a bug in the table or its callers, never a
    client's mistake (the client's errors are checked before any move)."""

    def __init__(self, session_id: str, event: SessionEvent, state: SessionState) -> None:
        super().__init__(
            f"session {session_id}: {event.value} cannot happen while it is {state.value}"
            f" (allowed while {allowed_states(event)})"
        )
        self.session_id = session_id
        self.event = event
        self.state = state


def allowed_states(event: SessionEvent) -> str:
    """The states ``event`` may happen in, for messages."""
    return ", ".join(state.value for state in TRANSITIONS[event])


def next_state(session_id: str, state: SessionState, event: SessionEvent) -> SessionState:
    """The state ``event`` moves ``session_id`` to from ``state``.

    Raises:
        SessionStateError: ``TRANSITIONS`` has no such move.
    """
    moves = TRANSITIONS[event]
    try:
        return moves[state]
    except KeyError:
        raise SessionStateError(session_id, event, state) from None
