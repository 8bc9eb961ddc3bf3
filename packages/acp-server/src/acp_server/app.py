"""The composition root: what one `zeroclaw acp` or `zeroclaw gateway` process is made of.

``open_app`` opens the session store (or decides to run without one), pairs it with the
configuration and the factories every connection builds its sessions from, and closes the
store when the process is done. Both front ends call it once and then serve connections
over the ``AcpApp`` it yields (acp_server/protocol/services/context.py; served by
``acp_server.protocol.stdio.serve_stdio`` and ``acp_server.gateway.service.Gateway``);
tests build an ``AcpApp`` directly with their own factories. With a shared PostgreSQL
store it also holds the process's replica leases (protocol/services/replica_leases.py) for as long
as it serves.

Nothing below imports this module: it is the one place that composes the parts, and the
command line (acp_server/cli/) is the only thing above it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import trio

from acp_server.agent.io.http_clients import http_clients
from acp_server.config import Config
from acp_server.protocol.services.context import AcpApp
from acp_server.storage import AsyncSessionStore, open_store

logger = logging.getLogger(__name__)


async def open_session_store(config: Config) -> AsyncSessionStore | None:
    """The process's session store.

    With ``[storage] url`` (or ``ZEROCLAW_STORAGE_URL``): the shared PostgreSQL store, or
    ``StoreUnavailable`` when it cannot be used: a process that other replicas share a
    database with must not quietly keep its sessions to itself. Otherwise
    ``<workspace_dir>/sessions/acp-sessions.db``; on any failure one warning and None
    (in-memory sessions only: the ZeroClaw ACP documentation, "Session persistence")."""
    if not config.acp.session_persistence:
        if config.storage.shared:
            logger.warning("[acp] session_persistence = false: [storage] url is not used")
        logger.info("[acp] session_persistence = false: sessions are kept in memory only")
        return None
    if config.storage.url is not None:
        shared = await open_store(
            config.storage.url, max_unsaved_turns=SHARED_STORE_MAX_UNSAVED_TURNS
        )
        logger.info("session store: %s", shared.sync.location)
        return shared
    path = config.store_path
    try:
        return await open_store(path)
    except Exception as exc:
        logger.warning(
            "session store unavailable at %s (%s); sessions will not survive a restart",
            path,
            exc,
        )
        return None


SHARED_STORE_MAX_UNSAVED_TURNS: Final = 0
"""A shared store keeps no turn it could not write: another replica may take the session
over and would never see it, so the prompt is answered with an error that says the turn
is not saved (instead of the single-machine store's keep-and-retry)."""


def shared_store_message(exc: Exception) -> str:
    """What `zeroclaw acp` / `zeroclaw gateway` print when the shared store is unusable."""
    return f"{exc}; not starting without the session store that [storage] url names"


@asynccontextmanager
async def open_app(config: Config) -> AsyncIterator[AcpApp]:
    """The process's ``AcpApp``; its store and its HTTP clients (the providers' and the web
    tools' connection pools, agent/io/http_clients.py) are closed on the way out, even when
    cancelled."""
    store = await open_session_store(config)
    try:
        async with http_clients():
            app = AcpApp(config=config, store=store)
            if store is None or config.storage.url is None:
                yield app
            else:
                # One live copy per session across replicas (protocol/services/replica_leases.py).
                from acp_server.protocol.services.replica_leases import open_replica_leases

                async with open_replica_leases(app.live_sessions, store):
                    yield app
    finally:
        if store is not None:
            with trio.CancelScope(shield=True):
                await store.aclose()
