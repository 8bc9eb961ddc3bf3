"""The ACP server: per-connection protocol state over any ``MessageTransport``.

Contract shared by `zeroclaw acp` (stdio) and `zeroclaw gateway` (WebSocket): both build one
``AcpApp`` per process and call ``serve_connection`` once per connection. Owned by the
stdio-server work (issue 3).
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_server.config import Config
from acp_server.store import AsyncSessionStore
from acp_server.transport import MessageTransport


@dataclass
class AcpApp:
    """Process-wide state: the configuration and the (optional) session store."""

    config: Config
    store: AsyncSessionStore | None


async def serve_connection(
    transport: MessageTransport,
    app: AcpApp,
    *,
    connection_default_agent: str | None = None,
) -> None:
    """Serve one ACP peer until its stream ends; cancels in-flight turns on the way out.

    Each call has its own session map, ``max_sessions`` budget and ``zc-out-N`` counter.
    """
    raise NotImplementedError
