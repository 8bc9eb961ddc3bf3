"""The admin secret: the proof of being the gateway's operator.

Being on loopback proves nothing: any local user, and any command the agent's shell tool
runs on this machine, is a loopback peer. So at start the gateway writes a random secret
to ``<config_dir>/gateway-admin.token`` with mode 0600, and the admin routes (what
`zeroclaw gateway get-paircode` and `revoke-token` call) and the pairing code of
``GET /pair/code`` require it in ``X-ZeroClaw-Admin``. Whoever can read the config
directory is the operator; other users cannot read it, and the OS sandbox hides it from
every shell command (security/sandbox). The file is removed at shutdown.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path

from acp_core.gateway_contract import ADMIN_HEADER as ADMIN_HEADER
from acp_core.gateway_contract import ADMIN_SECRET_FILE as ADMIN_SECRET_FILE
from acp_core.gateway_contract import MAX_ADMIN_SECRET_FILE_BYTES


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
            raw = handle.read(MAX_ADMIN_SECRET_FILE_BYTES)
    except OSError:
        return None
    value = raw.decode("ascii", errors="replace").strip()
    return value or None
