"""docs/grafana-dashboard.json reads only what the gateway exports: every metric a panel's
query names is one ``PrometheusMetrics`` serves, with the labels the query groups and
filters by, and every metric the gateway serves is on some panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from acp_server.observability.metrics import TRANSPORT_WEBSOCKET
from acp_server.observability.prometheus import PrometheusMetrics

DASHBOARD: Final = Path(__file__).parents[3] / "docs" / "grafana-dashboard.json"
METRIC_NAME: Final = re.compile(r"\bzeroclaw_[a-z_]+\b")
GROUPING: Final = re.compile(r"\bby \(([^)]*)\)")
SELECTOR: Final = re.compile(r"(zeroclaw_[a-z_]+)\{([^}]*)\}")
MATCHER: Final = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
ADDED_BY_PROMETHEUS: Final = frozenset({"job", "instance"})
"""Target labels Prometheus adds to every series it scrapes."""


def _exported() -> dict[str, set[str]]:
    """Every sample name the gateway's metrics serve, with its label names, once each
    kind of event has been recorded."""
    metrics = PrometheusMetrics(live_sessions=lambda: 1)
    metrics.connection_opened(TRANSPORT_WEBSOCKET)
    metrics.turn_finished("echo", "end_turn", 0.5)
    trio.run(_one_model_call, metrics)  # timed on trio's clock
    metrics.model_used("echo", 10, 20, 0.01)
    metrics.permission_answered("allow_once")
    metrics.tool_refused("policy")
    metrics.store_committed("ok", 0.002)
    metrics.pairing_failed(403)
    metrics.tokens_revoked(1)
    body, _content_type = metrics.exposition()
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


async def _one_model_call(metrics: PrometheusMetrics) -> None:
    metrics.model_call("echo.default", "ok", trio.current_time())


def _targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    document = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def test_every_query_names_metrics_the_gateway_exports(dashboard: dict[str, Any]) -> None:
    exported = _exported()
    for title, expr in _targets(dashboard):
        named = METRIC_NAME.findall(expr)
        assert named, (title, expr)
        unknown = [name for name in named if name not in exported]
        assert unknown == [], (title, expr)


def test_every_query_groups_and_filters_by_labels_its_metrics_have(
    dashboard: dict[str, Any],
) -> None:
    exported = _exported()
    for title, expr in _targets(dashboard):
        labels = set().union(*(exported[name] for name in METRIC_NAME.findall(expr)))
        known = labels | ADDED_BY_PROMETHEUS
        for grouping in GROUPING.findall(expr):
            grouped = {label.strip() for label in grouping.split(",")}
            assert grouped <= known, (title, expr, grouped - known)
        for name, matchers in SELECTOR.findall(expr):
            filtered = set(MATCHER.findall(matchers))
            assert filtered <= exported[name] | ADDED_BY_PROMETHEUS, (title, expr)


def test_every_exported_metric_is_on_a_panel(dashboard: dict[str, Any]) -> None:
    shown = {name for _title, expr in _targets(dashboard) for name in METRIC_NAME.findall(expr)}
    families = {re.sub(r"_(bucket|count|sum|total|created)$", "", name) for name in _exported()}
    missing = [family for family in families if not any(name.startswith(family) for name in shown)]
    assert missing == []


def test_the_dashboard_is_importable(dashboard: dict[str, Any]) -> None:
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    variables = {variable["name"] for variable in dashboard["templating"]["list"]}
    for panel in panels:
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, panel["title"]
        assert panel["type"] in {"stat", "timeseries"}, panel["title"]
        assert panel["datasource"]["uid"].strip("${}") in variables
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"]))
            assert used <= variables, (panel["title"], used - variables)
    assert isinstance(dashboard["schemaVersion"], int)
    assert dashboard["uid"]
