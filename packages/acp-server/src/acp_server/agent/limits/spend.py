"""Spending caps: the global ``[cost]`` daily and monthly limits, the runtime profile's
``max_cost_per_day_cents`` per agent and the gateway principal's daily cap
(``[cost] per_principal_daily_cents``, ``[cost.principals.<name>]``), over UTC days and
months.

Before every model call the session's ``CostMeter`` reads the ledger's totals (the session
store's ``acp_spend`` table, shared by every process using that store, through a
``CachedLedger``; without a store, this process's memory) and fails the turn with
``BudgetExceeded`` once a cap is reached. After
a call its cost is added: tokens times the ``[cost.rates…]`` price of the model, else the
cost the provider reported (OpenRouter's ``usage.cost``), else nothing, with one warning
per model, so an unpriced model never trips a cap. A ledger that cannot be read or written
is logged and the turn goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Final, Protocol

import msgspec

from acp_server.config.values import ECHO_PROVIDER_TYPE, CostConfig
from acp_server.errors import BudgetExceeded
from acp_server.model import Usage
from acp_server.observability.metrics import NO_METRICS, Metrics
from acp_server.storage import SpendEntry, SpendTotals, StoreError

logger = logging.getLogger(__name__)

TOKENS_PER_PRICE_UNIT: Final = 1_000_000
"""Prices are USD per million tokens (ZeroClaw's ``*_per_mtok``)."""
_warned_unpriced: set[tuple[str, str]] = set()


class SpendLedger(Protocol):
    """Where spend is recorded: ``AsyncSessionStore`` or ``MemoryLedger``."""

    async def record_spend(self, entry: SpendEntry) -> None: ...

    async def spend_totals(
        self, day: str, agent_alias: str, principal: str | None = None
    ) -> SpendTotals: ...


@dataclass
class MemoryLedger:
    """The ledger of a process without a session store (it ends with the process)."""

    entries: list[SpendEntry] = field(default_factory=list)

    async def record_spend(self, entry: SpendEntry) -> None:
        self.entries.append(entry)

    async def spend_totals(
        self, day: str, agent_alias: str, principal: str | None = None
    ) -> SpendTotals:
        month = [entry for entry in self.entries if entry.day[:7] == day[:7]]
        today = [entry for entry in month if entry.day == day]
        by_principal = [e for e in today if principal is not None and e.principal == principal]
        return SpendTotals(
            day_usd=sum(entry.cost_usd for entry in today),
            month_usd=sum(entry.cost_usd for entry in month),
            agent_day_usd=sum(e.cost_usd for e in today if e.agent_alias == agent_alias),
            principal_day_usd=sum(e.cost_usd for e in by_principal),
        )


SPEND_REFRESH_SECS: Final = 1.0
"""How long ``CachedLedger`` trusts totals it read from the store: spends of this process
are added as they are recorded, those of other processes sharing the store are seen at
the next read, at most this many seconds later."""


class _CachedTotals(msgspec.Struct):
    totals: SpendTotals
    read_at: float


class CachedLedger:
    """A store's ledger with its totals kept in memory, so a model call's cap check does not
    read the store each time: the totals of an agent and UTC day are read once, kept up to
    date with this process's own spends, and read again after ``SPEND_REFRESH_SECS``.

    ``clock`` returns seconds on a monotonic scale (trio's clock in a session)."""

    def __init__(
        self,
        ledger: SpendLedger,
        clock: Callable[[], float],
        refresh_secs: float = SPEND_REFRESH_SECS,
    ) -> None:
        self.ledger = ledger
        self._clock = clock
        self._refresh_secs = refresh_secs
        self._cached: dict[tuple[str, str, str | None], _CachedTotals] = {}
        # A read that overlapped a write may or may not hold its spend: it is not kept.
        self._writes_started = 0
        self._writes_running = 0

    async def record_spend(self, entry: SpendEntry) -> None:
        self._writes_started += 1
        self._writes_running += 1
        try:
            await self.ledger.record_spend(entry)
        finally:
            self._writes_running -= 1
        usd = entry.cost_usd
        for (day, agent_alias, principal), cached in self._cached.items():
            if day[:7] != entry.day[:7]:
                continue
            totals = cached.totals
            same_day = day == entry.day
            same_principal = principal is not None and principal == entry.principal
            cached.totals = SpendTotals(
                day_usd=totals.day_usd + usd if same_day else totals.day_usd,
                month_usd=totals.month_usd + usd,
                agent_day_usd=totals.agent_day_usd + usd
                if same_day and agent_alias == entry.agent_alias
                else totals.agent_day_usd,
                principal_day_usd=totals.principal_day_usd + usd
                if same_day and same_principal
                else totals.principal_day_usd,
            )

    async def spend_totals(
        self, day: str, agent_alias: str, principal: str | None = None
    ) -> SpendTotals:
        key = (day, agent_alias, principal)
        now = self._clock()
        cached = self._cached.get(key)
        if cached is not None and now - cached.read_at < self._refresh_secs:
            return cached.totals
        started = self._writes_started
        overlapped = self._writes_running > 0
        totals = await self.ledger.spend_totals(day, agent_alias, principal)
        if not overlapped and started == self._writes_started:
            if cached is None:  # a new day: the other days' totals are of no more use
                self._cached = {k: v for k, v in self._cached.items() if k[0] >= day}
            self._cached[key] = _CachedTotals(totals, now)
        return totals


def utc_now() -> datetime:
    return datetime.now(UTC)


def next_day(day: date) -> date:
    return day + timedelta(days=1)


def next_month(day: date) -> date:
    return date(day.year + 1, 1, 1) if day.month == 12 else date(day.year, day.month + 1, 1)


def budget_message(spent: float, limit: float, cap: str, resets: date) -> str:
    """ZeroClaw's wording, plus which cap it is and when it resets."""
    return (
        f"Agent turn failed: Budget exceeded: ${spent:.4f} of ${limit:.2f} {cap}. Cannot make "
        f"further API calls until the budget resets at {resets.isoformat()} 00:00 UTC."
    )


def check_daily_cents(
    spent_usd: float, cents: int | None, cap: Callable[[int], str], today: date
) -> None:
    """Raise ``BudgetExceeded`` when ``spent_usd`` today reached a cap of ``cents`` (None: no
    cap); ``cap`` names it, worded only when it is reached."""
    if cents is not None and spent_usd >= cents / 100:
        raise BudgetExceeded(budget_message(spent_usd, cents / 100, cap(cents), next_day(today)))


class CostMeter(msgspec.Struct):
    """One session's view of the caps (``check``) and of what its calls cost (``record``)."""

    cost: CostConfig
    ledger: SpendLedger
    session_id: str
    agent_alias: str
    runtime_profile: str
    agent_cap_cents: int | None
    provider_type: str
    model: str
    now: Callable[[], datetime] = utc_now
    metrics: Metrics = NO_METRICS
    principal: str | None = None
    """The gateway principal the session's calls are made for (None: the local operator)."""

    @property
    def principal_cap_cents(self) -> int | None:
        return self.cost.principal_cap_cents(self.principal)

    @property
    def active(self) -> bool:
        return (
            self.cost.enabled
            or self.agent_cap_cents is not None
            or self.principal_cap_cents is not None
        )

    async def check(self) -> None:
        """Raise ``BudgetExceeded`` when a cap is reached (before a model call)."""
        if not self.active:
            return
        today = self.now().astimezone(UTC).date()
        try:
            totals = await self.ledger.spend_totals(
                today.isoformat(), self.agent_alias, self.principal
            )
        except StoreError as exc:
            logger.warning("session %s: spend not checked: %s", self.session_id, exc)
            return
        # Compared first, worded only when one is reached: most checks pass.
        cost = self.cost
        if cost.enabled:
            if totals.day_usd >= cost.daily_limit_usd:
                raise BudgetExceeded(
                    budget_message(totals.day_usd, cost.daily_limit_usd,
                                   "daily limit ([cost] daily_limit_usd)", next_day(today))
                )  # fmt: skip
            if totals.month_usd >= cost.monthly_limit_usd:
                raise BudgetExceeded(
                    budget_message(totals.month_usd, cost.monthly_limit_usd,
                                   "monthly limit ([cost] monthly_limit_usd)", next_month(today))
                )  # fmt: skip
        check_daily_cents(
            totals.agent_day_usd,
            self.agent_cap_cents,
            lambda cents: (
                f"daily limit of agent `{self.agent_alias}` ([runtime_profiles."
                f"{self.runtime_profile}] max_cost_per_day_cents = {cents})"
            ),
            today,
        )
        check_daily_cents(
            totals.principal_day_usd,
            self.principal_cap_cents,
            lambda cents: (
                f"daily limit of principal `{self.principal}` ([cost] "
                f"per_principal_daily_cents or [cost.principals.{self.principal}]: {cents} cents)"
            ),
            today,
        )

    def price(self, usage: Usage, reported_usd: float | None) -> float:
        """What a call with ``usage`` cost, in USD (see the module docstring)."""
        rate = self.cost.rates.get((self.provider_type, self.model))
        if rate is not None:
            return (
                usage.input_tokens * rate.input_per_mtok
                + usage.output_tokens * rate.output_per_mtok
            ) / TOKENS_PER_PRICE_UNIT
        if reported_usd is not None:
            return max(0.0, reported_usd)
        key = (self.provider_type, self.model)
        priceable = usage.total_tokens and self.provider_type != ECHO_PROVIDER_TYPE
        if priceable and key not in _warned_unpriced:
            _warned_unpriced.add(key)
            logger.warning(
                "no price for model %s of provider type %s and the provider reports no "
                "cost: its calls count as $0 against the spending caps (add "
                '[cost.rates.providers.models.%s."%s"])',
                self.model,
                self.provider_type,
                self.provider_type,
                self.model,
            )
        return 0.0

    async def record(self, usage: Usage, reported_usd: float | None) -> None:
        """Add one finished model call to the ledger (priced calls only) and count what it
        used in the metrics (without caps, only a cost the provider reports is known)."""
        usd = self.price(usage, reported_usd) if self.active else max(0.0, reported_usd or 0.0)
        self.metrics.model_used(self.agent_alias, usage.input_tokens, usage.output_tokens, usd)
        if not self.active or usd <= 0:
            return
        moment = self.now().astimezone(UTC)
        entry = SpendEntry(
            day=moment.date().isoformat(),
            agent_alias=self.agent_alias,
            session_id=self.session_id,
            model=self.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usd,
            created_at=moment.isoformat(timespec="seconds"),
            principal=self.principal,
        )
        try:
            await self.ledger.record_spend(entry)
        except StoreError as exc:
            logger.warning("session %s: spend not recorded: %s", self.session_id, exc)
