"""Opening the session store a configuration names, whichever backend that is.

A location is a ``postgresql://`` (or ``postgres://``) URL for the shared PostgreSQL store,
or the path of an SQLite file (``<workspace_dir>/sessions/acp-sessions.db``). Only this
module maps one to the other, so the rest of the server, ``AsyncSessionStore`` included,
never names a backend; the PostgreSQL one is imported only when a URL asks for it (its
driver is an optional extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

import trio

from acp_server.storage.async_store import DEFAULT_MAX_UNSAVED_TURNS, AsyncSessionStore
from acp_server.storage.contract import SessionBackend
from acp_server.storage.records import StoreUnavailable
from acp_server.storage.sqlite.store import SessionStore

StoreLocation: TypeAlias = Path | str
"""An SQLite file's path, or a PostgreSQL URL (``[storage] url``)."""


def open_backend(location: StoreLocation) -> SessionBackend:
    """The store at ``location``, opened (and migrated) for blocking use.

    Raises ``StoreUnavailable`` when it cannot be used (the message names it, never a
    password), including a URL whose driver is not installed. Blocking: from trio, use
    ``open_store``."""
    if isinstance(location, Path):
        return SessionStore.open(location)
    try:
        from acp_server.storage.postgres.store import PostgresSessionStore
    except ImportError as exc:
        raise StoreUnavailable(
            "[storage] url names a PostgreSQL store, but its driver is not installed"
            f" ({exc.name}): install acp-server[postgres]"
        ) from exc
    return PostgresSessionStore.open(location)


async def open_store(
    location: StoreLocation, *, max_unsaved_turns: int = DEFAULT_MAX_UNSAVED_TURNS
) -> AsyncSessionStore:
    """``open_backend`` on a worker thread, wrapped for trio."""
    backend = await trio.to_thread.run_sync(open_backend, location)
    return AsyncSessionStore(backend, max_unsaved_turns=max_unsaved_turns)


def describe_location(location: StoreLocation) -> str:
    """``location`` for messages: a path as it is, a URL without its password."""
    if isinstance(location, Path):
        return str(location)
    try:
        from acp_server.storage.postgres.store import describe_url
    except ImportError:
        return "PostgreSQL ([storage] url; its driver is not installed)"
    return describe_url(location)
