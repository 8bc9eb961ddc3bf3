"""Tokens and pairing shared by every gateway replica on one PostgreSQL store.

With ``[storage] url`` naming a PostgreSQL store (and pairing on), the paired token
digests and the one-time pairing code live in the database (storage/postgres/tokens.py),
not in config.toml: every replica checks a new connection's token there, one code pairs once
across all of them, and the lockout and rate limit count every replica's attempts.
config.toml's ``[gateway] paired_tokens`` is imported at start (a digest the store already
knows, even a revoked one, is left as it is).

A revocation on any replica commits and NOTIFYs; every replica's ``watch`` task hears it
(``RevocationListener``'s thread hands each notification to trio through a memory channel)
and closes that token's connections with 1008 "token revoked" at once. Every
``DEFAULT_TOKEN_RECONCILE_SECS``, and whenever the listening connection had to be opened
again, the tokens of the open connections are checked against the store, so a missed
notification delays a close by that interval at most. No token is cached: an upgrade asks
the database (on a worker thread), so a revoked token is refused by the next upgrade.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

import trio

from acp_server.gateway.auth import presented_digest
from acp_server.security.pairing import PairingLimits, PairOutcome
from acp_server.storage import StoreError
from acp_server.storage.postgres.tokens import (
    ALL_TOKENS,
    PairingStatus,
    PostgresTokens,
    RevocationListener,
)

if TYPE_CHECKING:
    from acp_server.gateway.state import ConnectionRegistry
    from acp_server.protocol.services.context import AcpApp

logger = logging.getLogger(__name__)

DEFAULT_TOKEN_RECONCILE_SECS: Final = 5.0
"""How often a replica re-checks its open connections' tokens against the shared store (a
revocation whose notification it missed still closes them within this)."""


class SharedTokens:
    """One replica's view of the shared tokens (see the module docstring)."""

    def __init__(
        self,
        backend: PostgresTokens,
        connections: ConnectionRegistry,
        *,
        reconcile_interval_secs: float = DEFAULT_TOKEN_RECONCILE_SECS,
    ) -> None:
        self.backend = backend
        self.connections = connections
        self.reconcile_interval_secs = reconcile_interval_secs

    @property
    def location(self) -> str:
        return self.backend.location

    # -- what the routes ask (each call one transaction on a worker thread)

    async def verify(self, token: str) -> tuple[str, str] | None:
        """(digest, principal) of ``token`` when it is paired and not revoked, else None.

        Raises:
            StoreError: the database does not answer.
        """
        digest = presented_digest(token)
        if digest is None:
            return None
        principal = await trio.to_thread.run_sync(self.backend.principal_of, digest)
        return None if principal is None else (digest, principal)

    async def add(self, digest: str, principal: str, source: str) -> None:
        """Pair ``digest`` as ``principal`` for every replica (``PrincipalTaken`` when the
        name has a live token)."""
        await trio.to_thread.run_sync(self.backend.store.add_token, digest, principal, source)

    async def import_digests(self, digests: Sequence[str]) -> int:
        return await trio.to_thread.run_sync(self.backend.import_digests, digests)

    async def status(self) -> PairingStatus:
        return await trio.to_thread.run_sync(self.backend.status)

    async def startup_code(self) -> str | None:
        return await trio.to_thread.run_sync(self.backend.startup_code)

    async def issue_code(self) -> str:
        """A fresh code only the admin routes show (``get-paircode --new``)."""
        return await trio.to_thread.run_sync(lambda: self.backend.issue_code(discoverable=False))

    async def attempt(
        self, presented: str | None, limits: PairingLimits, new_digest: str, principal: str
    ) -> PairOutcome:
        """Raises ``PrincipalTaken`` (the code not consumed) when the name is in use."""
        return await trio.to_thread.run_sync(
            self.backend.attempt, presented, limits, new_digest, principal
        )

    async def revoke(self, matches: Callable[[Mapping[str, str]], list[str]]) -> list[str]:
        """Revoke what ``matches`` picks; this replica's connections close at once, the
        others' when the notification reaches them."""
        revoked = await trio.to_thread.run_sync(self.backend.revoke_matching, matches)
        chosen = set(revoked)
        self.connections.shut_revoked(chosen.__contains__)
        return revoked

    async def rotate(self) -> tuple[int, str]:
        """Revoke every token and issue a fresh code; (tokens revoked, the code)."""
        revoked = await trio.to_thread.run_sync(self.backend.rotate)
        self.connections.shut_revoked(lambda _digest: True)
        return revoked

    # -- keeping the open connections in step with the store

    async def reconcile(self) -> int:
        """Close the open connections whose token is no longer paired; how many."""
        live = sorted(self.connections.token_digests())
        if not live:
            return 0
        try:
            paired = await trio.to_thread.run_sync(self.backend.still_paired, live)
        except StoreError as exc:
            logger.warning("cannot check the open connections' tokens: %s", exc)
            return 0
        gone = set(live) - paired
        shut = self.connections.shut_revoked(gone.__contains__) if gone else 0
        if shut:
            logger.warning("closed %d connection(s) whose token was revoked", shut)
        return shut

    async def watch(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen for revocations and reconcile periodically, until cancelled."""
        send, receive = trio.open_memory_channel[str](math.inf)
        trio_token = trio.lowlevel.current_trio_token()

        def deliver(payload: str) -> None:  # on the listener thread
            try:
                trio.from_thread.run_sync(send.send_nowait, payload, trio_token=trio_token)
            except (trio.RunFinishedError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        try:
            listener = await trio.to_thread.run_sync(
                RevocationListener, self.backend.store, deliver, lambda: deliver(ALL_TOKENS)
            )
        except StoreError as exc:
            logger.warning(
                "%s; a revoked token's connections close at the next reconcile (every %.0f s)",
                exc,
                self.reconcile_interval_secs,
            )
            task_status.started()
            await self._reconcile_periodically()
            return
        try:
            async with trio.open_nursery() as nursery, receive:
                nursery.start_soon(self._reconcile_periodically)
                task_status.started()
                async for payload in receive:
                    if payload == ALL_TOKENS:
                        await self.reconcile()
                    else:
                        self.connections.shut_revoked(payload.__eq__)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(listener.close)

    async def _reconcile_periodically(self) -> None:
        while True:
            await trio.sleep(self.reconcile_interval_secs)
            await self.reconcile()


def shared_tokens_for(app: AcpApp, connections: ConnectionRegistry) -> SharedTokens | None:
    """The shared tokens of a gateway whose store is PostgreSQL and requires pairing, else
    None (tokens stay in config.toml)."""
    store = app.store
    if store is None or app.config.storage.url is None or not app.config.gateway.require_pairing:
        return None
    from acp_server.storage.postgres import PostgresSessionStore

    backend = store.sync
    if not isinstance(backend, PostgresSessionStore):
        return None
    return SharedTokens(PostgresTokens(backend), connections)
