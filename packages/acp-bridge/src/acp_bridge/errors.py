"""Exit codes and the one exception that ends the bridge with a message.

Every fatal condition becomes a ``BridgeExit`` at the point where it is understood, carrying
the exit code and a message a person can act on; ``cli.main`` writes the message to stderr
and exits. Nothing else in the bridge calls ``sys.exit``.

Exit codes (issue 7 §2): 0 normal end, 1 connection refused or lost, 2 usage or config,
3 authentication rejected.
"""

from __future__ import annotations

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
    """Stop the bridge with ``code`` after writing ``message`` to stderr."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
