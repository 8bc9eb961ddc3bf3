"""What every part of one running gateway shares: settings, tokens, pairing, connections.

``GatewayState`` is built by ``Gateway`` (gateway/service.py) and handed to the route
handlers (gateway/handlers.py) and the WebSocket upgrade (gateway/upgrade.py); it holds no
task of its own.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

import trio
from wsproto.frame_protocol import CloseReason

from acp_core.gateway_contract import GatewayAddress, normalize_host, normalize_path_prefix
from acp_server.config import GatewayConfig
from acp_server.gateway.admin import AdminSecret
from acp_server.gateway.auth import TokenRegistry, is_loopback_host
from acp_server.gateway.pairing import PairingGuard
from acp_server.gateway.pending import PendingConnections
from acp_server.gateway.principals import TokenUses
from acp_server.protocol.connection import AcpConnection
from acp_server.protocol.services.context import AcpApp

if TYPE_CHECKING:
    from acp_server.gateway.shared_tokens import SharedTokens

RESTART_REASON: Final = "gateway restarting, retry"
REVOKED_REASON: Final = "token revoked"


class InputEnds(Protocol):
    """What the gateway needs of a connection's transport, whichever ACP transport it is
    (gateway/websocket.py, gateway/http_transport.py): a way to end its input."""

    def end_input(self) -> None: ...


@dataclass(eq=False, slots=True)
class LiveConnection:
    """One ACP connection (over a WebSocket or Streamable HTTP) and its transport."""

    transport: InputEnds
    acp: AcpConnection
    token_digest: str | None
    peer: str
    principal: str | None = None
    """The token's principal; None when pairing is off (every client is the operator)."""
    close_code: int = CloseReason.NORMAL_CLOSURE
    close_reason: str = ""

    def shut(self, code: int, reason: str) -> None:
        """End input; the transport's runner then closes the connection (a WebSocket with
        ``code``)."""
        self.close_code, self.close_reason = code, reason
        self.transport.end_input()


class ConnectionRegistry:
    """The open ACP connections of both transports, and an event for "none left"."""

    def __init__(self) -> None:
        self._connections: set[LiveConnection] = set()
        self._all_closed = trio.Event()
        self._all_closed.set()

    def __len__(self) -> int:
        return len(self._connections)

    def __iter__(self) -> Iterator[LiveConnection]:
        return iter(list(self._connections))

    def add(self, connection: LiveConnection) -> None:
        self._connections.add(connection)
        if self._all_closed.is_set():
            self._all_closed = trio.Event()

    def discard(self, connection: LiveConnection) -> None:
        self._connections.discard(connection)
        if not self._connections:
            self._all_closed.set()

    async def wait_all_closed(self) -> None:
        await self._all_closed.wait()

    def shut_revoked(self, revoked: Callable[[str], bool]) -> int:
        """Close (1008 "token revoked") every connection whose token digest ``revoked``
        names; how many."""
        shut = 0
        for connection in self:
            if connection.token_digest is not None and revoked(connection.token_digest):
                connection.shut(CloseReason.POLICY_VIOLATION, REVOKED_REASON)
                shut += 1
        return shut

    def token_digests(self) -> set[str]:
        """The token digests the open connections were admitted with."""
        return {c.token_digest for c in self._connections if c.token_digest is not None}

    def per_token(self) -> Counter[str]:
        """How many open connections each token digest has."""
        return Counter(c.token_digest for c in self._connections if c.token_digest is not None)


class GatewayState:
    """Settings and the mutable state of one gateway (see the module docstring).

    Args:
        host, port: override ``[gateway] host``/``port`` (``port=0``: the OS chooses).
    """

    def __init__(
        self,
        app: AcpApp,
        *,
        host: str | None,
        port: int | None,
        max_message_bytes: int,
        max_connections: int,
        handshake_timeout_secs: float,
        max_pending_connections: int,
        max_pending_per_peer: int,
    ) -> None:
        self.app = app
        self.settings: GatewayConfig = app.config.gateway
        self.address = GatewayAddress(
            host=normalize_host(host or self.settings.host),
            port=self.settings.port if port is None else port,
            path_prefix=normalize_path_prefix(self.settings.path_prefix),
            tls=self.settings.tls.enabled,
        )
        self.max_message_bytes = max_message_bytes
        self.max_connections = max_connections
        self.handshake_timeout_secs = handshake_timeout_secs
        self.tokens = TokenRegistry(self.settings.paired_tokens)
        self.pairing = PairingGuard(
            clock=time.monotonic, rate_limit_per_minute=self.settings.pair_rate_limit_per_minute
        )
        self.connections = ConnectionRegistry()
        self.token_uses = TokenUses()
        self.shared_tokens: SharedTokens | None = None
        """Set when tokens and pairing live in a PostgreSQL store (gateway/shared_tokens.py);
        ``tokens`` and ``pairing`` are then unused."""
        if app.store is not None and app.config.storage.url is not None:
            from acp_server.gateway.shared_tokens import shared_tokens_for

            self.shared_tokens = shared_tokens_for(app, self.connections)
        self.pending = PendingConnections(
            max_total=max_pending_connections, max_per_peer=max_pending_per_peer
        )
        self.draining = False
        self.admin_secret: AdminSecret | None = None
        self.persist_lock = trio.Lock()
        self.started_at = time.monotonic()

    @property
    def host(self) -> str:
        return self.address.host

    @property
    def prefix(self) -> str:
        return self.address.path_prefix

    @property
    def loopback_only(self) -> bool:
        return is_loopback_host(self.host)

    @property
    def unpaired(self) -> bool:
        """Pairing is required and no client has paired yet."""
        return self.settings.require_pairing and not len(self.tokens)

    def url(self, path: str, *, websocket: bool = False) -> str:
        """The URL of ``path`` on this gateway (the bound port once listening)."""
        return self.address.url(path, websocket=websocket)

    def revoke_all_tokens(self) -> int:
        """Forget every paired token and close the connections that used one (1008)."""
        revoked = len(self.tokens)
        self.tokens.clear()
        self.connections.shut_revoked(lambda _digest: True)
        return revoked
