"""``AcpApp``: the process-wide state every connection of one `zeroclaw acp` or `zeroclaw
gateway` process shares.

The composition root (acp_server/app.py, ``open_app``) builds it once per process; stdio
and the gateway serve every connection over it. Tests build one directly with their own
factories.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import trio

from acp_server.agent.limits.actions import PrincipalBudgets
from acp_server.agent.limits.spend import (
    CachedLedger,
    CostMeter,
    MemoryLedger,
    SpendLedger,
    utc_now,
)
from acp_server.agent.providers import ProviderFactory, create_provider
from acp_server.agent.runtime.factory import PolicyFactory, ToolsFactory, default_tools_factory
from acp_server.config import AgentConfig, Config, ProviderConfig, RuntimeProfileConfig
from acp_server.observability.metrics import NO_METRICS, Metrics
from acp_server.protocol.services.ownership import LiveSessions
from acp_server.security import SecurityPolicy
from acp_server.storage import AsyncSessionStore


@dataclass
class AcpApp:
    """Process-wide state: the configuration and the (optional) session store.

    The factories are seams for tests and for the gateway; production uses the defaults.
    """

    config: Config
    store: AsyncSessionStore | None
    provider_factory: ProviderFactory = create_provider
    tools_factory: ToolsFactory = default_tools_factory
    policy_factory: PolicyFactory = SecurityPolicy
    launch_dir: Path = field(default_factory=Path.cwd)
    utc_clock: Callable[[], datetime] = utc_now
    """The time the spending caps' UTC days are read from."""
    memory_ledger: MemoryLedger = field(default_factory=MemoryLedger)
    """The spending ledger when there is no session store."""
    _store_ledger: CachedLedger | None = field(default=None, init=False, repr=False)
    _principal_actions: PrincipalBudgets | None = field(default=None, init=False, repr=False)

    @property
    def principal_actions(self) -> PrincipalBudgets:
        """Each gateway principal's hourly action budget, shared by all of its sessions
        and connections on this process (agent/limits/actions.py; counted on trio's clock)."""
        if self._principal_actions is None:
            self._principal_actions = PrincipalBudgets(
                self.config.actions.principal_cap, trio.current_time
            )
        return self._principal_actions

    @property
    def spend_ledger(self) -> SpendLedger:
        """The store's ledger (its totals kept in memory between reads), else memory's."""
        if self.store is None:
            return self.memory_ledger
        if self._store_ledger is None or self._store_ledger.ledger is not self.store:
            self._store_ledger = CachedLedger(self.store, trio.current_time)
        return self._store_ledger

    def cost_meter(
        self,
        session_id: str,
        agent: AgentConfig,
        provider: ProviderConfig,
        model: str,
        principal: str | None = None,
    ) -> CostMeter:
        """The spending caps a session of ``agent`` driven by ``principal`` (None: the
        local operator) is held to (agent/limits/spend.py)."""
        runtime = self.config.runtime_profiles.get(agent.runtime_profile, RuntimeProfileConfig())
        return CostMeter(
            cost=self.config.cost,
            ledger=self.spend_ledger,
            session_id=session_id,
            agent_alias=agent.alias,
            runtime_profile=agent.runtime_profile,
            agent_cap_cents=runtime.max_cost_per_day_cents,
            provider_type=provider.type,
            model=model,
            now=self.utc_clock,
            principal=principal,
            metrics=self.metrics,
        )

    live_sessions: LiveSessions = field(default_factory=LiveSessions)
    """Which connection holds each live session (protocol/services/ownership.py)."""
    metrics: Metrics = NO_METRICS
    """Where every layer records its metrics (observability/metrics.py): nothing is kept
    unless the gateway set its ``PrometheusMetrics`` here."""
