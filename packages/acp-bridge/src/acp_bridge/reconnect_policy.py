"""When and how soon the relay reconnects after losing its connection."""

from __future__ import annotations

import random
from typing import Final

from websockets.frames import CloseCode

RECONNECT_FIRST_DELAY_SECS: Final = 0.1
RECONNECT_MAX_DELAY_SECS: Final = 2.0
"""Backoff between attempts doubles from the first delay up to this, with jitter. It bounds
how long after a restarted gateway is back a bridge may still be waiting to try again; a
failed attempt against a gateway that is down costs one refused TCP connect."""
STABLE_CONNECTION_SECS: Final = 10.0
"""A connection that lasted this long resets the backoff and the give-up deadline."""

# Close codes after which reconnecting cannot help (1008 means "rejected, stop").
REJECTED_CLOSE_CODES: Final = frozenset({int(CloseCode.POLICY_VIOLATION)})
BROKEN_CLOSE_CODES: Final = frozenset(
    {
        int(CloseCode.PROTOCOL_ERROR),
        int(CloseCode.UNSUPPORTED_DATA),
        int(CloseCode.INVALID_DATA),
        int(CloseCode.MANDATORY_EXTENSION),
    }
)


def backoff(attempt: int) -> float:
    """Jittered exponential backoff: about 0.1, 0.2, 0.4 ... s, capped, times 0.5-1.0."""
    delay: float = min(RECONNECT_MAX_DELAY_SECS, RECONNECT_FIRST_DELAY_SECS * 2.0**attempt)
    return delay * random.uniform(0.5, 1.0)  # jitter, not cryptography


def may_reconnect(close_code: int | None, *, enabled: bool) -> bool:
    """Whether a connection closed with ``close_code`` (None: no close frame) is retried."""
    return (
        enabled and close_code not in REJECTED_CLOSE_CODES and close_code not in BROKEN_CLOSE_CODES
    )
