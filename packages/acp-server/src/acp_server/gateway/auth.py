"""Who may talk to the gateway: bearer tokens, subprotocols, origins and hosts.

Pure functions and one small mutable registry; no I/O. The rules follow the ZeroClaw ACP documentation's "Via the
daemon gateway" section and ZeroClaw's implementation: a token may arrive as
``Authorization: Bearer``, as a ``Sec-WebSocket-Protocol`` entry ``bearer.<token>`` (browsers
cannot set headers on a WebSocket), or as ``?token=``; the first source present is the one
checked. Only SHA-256 digests of tokens are ever stored or compared.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

# Shared with the bridge (acp_core.gateway_contract); ACP_SUBPROTOCOL and UNAUTHORIZED_BODY
# are re-exported for the gateway modules and tests that import them from here.
from acp_core.gateway_contract import ACP_SUBPROTOCOL as ACP_SUBPROTOCOL
from acp_core.gateway_contract import (
    BEARER_SUBPROTOCOL_PREFIX,
    MAX_TOKEN_CHARS,
    TOKEN_QUERY_PARAMETER,
    token_from_bearer,
)
from acp_core.gateway_contract import UNAUTHORIZED_BODY as UNAUTHORIZED_BODY
from acp_core.gateway_contract import is_loopback_host as is_loopback_host
from acp_server.storage.tokens import imported_principal

Headers = Sequence[tuple[bytes, bytes]]
TokenSource = Literal["authorization", "subprotocol", "query"]


def hash_token(token: str) -> str:
    """The SHA-256 hex digest stored in ``[gateway] paired_tokens``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def presented_digest(token: str) -> str | None:
    """The digest to look ``token`` up by, or None for a token too long (or empty) to be ours,
    which is refused unhashed."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    return hash_token(token)


class TokenRegistry:
    """The accepted token digests and the principal each belongs to; pairing adds to it,
    ``--rotate`` empties it. A digest added without a name is listed under its imported
    name (``token-<digest prefix>``, storage/tokens.py)."""

    def __init__(self, digests: Iterable[str] = ()) -> None:
        self._principals: dict[str, str] = {}
        for digest in digests:
            self.add(digest)

    @property
    def digests(self) -> tuple[str, ...]:
        return tuple(self._principals)

    @property
    def principals(self) -> dict[str, str]:
        """digest -> principal, in pairing order."""
        return dict(self._principals)

    def __len__(self) -> int:
        return len(self._principals)

    def add(self, digest: str, principal: str | None = None) -> None:
        normalized = digest.strip().lower()
        if normalized:
            self._principals[normalized] = principal or imported_principal(normalized)

    def name(self, principals: Mapping[str, str]) -> None:
        """Take the names ``principals`` (digest -> principal) gives the digests it knows."""
        for digest in self._principals:
            if digest in principals:
                self._principals[digest] = principals[digest]

    def has_principal(self, principal: str) -> bool:
        return principal in self._principals.values()

    def principal_of(self, digest: str) -> str | None:
        return self._principals.get(digest)

    def clear(self) -> None:
        self._principals.clear()

    def remove(self, digests: Iterable[str]) -> None:
        for digest in digests:
            self._principals.pop(digest, None)

    def verify(self, token: str) -> str | None:
        """The digest of ``token`` when it is paired, else None.

        Every stored digest is compared (no early exit) with ``hmac.compare_digest``, so the
        time taken says nothing about which digest, or how much of one, matched.
        """
        presented = presented_digest(token)
        if presented is None:
            return None
        matched: str | None = None
        for digest in self._principals:
            if hmac.compare_digest(presented, digest):
                matched = digest
        return matched


@dataclass(frozen=True, slots=True)
class PresentedToken:
    source: TokenSource
    token: str


def header_values(headers: Headers, name: bytes) -> list[str]:
    """Every value of header ``name`` (lower-case bytes), decoded as Latin-1 like HTTP does."""
    return [value.decode("latin-1") for key, value in headers if key.lower() == name]


def offered_subprotocols(headers: Headers) -> list[str]:
    """All ``Sec-WebSocket-Protocol`` entries, across repeated headers, in order."""
    entries: list[str] = []
    for value in header_values(headers, b"sec-websocket-protocol"):
        entries.extend(item.strip() for item in value.split(",") if item.strip())
    return entries


def presented_token(headers: Headers, query: Mapping[str, str]) -> PresentedToken | None:
    """The token to check: the first of Authorization, subprotocol ``bearer.*``, ``?token=``."""
    for value in header_values(headers, b"authorization"):
        token = token_from_bearer(value)
        if token is not None:
            return PresentedToken("authorization", token)
    for entry in offered_subprotocols(headers):
        if entry.startswith(BEARER_SUBPROTOCOL_PREFIX) and len(entry) > len(
            BEARER_SUBPROTOCOL_PREFIX
        ):
            return PresentedToken("subprotocol", entry[len(BEARER_SUBPROTOCOL_PREFIX) :])
    query_token = query.get(TOKEN_QUERY_PARAMETER, "").strip()
    if query_token:
        return PresentedToken("query", query_token)
    return None


def select_subprotocol(offered: Sequence[str]) -> str | None:
    """``zeroclaw.acp.v1`` when offered; never a ``bearer.*`` entry (it would echo the token)."""
    return ACP_SUBPROTOCOL if ACP_SUBPROTOCOL in offered else None


def host_of_authority(authority: str) -> str:
    """``host`` from a ``Host`` header value ``host[:port]`` (IPv6 in brackets)."""
    value = authority.strip()
    if value.startswith("["):
        end = value.find("]")
        return value[: end + 1] if end != -1 else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def origin_allowed(origin: str, allowed_origins: Sequence[str]) -> bool:
    """Browser safety: an ``Origin`` is accepted when it is a loopback http(s) origin or is
    listed (exactly, trailing slash ignored) in ``[gateway] allowed_origins``."""
    normalized = origin.strip().rstrip("/").lower()
    if any(normalized == item.strip().rstrip("/").lower() for item in allowed_origins):
        return True
    if "*" in allowed_origins:
        return True
    try:
        parts = urlsplit(normalized)
    except ValueError:
        return False
    return parts.scheme in {"http", "https"} and is_loopback_host(parts.hostname or "")


def host_header_allowed(host_header: str | None, allowed_origins: Sequence[str]) -> bool:
    """DNS-rebinding guard for a loopback-bound gateway: the ``Host`` must name a loopback
    address, or a host that appears in ``allowed_origins``."""
    if host_header is None:
        return False
    host = host_of_authority(host_header)
    if is_loopback_host(host):
        return True
    allowed_hosts = {
        (urlsplit(item.strip()).hostname or "").lower() for item in allowed_origins if item.strip()
    }
    return host.strip("[]").lower() in allowed_hosts
