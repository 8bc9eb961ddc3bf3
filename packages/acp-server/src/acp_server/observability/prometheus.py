"""``PrometheusMetrics``: the gateway's metrics, kept in prometheus_client's collectors.

Each instance has its own ``CollectorRegistry`` (never the library's global one), so two
gateways in one process, or the tests, never share a series. ``exposition`` renders the
Prometheus text format that ``GET /metrics`` answers (gateway/metrics_routes.py).

The metric names, their labels and what each counts are listed in docs/deployment.md
("Metrics"); docs/grafana-dashboard.json reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from acp_server.observability.metrics import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    PAIRING_FAILURE_REASONS,
    TRANSPORT_HTTP,
    TRANSPORT_WEBSOCKET,
    Metrics,
)

NAMESPACE: Final = "zeroclaw"
TURN_SECONDS_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""A turn runs from a fraction of a second (a short answer) to minutes (many tool rounds)."""
MODEL_CALL_SECONDS_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
STORE_COMMIT_SECONDS_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
"""A local SQLite commit takes about a millisecond, a shared PostgreSQL one a few more."""
OTHER_PAIRING_FAILURE: Final = "other"


class PrometheusMetrics(Metrics):
    """The gateway's metrics (see the module docstring).

    Args:
        live_sessions: how many sessions this process holds in memory, read at scrape
            time (so the hot path never updates it).
    """

    enabled = True

    def __init__(self, *, live_sessions: Callable[[], int] = lambda: 0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self._connections_open = Gauge(
            "connections_open", "ACP client connections being served, by transport",
            ["transport"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._connections = Counter(
            "connections", "ACP client connections accepted, by transport",
            ["transport"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        for transport in (TRANSPORT_WEBSOCKET, TRANSPORT_HTTP):
            self._connections_open.labels(transport)
            self._connections.labels(transport)
        self._sessions = Gauge(
            "sessions_live", "Sessions held in memory by this process",
            namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._sessions.set_function(lambda: float(live_sessions()))
        self._turns = Counter(
            "turns", "Prompt turns answered, by agent and outcome (the stopReason, or error)",
            ["agent", "outcome"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._turn_seconds = Histogram(
            "turn_duration_seconds", "Time from a prompt's admission to its answer, by agent",
            ["agent"], namespace=NAMESPACE, registry=registry, buckets=TURN_SECONDS_BUCKETS,
        )  # fmt: skip
        self._model_seconds = Histogram(
            "model_call_duration_seconds",
            "Time a model call's stream took, by provider and outcome",
            ["provider", "outcome"], namespace=NAMESPACE, registry=registry,
            buckets=MODEL_CALL_SECONDS_BUCKETS,
        )  # fmt: skip
        self._tokens = Counter(
            "model_tokens", "Tokens the model calls used, by agent and direction (input, output)",
            ["agent", "direction"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._cost = Counter(
            "model_cost_usd", "What the model calls cost in USD (priced or provider-reported)",
            ["agent"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._permissions = Counter(
            "permission_requests", "Permission requests the client answered, by outcome",
            ["outcome"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._refusals = Counter(
            "sandbox_refusals", "Tool calls the sandbox's rules refused, by reason",
            ["reason"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._store_seconds = Histogram(
            "store_commit_duration_seconds", "Time to commit a turn to the session store",
            ["outcome"], namespace=NAMESPACE, registry=registry,
            buckets=STORE_COMMIT_SECONDS_BUCKETS,
        )  # fmt: skip
        self._pairing_failures = Counter(
            "pairing_failures", "POST /pair attempts refused, by reason",
            ["reason"], namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        for reason in (*PAIRING_FAILURE_REASONS.values(), OTHER_PAIRING_FAILURE):
            self._pairing_failures.labels(reason)
        self._revocations = Counter(
            "token_revocations", "Paired tokens revoked by the operator",
            namespace=NAMESPACE, registry=registry,
        )  # fmt: skip

    def connection_opened(self, transport: str) -> None:
        self._connections.labels(transport).inc()
        self._connections_open.labels(transport).inc()

    def connection_closed(self, transport: str) -> None:
        self._connections_open.labels(transport).dec()

    def turn_finished(self, agent: str, outcome: str, seconds: float) -> None:
        self._turns.labels(agent, outcome).inc()
        self._turn_seconds.labels(agent).observe(seconds)

    def model_call(self, provider: str, outcome: str, started: float) -> None:
        self._model_seconds.labels(provider, outcome).observe(trio.current_time() - started)

    def model_used(
        self, agent: str, input_tokens: int, output_tokens: int, cost_usd: float
    ) -> None:
        if input_tokens > 0:
            self._tokens.labels(agent, INPUT_TOKENS).inc(input_tokens)
        if output_tokens > 0:
            self._tokens.labels(agent, OUTPUT_TOKENS).inc(output_tokens)
        if cost_usd > 0:
            self._cost.labels(agent).inc(cost_usd)

    def permission_answered(self, outcome: str) -> None:
        self._permissions.labels(outcome).inc()

    def tool_refused(self, reason: str) -> None:
        self._refusals.labels(reason).inc()

    def store_committed(self, outcome: str, seconds: float) -> None:
        self._store_seconds.labels(outcome).observe(seconds)

    def pairing_failed(self, status: int) -> None:
        reason = PAIRING_FAILURE_REASONS.get(status, OTHER_PAIRING_FAILURE)
        self._pairing_failures.labels(reason).inc()

    def tokens_revoked(self, count: int) -> None:
        if count > 0:
            self._revocations.inc(count)

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format of every series, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
