"""The spending caps: pricing, the ledger in the session store, the check before every
model call (a fake UTC clock), and ``zeroclaw cost``."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.limits.spend import CachedLedger, CostMeter, MemoryLedger, next_month
from acp_server.agent.providers.base import StreamEnd, TextDelta, UsageReported
from acp_server.cli.main import cli
from acp_server.config import load_config
from acp_server.config.values import CostConfig, ModelPrice
from acp_server.errors import BudgetExceeded
from acp_server.model import Usage
from acp_server.storage import AsyncSessionStore, SpendEntry
from acp_server.storage.sqlite import SessionStore
from tests.helpers import echo_config, session_dir, write_config
from tests.server.server_harness import ScriptedProvider, open_server

PRICED = CostConfig(
    daily_limit_usd=1.0,
    monthly_limit_usd=5.0,
    rates={("openai", "gpt-x"): ModelPrice(input_per_mtok=2.0, output_per_mtok=10.0)},
)


class Clock:
    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment


def meter(ledger: Any, clock: Clock, **options: Any) -> CostMeter:
    settings: dict[str, Any] = {
        "cost": PRICED,
        "ledger": ledger,
        "session_id": "s-1",
        "agent_alias": "coder",
        "runtime_profile": "default",
        "agent_cap_cents": None,
        "provider_type": "openai",
        "model": "gpt-x",
        "now": clock,
        **options,
    }
    return CostMeter(**settings)


def test_prices_come_from_rates_then_the_provider_then_zero_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(datetime(2026, 3, 1, tzinfo=UTC))
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    assert meter(MemoryLedger(), clock).price(usage, 99.0) == pytest.approx(3.0)
    unpriced = meter(MemoryLedger(), clock, model="other-model")
    assert unpriced.price(usage, 0.25) == 0.25
    with caplog.at_level(logging.WARNING):
        assert unpriced.price(usage, None) == 0.0
        assert unpriced.price(usage, None) == 0.0
    warnings = [r.getMessage() for r in caplog.records if "no price" in r.getMessage()]
    assert len(warnings) == 1
    assert 'cost.rates.providers.models.openai."other-model"' in warnings[0]


async def test_daily_cap_fails_the_next_call_until_the_next_utc_day() -> None:
    ledger = MemoryLedger()
    clock = Clock(datetime(2026, 3, 1, 23, 0, tzinfo=UTC))
    session = meter(ledger, clock)
    await session.check()
    await session.record(Usage(input_tokens=500_000), None)  # $1.00
    with pytest.raises(BudgetExceeded) as caught:
        await session.check()
    message = str(caught.value)
    assert message.startswith("Agent turn failed: Budget exceeded: $1.0000 of $1.00 daily limit")
    assert "[cost] daily_limit_usd" in message
    assert "resets at 2026-03-02 00:00 UTC" in message
    clock.moment = datetime(2026, 3, 2, 0, 0, 1, tzinfo=UTC)
    await session.check()


async def test_monthly_cap_and_the_agents_own_cap() -> None:
    ledger = MemoryLedger()
    clock = Clock(datetime(2026, 12, 1, tzinfo=UTC))
    for day in range(1, 6):
        clock.moment = datetime(2026, 12, day, tzinfo=UTC)
        await meter(ledger, clock).record(Usage(input_tokens=500_000), None)
    with pytest.raises(BudgetExceeded, match=r"monthly limit .*resets at 2027-01-01"):
        await meter(ledger, Clock(datetime(2026, 12, 6, tzinfo=UTC))).check()
    capped = meter(
        MemoryLedger(),
        clock,
        cost=CostConfig(enabled=False, rates=PRICED.rates),
        agent_cap_cents=50,
    )
    await capped.record(Usage(input_tokens=250_000), None)  # $0.50
    with pytest.raises(BudgetExceeded) as caught:
        await capped.check()
    assert (
        "daily limit of agent `coder` ([runtime_profiles.default] max_cost_per_day_cents = 50)"
        in (str(caught.value))
    )
    other_agent = meter(capped.ledger, clock, agent_alias="writer", agent_cap_cents=50)
    await other_agent.check()


async def test_a_principals_cap_holds_that_principal_only() -> None:
    ledger = MemoryLedger()
    clock = Clock(datetime(2026, 3, 1, tzinfo=UTC))
    capped = CostConfig(
        enabled=False,
        rates=PRICED.rates,
        per_principal_daily_cents=50,
        principal_daily_cents={"ci-runner": 200},
    )
    alice = meter(ledger, clock, cost=capped, principal="alice")
    await alice.record(Usage(input_tokens=250_000), None)  # $0.50
    with pytest.raises(BudgetExceeded) as caught:
        await alice.check()
    assert "daily limit of principal `alice`" in str(caught.value)
    assert [entry.principal for entry in ledger.entries] == ["alice"]
    await meter(ledger, clock, cost=capped, principal="bob").check()
    runner = meter(ledger, clock, cost=capped, principal="ci-runner")
    await runner.record(Usage(input_tokens=500_000), None)  # $1.00 of its own $2.00
    await runner.check()
    await meter(ledger, clock, cost=capped).check()  # the local operator has no such cap


def test_principal_caps_are_read_from_the_cost_table(tmp_path: Path) -> None:
    document = echo_config()
    document["cost"] = {
        "per_principal_daily_cents": 300,
        "principals": {"ci-runner": {"max_cost_per_day_cents": 1000}},
    }
    config = load_config(write_config(tmp_path / "cfg", document))
    assert config.cost.principal_cap_cents("alice") == 300
    assert config.cost.principal_cap_cents("ci-runner") == 1000
    assert config.cost.principal_cap_cents(None) is None
    assert CostConfig().principal_cap_cents("alice") is None


async def test_nothing_is_checked_or_recorded_when_tracking_is_off() -> None:
    ledger = MemoryLedger()
    off = meter(ledger, Clock(datetime(2026, 1, 1, tzinfo=UTC)), cost=CostConfig(enabled=False))
    await off.record(Usage(input_tokens=10**9), 100.0)
    assert ledger.entries == []


@given(st.dates())
def test_next_month_is_the_first_of_the_following_month(day: Any) -> None:
    following = next_month(day) if day.year < 9999 or day.month < 12 else None
    if following is not None:
        assert following.day == 1
        assert (following.year * 12 + following.month) - (day.year * 12 + day.month) == 1


def entry(day: str, agent: str, usd: float) -> SpendEntry:
    return SpendEntry(day, agent, "s-1", "gpt-x", 100, 10, usd, f"{day}T12:00:00+00:00")


def test_store_ledger_totals_and_summary(tmp_path: Path) -> None:
    store = SessionStore.open(tmp_path / "s.db")
    try:
        for item in (
            entry("2026-02-28", "coder", 4.0),
            entry("2026-03-01", "coder", 1.0),
            entry("2026-03-01", "writer", 0.5),
            entry("2026-03-02", "coder", 0.25),
        ):
            store.record_spend(item)
        totals = store.spend_totals("2026-03-01", "coder")
        assert (totals.day_usd, totals.month_usd, totals.agent_day_usd) == (1.5, 1.75, 1.0)
        summary = store.spend_summary("2026-03-01")
        assert [(row.day, row.agent_alias, row.cost_usd) for row in summary] == [
            ("2026-03-02", "coder", 0.25),
            ("2026-03-01", "coder", 1.0),
            ("2026-03-01", "writer", 0.5),
        ]
    finally:
        store.close()


async def test_a_turn_over_the_cap_fails_with_the_message_and_the_ledger_is_shared(
    tmp_path: Path,
) -> None:
    document = echo_config()
    document["cost"] = {
        "daily_limit_usd": 0.5,
        "rates": {"providers": {"models": {"echo": {"scripted": {"input_per_mtok": 1e6}}}}},
    }
    config = load_config(write_config(tmp_path / "cfg", document), environ={})
    usage = Usage(input_tokens=1)  # $1 at that price
    provider = ScriptedProvider([[TextDelta("hi"), UsageReported(usage), StreamEnd()]])
    store = AsyncSessionStore(SessionStore.open(tmp_path / "store.db"))
    try:
        async with open_server(config, provider=provider, store=store) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            assert (await client.result("session/prompt", prompt))["stopReason"] == "end_turn"
            failed = await client.call("session/prompt", prompt)
        assert failed["error"]["code"] == -32603
        assert "Budget exceeded: $1.0000 of $0.50 daily limit" in failed["error"]["message"]
        assert len(provider.requests) == 1  # the second turn never reached the model
        summary = await store.spend_summary("2000-01-01")
        assert [(row.agent_alias, row.calls, row.cost_usd) for row in summary] == [("echo", 1, 1.0)]
    finally:
        await store.aclose()


def test_cost_command_shows_spend_per_day_and_agent(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    today = datetime.now(UTC).date().isoformat()
    store = SessionStore.open(config_dir / "data" / "sessions" / "acp-sessions.db")
    store.record_spend(entry(today, "coder", 0.125))
    store.close()
    runner = CliRunner()
    shown = runner.invoke(cli, ["--config-dir", str(config_dir), "cost"])
    assert shown.exit_code == 0, shown.output
    assert f"{today}  coder  (operator)  1      100    10      0.1250" in shown.output
    assert f"Today ({today} UTC): $0.1250 of $10.00; this month: $0.1250 of $100.00" in (
        shown.output
    )
    as_json = json.loads(
        runner.invoke(cli, ["--config-dir", str(config_dir), "cost", "--json"]).output
    )
    assert as_json["days"][0]["costUsd"] == 0.125
    assert as_json["dailyLimitUsd"] == 10.0
    empty = runner.invoke(cli, ["--config-dir", str(tmp_path / "none"), "cost"])
    assert "No priced model calls in the last 30 days." in empty.output


class CountingLedger(MemoryLedger):
    """A ledger shared with another process: ``reads`` counts the totals it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def spend_totals(self, day: str, agent_alias: str, principal: str | None = None) -> Any:
        self.reads += 1
        return await super().spend_totals(day, agent_alias, principal)


def spend(day: str, agent: str, usd: float) -> SpendEntry:
    return SpendEntry(day, agent, "s-1", "gpt-x", 1, 1, usd, f"{day}T00:00:00+00:00")


async def test_cached_totals_follow_own_spends_and_see_other_processes_after_the_interval() -> None:
    shared = CountingLedger()
    clock = [100.0]
    cached = CachedLedger(shared, lambda: clock[0], refresh_secs=1.0)
    assert (await cached.spend_totals("2026-03-02", "coder")).day_usd == 0
    await cached.record_spend(spend("2026-03-02", "coder", 0.25))
    await cached.record_spend(spend("2026-03-02", "writer", 0.5))
    await cached.record_spend(spend("2026-03-01", "coder", 1.0))
    totals = await cached.spend_totals("2026-03-02", "coder")
    assert (totals.day_usd, totals.month_usd, totals.agent_day_usd) == (0.75, 1.75, 0.25)
    assert shared.reads == 1  # this process's spends were added without reading again
    await shared.record_spend(spend("2026-03-02", "coder", 2.0))  # another process
    clock[0] += 0.5
    assert (await cached.spend_totals("2026-03-02", "coder")).agent_day_usd == 0.25
    clock[0] += 0.5
    assert (await cached.spend_totals("2026-03-02", "coder")).agent_day_usd == 2.25
    assert shared.reads == 2
    assert (await cached.spend_totals("2026-03-03", "coder")).month_usd == 3.75  # a new day
    assert (await cached.spend_totals("2026-03-02", "writer")).agent_day_usd == 0.5
    assert shared.reads == 4


async def test_a_read_that_overlaps_a_spend_is_not_kept() -> None:
    class SlowLedger(CountingLedger):
        async def spend_totals(
            self, day: str, agent_alias: str, principal: str | None = None
        ) -> Any:
            totals = await super().spend_totals(day, agent_alias, principal)
            await cached.record_spend(spend(day, agent_alias, 1.0))  # lands mid-read
            return totals

    shared = SlowLedger()
    cached = CachedLedger(shared, lambda: 0.0)
    assert (await cached.spend_totals("2026-03-02", "coder")).day_usd == 0
    shared.spend_totals = CountingLedger.spend_totals.__get__(shared)  # type: ignore[method-assign]
    assert (await cached.spend_totals("2026-03-02", "coder")).day_usd == 1.0
    assert shared.reads == 2


async def test_a_read_behind_a_running_write_is_not_kept() -> None:
    release = trio.Event()

    class SlowWrites(CountingLedger):
        async def record_spend(self, entry: SpendEntry) -> None:
            await super().record_spend(entry)  # in the ledger, not yet seen by the cache
            await release.wait()

    shared = SlowWrites()
    cached = CachedLedger(shared, lambda: 0.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cached.record_spend, spend("2026-03-02", "coder", 1.0))
        await trio.testing.wait_all_tasks_blocked()
        assert (await cached.spend_totals("2026-03-02", "coder")).day_usd == 1.0
        release.set()
    # The write's own update is not added on top of a read that already held it.
    assert (await cached.spend_totals("2026-03-02", "coder")).day_usd == 1.0
    assert shared.reads == 2
