"""The transport contract shared by stdio and WebSocket connections.

One transport carries whole JSON-RPC messages (one line on stdio, one text frame on a
WebSocket). The connection runner is the single writer: exactly one task calls
``send_message`` at a time.
"""

from __future__ import annotations

from typing import Protocol


class TransportClosed(Exception):
    """The peer went away; no more messages can be sent or received."""


class MessageTransport(Protocol):
    async def receive_message(self) -> str | None:
        """The next message (one JSON text), or None at end of stream.

        Raises:
            acp_core.RemoteProtocolError: the next message was malformed at the framing
                level (too long, not UTF-8); send its ``reply_hint`` and keep reading.
        """
        ...

    async def send_message(self, payload: bytes) -> None:
        """Send one serialised message (no trailing newline).

        Raises:
            TransportClosed: the peer is gone.
        """
        ...

    async def aclose(self) -> None: ...
