"""The metrics every layer records, as one-line calls on a ``Metrics`` object.

``Metrics`` itself records nothing: it is what `zeroclaw acp` uses (a stdio server has no
``/metrics`` to read, and importing prometheus_client would cost its start-up ~0.2 s) and
what a test gets unless it asks for more. The gateway swaps in ``PrometheusMetrics``
(observability/prometheus.py), which overrides each method.

Labels are bounded: an agent or provider is one of the configured aliases, an outcome one
of a few fixed words. No label ever carries a session id, a path, a principal's free text or
anything from a prompt, so the number of series does not grow with the sessions served.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import msgspec

TRANSPORT_WEBSOCKET: Final = "websocket"
TRANSPORT_HTTP: Final = "http"
"""The gateway's transports (the ``transport`` label of the connection metrics)."""

OUTCOME_ERROR: Final = "error"
OUTCOME_CANCELLED: Final = "cancelled"
OUTCOME_OK: Final = "ok"

INPUT_TOKENS: Final = "input"
OUTPUT_TOKENS: Final = "output"

REFUSED_BY_POLICY: Final = "policy"
"""The security policy refused the call before anyone was asked (a denied command or path)."""
REFUSED_BY_JAIL: Final = "jail"
"""The path jail refused it while the tool ran (a path outside the session's roots)."""


def ended_as(completed: bool) -> str:
    """A model call's outcome: "ok" when its stream reached its end, else "error" (the
    provider failed, or the turn was cancelled while it streamed)."""
    return OUTCOME_OK if completed else OUTCOME_ERROR


PAIRING_FAILURE_REASONS: Final = {400: "no_code", 403: "wrong_code", 429: "throttled"}


class Timing(msgspec.Struct):
    """A measured span; the caller names its outcome (``outcome``) before it ends."""

    outcome: str = OUTCOME_ERROR


class Metrics:
    """Records nothing (see the module docstring); ``PrometheusMetrics`` records."""

    enabled: bool = False

    def connection_opened(self, transport: str) -> None:
        """A client connection is being served over ``transport``."""

    def connection_closed(self, transport: str) -> None:
        """The connection ``connection_opened`` counted has ended."""

    def turn_finished(self, agent: str, outcome: str, seconds: float) -> None:
        """A prompt turn of ``agent`` answered ``outcome`` (a stopReason, or "error")."""

    def model_call(self, provider: str, outcome: str, started: float) -> None:
        """One model call (a round of a turn) to ``provider`` (its configured ref) ended
        just now with ``outcome``; ``started``: trio's clock when it was sent."""

    def model_used(
        self, agent: str, input_tokens: int, output_tokens: int, cost_usd: float
    ) -> None:
        """What one model call of ``agent`` used: tokens and USD (priced or reported)."""

    def permission_answered(self, outcome: str) -> None:
        """A permission request was answered: ``outcome`` is the verdict's kind
        (protocol/presentation/permissions.py: allow_once, allow_always, reject, reject_with_edit, or
        no_decision when it timed out or the answer was unclear)."""

    def tool_refused(self, reason: str) -> None:
        """A tool call was refused by the sandbox's rules (``REFUSED_BY_*``)."""

    def store_committed(self, outcome: str, seconds: float) -> None:
        """A turn was committed to the session store (or failed to be)."""

    def pairing_failed(self, status: int) -> None:
        """A ``POST /pair`` was refused with ``status``."""

    def tokens_revoked(self, count: int) -> None:
        """The operator revoked ``count`` paired tokens."""

    @contextmanager
    def timed_store_commit(self) -> Iterator[None]:
        """Measure one turn's commit; an escaping exception counts as "error"."""
        started = time.perf_counter()
        outcome = OUTCOME_ERROR
        try:
            yield
            outcome = OUTCOME_OK
        finally:
            if self.enabled:
                self.store_committed(outcome, time.perf_counter() - started)


NO_METRICS: Final = Metrics()
"""The shared do-nothing instance (it holds no state)."""
