"""The relay's phases and the one table of moves between them (see ``relay_state``).

As h11's ``_state.py`` does for HTTP/1.1 and wsproto's ``ConnectionState`` for RFC 6455:
the phases are an enum, every legal move is a row of ``TRANSITIONS``, and ``next_phase``
is the only way from one phase to another; a move the table does not list raises.

Phases (``RelayPhase``), one at a time::

    DISCONNECTED --opened--> REPLAYING --replay_over--> FLUSHING --held_sent--> READY
         ^                       |                          |                     |
         +--------closed---------+--------------------------+---------------------+
    any phase --end--> ENDED   (ENDED only absorbs late closes and further ends)

* DISCONNECTED: no connection (also before the first one). IDE messages are held.
* REPLAYING: a connection is open; the bridge re-establishes the IDE's context on it (the
  IDE's ``initialize``, then ``session/resume`` for each known session, one at a time,
  each answered before the next). IDE messages are still held.
* FLUSHING: the held messages go out, oldest first; new ones queue behind them.
* READY: IDE messages are sent as they come.
* ENDED: the relay is stopping; what is still owed is answered with an error.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final


class RelayPhase(enum.Enum):
    """Where the relay is in a connection's life (see the module docstring)."""

    #: No connection: IDE messages are held.
    DISCONNECTED = "disconnected"
    #: Open; the IDE's initialize and its sessions are being replayed. Messages are held.
    REPLAYING = "replaying"
    #: Open; the held messages are being sent, oldest first. New ones queue behind them.
    FLUSHING = "flushing"
    #: Open; IDE messages are sent as they come.
    READY = "ready"
    #: Stopping; nothing more is sent, and what is owed is answered with an error.
    ENDED = "ended"


class RelayEvent(enum.Enum):
    """What moves the relay from one phase to another."""

    OPENED = "a connection was opened"
    REPLAY_OVER = "the replay is over"
    HELD_SENT = "every held message was sent"
    CLOSED = "the connection closed"
    END = "the relay is ending"


_P = RelayPhase
_E = RelayEvent
TRANSITIONS: Final[Mapping[tuple[RelayPhase, RelayEvent], RelayPhase]] = {
    (_P.DISCONNECTED, _E.OPENED): _P.REPLAYING,
    (_P.REPLAYING, _E.REPLAY_OVER): _P.FLUSHING,
    (_P.FLUSHING, _E.HELD_SENT): _P.READY,
    # The gateway pump and the connection manager both report a loss: the second is a no-op.
    **{(phase, _E.CLOSED): _P.DISCONNECTED for phase in _P if phase is not _P.ENDED},
    **{(phase, _E.END): _P.ENDED for phase in _P},
    # The connection may still close after the relay decided to end.
    (_P.ENDED, _E.CLOSED): _P.ENDED,
}
"""Every legal move; anything else is a bug in the I/O side and raises."""


class RelayStateError(Exception):
    """An event that cannot happen in the current phase (the I/O side broke an invariant)."""


class Ending(enum.Enum):
    """Why the relay ended (the first reason given wins)."""

    STDIN_EOF = "stdin closed"
    CONNECTION_LOST = "connection lost"
    STDOUT_CLOSED = "stdout closed"
    SIGNALLED = "signal"
    FATAL = "fatal"


def next_phase(phase: RelayPhase, event: RelayEvent) -> RelayPhase:
    """The phase ``event`` leads to from ``phase``.

    Raises:
        RelayStateError: ``event`` cannot happen in ``phase``.
    """
    try:
        return TRANSITIONS[phase, event]
    except KeyError:
        raise RelayStateError(
            f"{event.value} cannot happen while the relay is {phase.value}"
        ) from None
