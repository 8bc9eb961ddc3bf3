"""Exit codes and the one exception that ends the bridge with a message.

Every fatal condition becomes a ``BridgeExit`` at the point where it is understood, carrying
the exit code and a message a person can act on; ``cli.main`` writes the message to stderr
and exits. Nothing else in the bridge calls ``sys.exit``.

Exit codes: 0 normal end, 1 connection refused or lost, 2 usage or config,
3 authentication rejected.
"""

from __future__ import annotations

import os
import ssl
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CONNECTION = 1
    """Could not connect, or the connection to the gateway was lost or closed by it."""
    USAGE = 2
    """Bad command line or configuration, including "no token available"."""
    AUTH = 3
    """The gateway rejected our credentials (HTTP 401 on the upgrade, or a refused pairing)."""


class BridgeExit(Exception):
    """Stop the bridge with ``code`` after writing ``message`` to stderr.

    ``busy``: the gateway was reached but turned the connection away for now (answered
    503, or closed it during the handshake); trying again shortly should succeed.
    """

    def __init__(self, code: ExitCode, message: str, *, busy: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.busy = busy


def describe_error(exc: BaseException) -> str:
    """A short reason: "connection refused", "timed out", ... (not trio's wrapper text)."""
    # TLS first: ssl.SSLError is an OSError whose errno is OpenSSL's, not the OS's
    # (a failed certificate check would otherwise read "operation not permitted").
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            f"TLS certificate verification failed ({exc.verify_message}); if the gateway "
            "uses a self-signed certificate, set SSL_CERT_FILE to its PEM file"
        )
    if isinstance(exc, ssl.SSLError):
        if exc.reason == "WRONG_VERSION_NUMBER":
            return "TLS handshake failed: the gateway does not speak TLS on this port (ws://?)"
        return f"TLS handshake failed ({exc.reason or exc})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError):
        if exc.errno:
            return os.strerror(exc.errno).lower()
        # trio's "all attempts to connect ... failed" chains the per-address errors.
        cause = exc.__cause__
        if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            return describe_error(cause.exceptions[-1])
    elif exc.__cause__ is not None:
        # trio.BrokenResourceError and friends say nothing themselves; their cause does.
        return describe_error(exc.__cause__)
    return str(exc) or type(exc).__name__
