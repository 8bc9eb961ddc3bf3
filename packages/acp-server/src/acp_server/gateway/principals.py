"""Principals: who each paired token belongs to, when it was last used, and the admin's view.

A token is paired under a principal's name (``POST /pair`` with ``X-ZeroClaw-Principal``,
the bridge's ``--name``; or ``zeroclaw gateway token create --name``), and every ACP
connection admitted with it carries that name (``AcpConnection.principal``): the sessions
it creates are that principal's, and it sees no other's (protocol/services/visibility.py).

Where the names live: with a session store, in its ``acp_paired_tokens`` table
(storage/tokens.py), for SQLite and PostgreSQL alike. With PostgreSQL that table is the
truth every replica asks (gateway/shared_tokens.py). With SQLite, one gateway serves the
store, config.toml's ``[gateway] paired_tokens`` still says which digests are live (a
digest removed there by hand is revoked at the next start) and the store keeps their
names and times; ``adopt_local_tokens`` reconciles the two at start, naming a digest it
has never seen ``token-<digest prefix>`` so every bridge paired before keeps working.
Without a store the names live in memory for the run.

The last use of a token is noted in memory on every admission and written to the store
at most once per ``DEFAULT_TOKEN_USE_FLUSH_SECS`` for all tokens together, never per
request; listing the tokens writes what is pending first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import trio

from acp_server.storage import PrincipalTaken, StoreError
from acp_server.storage.codec import now_text

if TYPE_CHECKING:
    from acp_server.gateway.state import GatewayState

logger = logging.getLogger(__name__)

DEFAULT_TOKEN_USE_FLUSH_SECS: Final = 60.0
"""How often the tokens' last-use times are written to the store."""
SHOWN_DIGEST_CHARS: Final = 12
"""How much of a digest the admin sees (enough to tell tokens apart, useless to an attacker)."""


class TokenUses:
    """The last use of each token by this process; what is not written to the store yet."""

    def __init__(self) -> None:
        self._latest: dict[str, str] = {}
        self._pending: dict[str, str] = {}

    def note(self, digest: str) -> None:
        now = now_text()
        self._latest[digest] = now
        self._pending[digest] = now

    def latest(self, digest: str) -> str | None:
        return self._latest.get(digest)

    def take_pending(self) -> dict[str, str]:
        pending, self._pending = self._pending, {}
        return pending

    def put_back(self, pending: dict[str, str]) -> None:
        for digest, when in pending.items():
            self._pending.setdefault(digest, when)


async def flush_token_uses(state: GatewayState) -> None:
    """Write the pending last-use times to the store (kept for the next try on failure)."""
    store = state.app.store
    if store is None:
        return
    pending = state.token_uses.take_pending()
    if not pending:
        return
    try:
        await store.record_token_use(pending)
    except StoreError as exc:
        state.token_uses.put_back(pending)
        logger.warning("could not record when tokens were last used: %s", exc)


async def keep_token_uses(state: GatewayState, interval_secs: float) -> None:
    """Flush the last-use times every ``interval_secs`` until cancelled, then once more."""
    try:
        while True:
            await trio.sleep(interval_secs)
            await flush_token_uses(state)
    finally:
        with trio.CancelScope(shield=True):
            await flush_token_uses(state)


async def adopt_local_tokens(state: GatewayState) -> None:
    """At the start of a gateway whose tokens live in config.toml: give the store's names to
    config.toml's digests (importing the ones it never saw), and revoke in the store what
    config.toml no longer lists (see the module docstring)."""
    store = state.app.store
    if store is None or state.shared_tokens is not None:
        return
    configured = state.tokens.digests
    try:
        imported = await store.import_tokens(configured)
        live = await store.live_tokens()
        gone = [digest for digest in live if digest not in set(configured)]
        if gone:
            await store.revoke_tokens(gone)
            logger.warning(
                "%d token(s) are no longer in config.toml's [gateway] paired_tokens: revoked",
                len(gone),
            )
    except StoreError as exc:
        logger.warning("cannot read the tokens' names from the store: %s", exc)
        return
    if imported:
        logger.info("named %d token(s) paired before tokens had names", imported)
    state.tokens.name(live)


async def add_local_token(state: GatewayState, digest: str, principal: str, source: str) -> None:
    """Pair ``digest`` as ``principal`` on a gateway whose tokens are its own (the store
    first, so a name in use is refused before anything changes).

    Raises:
        PrincipalTaken: a live token already has that name.
        StoreError: the store could not write it.
    """
    if state.tokens.has_principal(principal):
        raise PrincipalTaken(f"a live token is already named {principal!r}")
    store = state.app.store
    if store is not None:
        await store.add_token(digest, principal, source)
    state.tokens.add(digest, principal)


@dataclass(frozen=True, slots=True)
class TokenListing:
    """One token as ``zeroclaw gateway tokens`` shows it."""

    name: str
    prefix: str
    source: str
    created: str | None
    last_used: str | None
    connections: int
    revoked: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "prefix": self.prefix,
            "source": self.source,
            "created": self.created,
            "last_used": self.last_used,
            "connections": self.connections,
            "revoked": self.revoked,
        }


async def list_tokens(state: GatewayState) -> list[TokenListing]:
    """Every token the gateway knows, live ones first (raises ``StoreError``). Connections
    are this process's: a replica counts its own."""
    await flush_token_uses(state)
    open_per_token = state.connections.per_token()
    store = state.app.store
    if store is None:
        return [
            TokenListing(
                name=principal,
                prefix=digest[:SHOWN_DIGEST_CHARS],
                source="this run",
                created=None,
                last_used=state.token_uses.latest(digest),
                connections=open_per_token[digest],
                revoked=None,
            )
            for digest, principal in state.tokens.principals.items()
        ]
    listed = []
    for token in await store.list_tokens():
        seen_here = state.token_uses.latest(token.digest)
        stored = token.last_used_at
        listed.append(
            TokenListing(
                name=token.principal,
                prefix=token.digest[:SHOWN_DIGEST_CHARS],
                source=token.source,
                created=token.paired_at,
                last_used=max(filter(None, (stored, seen_here)), default=None),
                connections=open_per_token[token.digest],
                revoked=token.revoked_at,
            )
        )
    return listed
