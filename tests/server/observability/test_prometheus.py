"""``PrometheusMetrics``: a registry of its own, bounded labels, and the no-op default."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from acp_server.observability.metrics import NO_METRICS, TRANSPORT_WEBSOCKET
from acp_server.observability.prometheus import PrometheusMetrics


def _samples(metrics: PrometheusMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _content_type = metrics.exposition()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_two_instances_never_share_a_series() -> None:
    first, second = PrometheusMetrics(), PrometheusMetrics()
    first.connection_opened(TRANSPORT_WEBSOCKET)
    first.turn_finished("echo", "end_turn", 0.2)
    key = ("zeroclaw_connections_total", (("transport", "websocket"),))
    assert _samples(first)[key] == 1
    assert _samples(second)[key] == 0
    assert ("zeroclaw_turns_total", (("agent", "echo"), ("outcome", "end_turn"))) not in (
        _samples(second)
    )


def test_live_sessions_are_read_when_scraped() -> None:
    held = [1, 2, 3]
    metrics = PrometheusMetrics(live_sessions=lambda: len(held))
    assert _samples(metrics)[("zeroclaw_sessions_live", ())] == 3
    held.clear()
    assert _samples(metrics)[("zeroclaw_sessions_live", ())] == 0


def test_pairing_failures_are_named_by_their_status() -> None:
    metrics = PrometheusMetrics()
    for status in (400, 403, 403, 429, 500):
        metrics.pairing_failed(status)
    samples = _samples(metrics)
    counts = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "zeroclaw_pairing_failures_total"
    }
    assert counts == {"no_code": 1, "wrong_code": 2, "throttled": 1, "other": 1}


def test_the_default_records_nothing_and_holds_no_state() -> None:
    NO_METRICS.connection_opened(TRANSPORT_WEBSOCKET)
    NO_METRICS.turn_finished("echo", "end_turn", 1.0)
    with NO_METRICS.timed_store_commit():
        pass
    assert not NO_METRICS.enabled
    assert not hasattr(NO_METRICS, "__dict__") or vars(NO_METRICS) == {}
