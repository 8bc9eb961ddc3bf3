"""The admin secret that lets `zeroclaw gateway get-paircode` talk to the running daemon.

Loopback-only is not enough on a shared machine: any local user could ask for a pairing
code and then drive the agent (and its shell tool) as the gateway's owner. So at start the
gateway writes a random secret to ``<config_dir>/gateway-admin.token`` with mode 0600, and
the admin routes require it in ``X-ZeroClaw-Admin``. Whoever can read the config
directory can administer the gateway; nobody else can. The file is removed at shutdown.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Final

ADMIN_SECRET_FILE: Final = "gateway-admin.token"
ADMIN_HEADER: Final = "X-ZeroClaw-Admin"
DEFAULT_MAX_SECRET_FILE_BYTES: Final = 1024


class AdminSecret:
    """The secret of one running gateway, and where it is stored."""

    def __init__(self, path: Path, value: str) -> None:
        self.path = path
        self.value = value

    @classmethod
    def create(cls, config_dir: Path) -> AdminSecret:
        """Write a fresh secret (0600, atomically). Blocking.

        Raises:
            OSError: the config directory cannot be created or written.
        """
        config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = config_dir / ADMIN_SECRET_FILE
        value = secrets.token_hex(32)
        temp = path.with_name(f".{ADMIN_SECRET_FILE}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(value + "\n")
            os.replace(temp, path)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        return cls(path, value)

    def matches(self, presented: str | None) -> bool:
        if not presented:
            return False
        return hmac.compare_digest(presented.strip().encode(), self.value.encode())

    def remove(self) -> None:
        """Delete the file if it is still ours (another gateway may have replaced it)."""
        if read_admin_secret(self.path.parent) == self.value:
            with contextlib.suppress(OSError):
                self.path.unlink()


def read_admin_secret(config_dir: Path) -> str | None:
    """The stored secret, or None when there is none (or it cannot be read)."""
    try:
        with (config_dir / ADMIN_SECRET_FILE).open("rb") as handle:
            raw = handle.read(DEFAULT_MAX_SECRET_FILE_BYTES)
    except OSError:
        return None
    value = raw.decode("ascii", errors="replace").strip()
    return value or None
