"""``Outbound``: all that the services (protocol/services/) and the presentation
(protocol/presentation/) may ask of the peer they serve.

Three ways to talk to the client (a ``session/update``, any other notification, a request
that waits for the client's answer) and the facts about it that decide what is sent: what
its ``initialize`` said (capabilities, the profile of how to ask it, whether its files are
ours), where it is (``remote``: a gateway peer), who it is (``principal``), the gateway's
``?agent=`` default, and a nursery for what outlives one request (a session's MCP servers).

``AcpConnection`` (protocol/connection.py) is the one implementation over a transport; the
services never import it, so they can be driven by any object of this shape (a test's
recorder, tests/server/protocol/test_services.py). The three facts ``initialize`` teaches
are written by the handshake service (protocol/services/handshake.py) and only read
elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import trio

    from acp_core import schema
    from acp_core.jsonrpc import ErrorResponse, Payload, Response
    from acp_server.protocol.client_profile import ClientProfile


class Outbound(Protocol):
    """The peer as the services see it: what they may send it, and what it is."""

    client_capabilities: schema.ClientCapabilities | None
    """What the client's ``initialize`` advertised (None before it)."""
    client_profile: ClientProfile
    """How to ask this client (protocol/client_profile.py), from its ``clientInfo``."""
    shares_filesystem: bool
    """The client said its files are the server's (``_meta.zeroclaw.sharedFilesystem``)."""

    @property
    def remote(self) -> bool:
        """A gateway peer: it may run on another machine."""

    @property
    def principal(self) -> str | None:
        """Who the peer is (a gateway token's principal); None for the local operator."""

    @property
    def connection_default_agent(self) -> str | None:
        """The gateway's ``?agent=`` (step 2 of the alias precedence)."""

    @property
    def nursery(self) -> trio.Nursery:
        """Where what outlives one request runs (a session's MCP servers)."""

    async def send_update(self, session_id: str, update: schema.SessionUpdate) -> None:
        """Send one ``session/update`` for ``session_id``."""

    async def send_notification(self, method: str, params: Payload) -> None:
        """Send any other notification."""

    async def call(self, method: str, params: Payload) -> Response | ErrorResponse:
        """Send a request to the client and wait for its answer (cancellable)."""
