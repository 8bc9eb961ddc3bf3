"""The pairing rules: a one-time code exchanged for a bearer token, and the brute-force
limits around it, as pure values and one transition (no clock, no I/O).

A 6-digit code; a wrong code is answered 403, five wrong codes in a row lock pairing for
``DEFAULT_PAIR_LOCKOUT_SECS`` (429 with ``retry_after``), and attempts are capped per minute
(docs/gateway.md, "Pairing"). ``decide_attempt`` is the one
place these rules live: one gateway keeps the state in memory (gateway/pairing.py
``PairingGuard``), replicas sharing a PostgreSQL store keep it in one row that every attempt
takes ``FOR UPDATE`` (storage/postgres/tokens.py), both with the same transition.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, replace
from typing import Final

PAIRING_CODE_DIGITS: Final = 6
DEFAULT_MAX_PAIR_FAILURES: Final = 5
"""Wrong codes in a row before the lockout."""
DEFAULT_PAIR_LOCKOUT_SECS: Final = 300.0
RATE_WINDOW_SECS: Final = 60.0


def generate_pairing_code() -> str:
    """A uniformly random 6-digit code (leading zeros kept)."""
    return f"{secrets.randbelow(10**PAIRING_CODE_DIGITS):0{PAIRING_CODE_DIGITS}d}"


@dataclass(frozen=True, slots=True)
class PairAccepted:
    pass


@dataclass(frozen=True, slots=True)
class PairRejected:
    """``status`` is 400 (no code given), 403 (wrong or no active code) or 429 (throttled)."""

    status: int
    error: str
    retry_after: int | None = None


PairOutcome = PairAccepted | PairRejected


@dataclass(frozen=True, slots=True)
class PairingLimits:
    """How hard guessing is made: attempts per minute, wrong codes before the lockout."""

    rate_limit_per_minute: int
    max_failures: int = DEFAULT_MAX_PAIR_FAILURES
    lockout_secs: float = DEFAULT_PAIR_LOCKOUT_SECS

    @property
    def per_minute(self) -> int:
        return max(1, self.rate_limit_per_minute)


@dataclass(frozen=True, slots=True)
class PairingState:
    """The one-time code and the brute-force counters around it, as a value: one gateway
    keeps it in a ``PairingGuard``, replicas sharing a PostgreSQL store keep it in one row
    (storage/postgres/tokens.py). ``attempts`` holds the attempt times of the last minute."""

    code: str | None = None
    discoverable: bool = False
    failures: int = 0
    locked_until: float | None = None
    attempts: tuple[float, ...] = ()


def with_fresh_code(state: PairingState, *, discoverable: bool) -> PairingState:
    """``state`` with a new code in place of any previous one and no lockout."""
    return replace(
        state,
        code=generate_pairing_code(),
        discoverable=discoverable,
        failures=0,
        locked_until=None,
    )


def decide_attempt(
    state: PairingState, presented: str | None, *, now: float, limits: PairingLimits
) -> tuple[PairingState, PairOutcome]:
    """One ``POST /pair`` against ``state`` at time ``now``: the state after it, and the
    answer. A success consumes the code."""
    per_minute = limits.per_minute
    attempts = tuple(at for at in state.attempts if now - at < RATE_WINDOW_SECS)
    if len(attempts) >= per_minute:
        wait = RATE_WINDOW_SECS - (now - attempts[0])
        return replace(state, attempts=attempts), PairRejected(
            429,
            f"Too many pairing attempts; the limit is {per_minute} per minute",
            retry_after=_whole_seconds(wait),
        )
    state = replace(state, attempts=(*attempts, now)[-per_minute:])
    if state.locked_until is not None:
        if now < state.locked_until:
            return state, PairRejected(
                429,
                "Too many wrong pairing codes; try again later or ask the operator for a "
                "new code (zeroclaw gateway get-paircode --new)",
                retry_after=_whole_seconds(state.locked_until - now),
            )
        state = replace(state, locked_until=None, failures=0)
    if presented is None or not presented.strip():
        return state, PairRejected(400, "Missing X-Pairing-Code header")
    if state.code is None or not hmac.compare_digest(
        presented.strip().encode("utf-8"), state.code.encode("ascii")
    ):
        failures = state.failures + 1
        if failures >= limits.max_failures:
            return replace(
                state, failures=failures, locked_until=now + limits.lockout_secs
            ), PairRejected(
                429,
                f"Too many wrong pairing codes; locked for {int(limits.lockout_secs)} seconds",
                retry_after=_whole_seconds(limits.lockout_secs),
            )
        return replace(state, failures=failures), PairRejected(403, "Invalid pairing code")
    return replace(state, code=None, discoverable=False, failures=0), PairAccepted()


def _whole_seconds(seconds: float) -> int:
    return max(1, int(seconds + 0.999))
