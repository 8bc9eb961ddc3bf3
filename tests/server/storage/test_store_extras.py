"""What both store backends keep beside a session's history: extra jail roots, config
option choices and the shared spending ledger (storage/contract.py), read back the same."""

from __future__ import annotations

from acp_server.storage import SessionBackend, SpendEntry
from tests.server.store_backends import Backend, backend, store

__all__ = ["backend", "store"]  # the fixtures, parametrized over both backends


def _spend(day: str, agent: str, cost: float, session_id: str = "s-1") -> SpendEntry:
    return SpendEntry(
        day=day,
        agent_alias=agent,
        session_id=session_id,
        model="gpt-test",
        input_tokens=10,
        output_tokens=5,
        cost_usd=cost,
        created_at=f"{day}T12:00:00+00:00",
    )


def test_roots_and_choices_survive_reopening(store: SessionBackend, backend: Backend) -> None:
    store.create_session("s-1", "default", "/w")
    assert store.additional_dirs("s-1") == ()
    assert store.config_choices("s-1") == {}
    assert store.set_additional_dirs("s-1", ["/extra/one", "/extra/two"])
    assert store.set_config_choices("s-1", {"mode": "readonly", "model": "openai.fast"})
    assert not store.set_additional_dirs("unknown", ["/x"])
    assert not store.set_config_choices("unknown", {"mode": "full"})
    reopened = backend.open()
    try:
        assert reopened.additional_dirs("s-1") == ("/extra/one", "/extra/two")
        assert reopened.config_choices("s-1") == {"mode": "readonly", "model": "openai.fast"}
        assert reopened.set_additional_dirs("s-1", [])  # an empty list clears them
        assert reopened.additional_dirs("s-1") == ()
    finally:
        reopened.close()


def test_the_ledger_sums_by_day_month_and_agent(store: SessionBackend) -> None:
    store.record_spend(_spend("2026-12-01", "default", 0.25))
    store.record_spend(_spend("2026-12-02", "default", 0.5))
    store.record_spend(_spend("2026-12-02", "reviewer\0", 1.0, session_id="s\0-2"))
    store.record_spend(_spend("2026-11-30", "default", 4.0))  # last month
    totals = store.spend_totals("2026-12-02", "default")
    assert (totals.day_usd, totals.month_usd, totals.agent_day_usd) == (1.5, 1.75, 0.5)
    rows = store.spend_summary("2026-12-01")
    assert [(row.day, row.agent_alias, row.calls, row.cost_usd) for row in rows] == [
        ("2026-12-02", "default", 1, 0.5),
        ("2026-12-02", "reviewer\0", 1, 1.0),
        ("2026-12-01", "default", 1, 0.25),
    ]
    assert (rows[0].input_tokens, rows[0].output_tokens) == (10, 5)
