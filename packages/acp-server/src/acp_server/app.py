"""The composition root: what one `zeroclaw acp` or `zeroclaw gateway` process is made of.

``open_app`` opens the session store (or decides to run without one), pairs it with the
configuration and the factories every connection builds its sessions from, and closes the
store when the process is done. Both front ends call it once and then serve connections
over the ``AcpApp`` it yields (``acp_server.protocol.stdio.serve_stdio``,
``acp_server.gateway.service.Gateway``); tests build an ``AcpApp`` directly with their
own factories.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final, TypeAlias

import trio

from acp_server.agent.cost import CachedLedger, CostMeter, MemoryLedger, SpendLedger, utc_now
from acp_server.agent.http_clients import http_clients
from acp_server.agent.providers import ProviderFactory, create_provider
from acp_server.agent.tools.base import Tool
from acp_server.config import (
    AgentConfig,
    Config,
    ProviderConfig,
    RiskProfileConfig,
    RuntimeProfileConfig,
)
from acp_server.protocol.ownership import LiveSessions
from acp_server.security import SecurityPolicy
from acp_server.storage import AsyncSessionStore, open_store

logger = logging.getLogger(__name__)

ToolsFactory: TypeAlias = Callable[[AgentConfig, Path, Config], Mapping[str, Tool]]
PolicyFactory: TypeAlias = Callable[[RiskProfileConfig, Path], SecurityPolicy]


def default_tools_factory(
    agent: AgentConfig, workspace: Path, config: Config
) -> Mapping[str, Tool]:
    """The built-in tools (memory tools are never part of ACP sessions; seed, "Memory").

    Tools are stateless: the session's workspace and policy reach them through
    ``ToolContext`` on every call.
    """
    from acp_server.agent.tools.registry import build_tools

    return build_tools(web=config.web)


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

    @property
    def spend_ledger(self) -> SpendLedger:
        """The store's ledger (its totals kept in memory between reads), else memory's."""
        if self.store is None:
            return self.memory_ledger
        if self._store_ledger is None or self._store_ledger.ledger is not self.store:
            self._store_ledger = CachedLedger(self.store, trio.current_time)
        return self._store_ledger

    def cost_meter(
        self, session_id: str, agent: AgentConfig, provider: ProviderConfig, model: str
    ) -> CostMeter:
        """The spending caps a session of ``agent`` is held to (agent/cost.py)."""
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
        )

    live_sessions: LiveSessions = field(default_factory=LiveSessions)
    """Which connection holds each live session (protocol/ownership.py)."""


async def open_session_store(config: Config) -> AsyncSessionStore | None:
    """The process's session store.

    With ``[storage] url`` (or ``ZEROCLAW_STORAGE_URL``): the shared PostgreSQL store, or
    ``StoreUnavailable`` when it cannot be used: a process that other replicas share a
    database with must not quietly keep its sessions to itself. Otherwise
    ``<workspace_dir>/sessions/acp-sessions.db``; on any failure one warning and None
    (in-memory sessions only: the ZeroClaw ACP documentation, "Session persistence")."""
    if not config.acp.session_persistence:
        if config.storage.shared:
            logger.warning("[acp] session_persistence = false: [storage] url is not used")
        logger.info("[acp] session_persistence = false: sessions are kept in memory only")
        return None
    if config.storage.url is not None:
        shared = await open_store(
            config.storage.url, max_unsaved_turns=SHARED_STORE_MAX_UNSAVED_TURNS
        )
        logger.info("session store: %s", shared.sync.location)
        return shared
    path = config.store_path
    try:
        return await open_store(path)
    except Exception as exc:
        logger.warning(
            "session store unavailable at %s (%s); sessions will not survive a restart",
            path,
            exc,
        )
        return None


SHARED_STORE_MAX_UNSAVED_TURNS: Final = 0
"""A shared store keeps no turn it could not write: another replica may take the session
over and would never see it, so the prompt is answered with an error that says the turn
is not saved (instead of the single-machine store's keep-and-retry)."""


def shared_store_message(exc: Exception) -> str:
    """What `zeroclaw acp` / `zeroclaw gateway` print when the shared store is unusable."""
    return f"{exc}; not starting without the session store that [storage] url names"


@asynccontextmanager
async def open_app(config: Config) -> AsyncIterator[AcpApp]:
    """The process's ``AcpApp``; its store and its HTTP clients (the providers' and the web
    tools' connection pools, agent/http_clients.py) are closed on the way out, even when
    cancelled."""
    store = await open_session_store(config)
    try:
        async with http_clients():
            app = AcpApp(config=config, store=store)
            if store is None or config.storage.url is None:
                yield app
            else:
                # One live copy per session across replicas (protocol/replica_leases.py).
                from acp_server.protocol.replica_leases import open_replica_leases

                async with open_replica_leases(app):
                    yield app
    finally:
        if store is not None:
            with trio.CancelScope(shield=True):
                await store.aclose()
