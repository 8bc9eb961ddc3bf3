"""zeroclaw-acp-bridge: relays an IDE's stdio ACP stream to a ZeroClaw gateway over WebSocket."""

from __future__ import annotations

__version__ = "0.1.0"
