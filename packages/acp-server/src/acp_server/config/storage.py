"""``[storage]``: where sessions are stored.

    [storage]
    url = "postgresql://zeroclaw@db.internal:5432/zeroclaw"

``url`` (or the environment variable ``ZEROCLAW_STORAGE_URL``, which wins over the file)
selects the PostgreSQL session store (storage/postgres/) that several processes can
share. Without it, sessions go to the SQLite file under ``workspace_dir`` as always.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

STORAGE_URL_ENV: Final = "ZEROCLAW_STORAGE_URL"
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


class StorageConfig(msgspec.Struct, frozen=True):
    url: str | None = None
    """A ``postgresql://`` URL (libpq's form); None: the SQLite file under workspace_dir."""

    @property
    def shared(self) -> bool:
        """Sessions live in a database other processes may share (PostgreSQL)."""
        return self.url is not None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot select a store, or None."""
    if not url.startswith(POSTGRES_SCHEMES):
        return "expected a postgresql:// URL (PostgreSQL is the only shared store)"
    return None


def storage_from_env(env: Mapping[str, str]) -> StorageConfig | None:
    """``ZEROCLAW_STORAGE_URL`` when set and not blank (checked by the caller)."""
    url = env.get(STORAGE_URL_ENV, "").strip()
    return StorageConfig(url=url) if url else None


def parse_storage(parser: ConfigParser, table: dict[str, Any]) -> StorageConfig:
    """``[storage]`` from config.toml, with ``ZEROCLAW_STORAGE_URL`` taking precedence."""
    parser.warn_unknown(table, frozenset({"url"}), "storage")
    from_env = storage_from_env(parser.env)
    if from_env is not None:
        problem = url_problem(from_env.url or "")
        if problem:
            raise parser.error(STORAGE_URL_ENV, problem)
        return from_env
    url = parser.get(table, "url", "storage.url", str, "").strip()
    if not url:
        return StorageConfig()
    problem = url_problem(url)
    if problem:
        raise parser.error("storage.url", problem)
    return StorageConfig(url=url)


def default_storage(env: Mapping[str, str]) -> StorageConfig:
    """Without a config.toml: ``ZEROCLAW_STORAGE_URL``, else SQLite.

    Raises:
        ConfigError: the variable holds something other than a PostgreSQL URL.
    """
    from acp_server.config.values import ConfigError

    from_env = storage_from_env(env)
    if from_env is None:
        return StorageConfig()
    problem = url_problem(from_env.url or "")
    if problem:
        raise ConfigError(None, STORAGE_URL_ENV, problem)
    return from_env
