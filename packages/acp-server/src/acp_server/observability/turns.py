"""A prompt turn as the operator sees it: its log lines tagged with the session and a turn
id, one "turn ended" line, and the turn metrics (observability/metrics.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from acp_server.observability.logs import log_context, new_turn_id
from acp_server.observability.metrics import (
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    Metrics,
    Timing,
)

logger = logging.getLogger("acp_server.turns")


@contextmanager
def observed_turn(metrics: Metrics, agent: str, session_id: str) -> Iterator[Timing]:
    """Run a turn inside this; the caller sets ``outcome`` (the stopReason) on the timing
    it gets. An exception that escapes counts as "error"; a cancellation from outside the
    turn (the connection going away) as "cancelled"."""
    timing = Timing()
    started = time.perf_counter()
    with log_context(session=session_id, turn=new_turn_id()):
        try:
            yield timing
        except Exception:
            timing.outcome = OUTCOME_ERROR
            raise
        except BaseException:
            timing.outcome = OUTCOME_CANCELLED
            raise
        finally:
            seconds = time.perf_counter() - started
            metrics.turn_finished(agent, timing.outcome, seconds)
            logger.info("turn ended: %s after %.3f s (agent %s)", timing.outcome, seconds, agent)
