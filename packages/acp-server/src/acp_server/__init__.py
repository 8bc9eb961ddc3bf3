"""ZeroClaw ACP server: the stdio server, the WebSocket gateway and the agent runtime behind both."""

from __future__ import annotations

__version__ = "0.1.0"
