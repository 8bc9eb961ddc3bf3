"""Opening the WebSocket to the gateway, and turning failures into exit codes and advice."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Final

import msgspec
import trio
from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidMessage,
    InvalidStatus,
    InvalidURI,
)

from acp_bridge.auth import Credentials
from acp_bridge.connection import GatewayConnection, connect
from acp_bridge.errors import BridgeExit, ExitCode, describe_error
from acp_core.framing import DEFAULT_MAX_LINE_BYTES

logger = logging.getLogger(__name__)

DEFAULT_OPEN_TIMEOUT_SECS: Final = 10.0
DEFAULT_CLOSE_TIMEOUT_SECS: Final = 2.0
"""How long a closing handshake may take before the TCP connection is dropped anyway."""
DEFAULT_PING_INTERVAL_SECS: Final = 20.0
DEFAULT_PING_TIMEOUT_SECS: Final = 20.0
DEFAULT_MAX_MESSAGE_BYTES: Final = DEFAULT_MAX_LINE_BYTES
"""A frame may be as large as a stdio line: the same blobs travel both ways."""


class ConnectOptions(msgspec.Struct, frozen=True):
    url: str
    credentials: Credentials
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    open_timeout: float = DEFAULT_OPEN_TIMEOUT_SECS
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT_SECS
    ping_interval: float | None = DEFAULT_PING_INTERVAL_SECS
    ping_timeout: float | None = DEFAULT_PING_TIMEOUT_SECS


@asynccontextmanager
async def open_gateway(options: ConnectOptions) -> AsyncIterator[GatewayConnection]:
    """Connect and authenticate; the connection is closed normally on exit.

    Raises:
        BridgeExit: (auth) HTTP 401; (connection) anything else that stops the upgrade;
            (usage) an unusable URL.
    """
    # No proxy: an IDE's environment proxy settings are meant for its own traffic, and a
    # local gateway must never be reached through them. No compression: ACP frames are
    # JSON that is mostly already compact, on loopback deflate only costs CPU, and
    # `zeroclaw gateway` does not negotiate it.
    client = connect(
        options.url,
        headers=options.credentials.headers,
        max_message_bytes=options.max_message_bytes,
        open_timeout=options.open_timeout,
        close_timeout=options.close_timeout,
        ping_interval=options.ping_interval,
        ping_timeout=options.ping_timeout,
    )
    try:
        connection = await client.__aenter__()
    except InvalidStatus as exc:
        raise _rejected(options, exc) from None
    except InvalidURI as exc:
        raise BridgeExit(ExitCode.USAGE, f"ERROR: invalid gateway URL: {exc}") from None
    # trio.BrokenResourceError: the TLS handshake failed (its cause says why).
    except (OSError, TimeoutError, InvalidHandshake, trio.BrokenResourceError) as exc:
        if _turned_away(exc):
            raise BridgeExit(
                ExitCode.CONNECTION,
                f"ERROR: failed to connect to {options.url}: the gateway closed the connection "
                f"during the handshake ({describe_error(exc)}); it is busy, with many clients "
                "connecting at once",
                busy=True,
            ) from None
        raise BridgeExit(
            ExitCode.CONNECTION,
            f"ERROR: failed to connect to {options.url}: {describe_error(exc)}. "
            "Is `zeroclaw gateway` running there, and does --config-dir point at its config?",
        ) from None
    logger.info("connected to %s (%s)", options.url, options.credentials.describe())
    try:
        yield connection
    except BaseException as exc:
        await client.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    else:
        await client.__aexit__(None, None, None)


def _rejected(options: ConnectOptions, exc: InvalidStatus) -> BridgeExit:
    status = exc.response.status_code
    body = bytes(exc.response.body or b"")[:200].decode("utf-8", errors="replace").strip()
    said = f": {body}" if body else ""
    if status == 401:
        # Never retried: the same credentials would only be refused again.
        return BridgeExit(
            ExitCode.AUTH,
            f"ERROR: the gateway at {options.url} rejected the bridge's credentials "
            f"(HTTP 401{said}). Token from {options.credentials.describe()}. "
            f"{options.credentials.rejected_advice()}",
        )
    hint = " Check [gateway].path_prefix and --url." if status == 404 else ""
    return BridgeExit(
        ExitCode.CONNECTION,
        f"ERROR: failed to connect to {options.url}: the gateway answered HTTP {status}{said}."
        f"{hint}",
        busy=status == HTTPStatus.SERVICE_UNAVAILABLE,
    )


def _turned_away(exc: BaseException) -> bool:
    """The gateway accepted the TCP connection, then dropped it before answering the
    upgrade (a gateway at its cap on unauthenticated sockets does that to idle ones): not a
    wrong address or port, which fail before anything is accepted."""
    if isinstance(exc, InvalidMessage):  # the stream ended before the HTTP response
        return True
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    return isinstance(cause, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError))


def describe_close(exc: ConnectionClosed, connection: GatewayConnection) -> str:
    """Why the connection ended, in words, for the error sent to the IDE and the exit message."""
    if exc.rcvd is not None:
        reason = f": {exc.rcvd.reason}" if exc.rcvd.reason else ""
        return f"the gateway closed the connection (code {exc.rcvd.code}{reason})"
    if exc.sent is not None and exc.sent.code == 1011:
        return f"the gateway stopped answering pings ({exc.sent.reason or 'keepalive timeout'})"
    if exc.sent is not None and exc.sent.code == 1009:
        return f"the gateway sent a message larger than the limit ({exc.sent.reason})"
    underlying = connection.connection_exc
    detail = f": {describe_error(underlying)}" if underlying is not None else ""
    return f"the connection to the gateway was lost{detail}"
