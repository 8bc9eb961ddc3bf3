"""``PrometheusMetrics``: the gateway's metrics, kept in prometheus_client's collectors.

Each instance has its own ``CollectorRegistry`` (never the library's global one), so two
gateways in one process, or the tests, never share a series. ``exposition`` renders the
Prometheus text format that ``GET /metrics`` answers (gateway/metrics_routes.py).

The metric names, their labels and what each counts are listed in docs/deployment.md
("Metrics"); docs/grafana-dashboard.json reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, TypeVar

import trio
from prometheus_client import (
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

M = TypeVar("M", Counter, Gauge, Histogram)
NAMESPACE: Final = "zeroclaw"
TURN_SECONDS_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
"""A turn runs from a fraction of a second (a short answer) to minutes (many tool rounds)."""
MODEL_CALL_SECONDS_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
STORE_COMMIT_SECONDS_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
"""A local SQLite commit takes about a millisecond, a shared PostgreSQL one a few more."""
OTHER_PAIRING_FAILURE: Final = "other"
EXPOSITION_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
"""The classic text format every Prometheus (2.x and 3.x) and most agents read; the series
here use only names that format allows, so the body is the same in its successor."""


class _Children(Generic[M]):
    """A labelled metric's children, each looked up once: ``labels()`` validates and locks
    on every call, several times the cost of the increment itself, and the hot path asks
    for the same few children every turn. The labels are bounded (observability/metrics.py),
    so this stays as small as the metric."""

    def __init__(self, metric: M) -> None:
        self._metric: M = metric
        self._cache: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._cache.get(values)
        if child is None:
            child = self._cache[values] = self._metric.labels(*values)
        return child


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
        self._connections_open = _Children(Gauge(
            "connections_open", "ACP client connections being served, by transport",
            ["transport"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        self._connections = _Children(Counter(
            "connections", "ACP client connections accepted, by transport",
            ["transport"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        for transport in (TRANSPORT_WEBSOCKET, TRANSPORT_HTTP):
            self._connections_open(transport)
            self._connections(transport)
        self._sessions = Gauge(
            "sessions_live", "Sessions held in memory by this process",
            namespace=NAMESPACE, registry=registry,
        )  # fmt: skip
        self._sessions.set_function(lambda: float(live_sessions()))
        self._turns = _Children(Counter(
            "turns", "Prompt turns answered, by agent and outcome (the stopReason, or error)",
            ["agent", "outcome"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        self._turn_seconds = _Children(Histogram(
            "turn_duration_seconds", "Time from a prompt's admission to its answer, by agent",
            ["agent"], namespace=NAMESPACE, registry=registry, buckets=TURN_SECONDS_BUCKETS,
        ))  # fmt: skip
        self._model_seconds = _Children(Histogram(
            "model_call_duration_seconds",
            "Time a model call's stream took, by provider and outcome",
            ["provider", "outcome"], namespace=NAMESPACE, registry=registry,
            buckets=MODEL_CALL_SECONDS_BUCKETS,
        ))  # fmt: skip
        self._tokens = _Children(Counter(
            "model_tokens", "Tokens the model calls used, by agent and direction (input, output)",
            ["agent", "direction"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        self._cost = _Children(Counter(
            "model_cost_usd", "What the model calls cost in USD (priced or provider-reported)",
            ["agent"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        self._permissions = _Children(Counter(
            "permission_requests", "Permission requests the client answered, by outcome",
            ["outcome"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        self._refusals = _Children(Counter(
            "sandbox_refusals", "Tool calls the sandbox's rules refused, by reason",
            ["reason"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        self._store_seconds = _Children(Histogram(
            "store_commit_duration_seconds", "Time to commit a turn to the session store",
            ["outcome"], namespace=NAMESPACE, registry=registry,
            buckets=STORE_COMMIT_SECONDS_BUCKETS,
        ))  # fmt: skip
        self._pairing_failures = _Children(Counter(
            "pairing_failures", "POST /pair attempts refused, by reason",
            ["reason"], namespace=NAMESPACE, registry=registry,
        ))  # fmt: skip
        for reason in (*PAIRING_FAILURE_REASONS.values(), OTHER_PAIRING_FAILURE):
            self._pairing_failures(reason)
        self._revocations = Counter(
            "token_revocations", "Paired tokens revoked by the operator",
            namespace=NAMESPACE, registry=registry,
        )  # fmt: skip

    def connection_opened(self, transport: str) -> None:
        self._connections(transport).inc()
        self._connections_open(transport).inc()

    def connection_closed(self, transport: str) -> None:
        self._connections_open(transport).dec()

    def turn_finished(self, agent: str, outcome: str, seconds: float) -> None:
        self._turns(agent, outcome).inc()
        self._turn_seconds(agent).observe(seconds)

    def model_call(self, provider: str, outcome: str, started: float) -> None:
        self._model_seconds(provider, outcome).observe(trio.current_time() - started)

    def model_used(
        self, agent: str, input_tokens: int, output_tokens: int, cost_usd: float
    ) -> None:
        if input_tokens > 0:
            self._tokens(agent, INPUT_TOKENS).inc(input_tokens)
        if output_tokens > 0:
            self._tokens(agent, OUTPUT_TOKENS).inc(output_tokens)
        if cost_usd > 0:
            self._cost(agent).inc(cost_usd)

    def permission_answered(self, outcome: str) -> None:
        self._permissions(outcome).inc()

    def tool_refused(self, reason: str) -> None:
        self._refusals(reason).inc()

    def store_committed(self, outcome: str, seconds: float) -> None:
        self._store_seconds(outcome).observe(seconds)

    def pairing_failed(self, status: int) -> None:
        reason = PAIRING_FAILURE_REASONS.get(status, OTHER_PAIRING_FAILURE)
        self._pairing_failures(reason).inc()

    def tokens_revoked(self, count: int) -> None:
        if count > 0:
            self._revocations.inc(count)

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format of every series, and its content type."""
        return generate_latest(self.registry), EXPOSITION_CONTENT_TYPE
