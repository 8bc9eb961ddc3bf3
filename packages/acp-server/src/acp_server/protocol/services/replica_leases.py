"""One live copy across replicas: the trio side of ``SessionLeases``
(storage/postgres/leases.py).

``open_replica_leases(live, store)`` runs while a process serves over a PostgreSQL store. Every
session id the process's ``LiveSessions`` holds (protocol/services/ownership.py) gets its lock:

* a restore (``session/load``, ``session/resume``) claims the session through
  ``ReplicaLeases.acquire``: the epoch is bumped, the replica holding it is notified, and
  the lock is taken once that replica let it go;
* a session created here, or held again after an in-process move, is locked by the
  background reconciler, which also gives the lock up once no connection of the process
  holds the id (close, detach, idle reap, a takeover, the connection's end);
* a notification that another replica took a session over is handed from the listener
  thread to trio through a bounded memory channel, and the copy is detached at once with
  close semantics through the table's ``surrender`` (its running turn cancelled, its
  client answered ``SessionTakenOver`` from its next request on).

Every database call runs on a worker thread. When the process ends, the lock connection is
closed, which frees every lock it held; a process that dies frees them the same way.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import trio

from acp_server.errors import StoreError
from acp_server.protocol.services.ownership import LiveSessions
from acp_server.storage import AsyncSessionStore, StoreUnavailable, UnknownSession
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.postgres.leases import SessionLeases

logger = logging.getLogger(__name__)

TAKEOVER_NOTICE_BUFFER: Final = 64
"""Takeover notifications waiting for the event loop; past it the listener thread waits."""


class ReplicaLeases:
    """The process's session locks in a shared store (``SessionLocks`` of
    protocol/services/ownership.py). Build it with ``open_replica_leases``."""

    def __init__(self, live: LiveSessions) -> None:
        self._live = live
        self._leases: SessionLeases | None = None
        self._changed: dict[str, None] = {}  # ids to reconcile, in order
        self._wake = trio.Event()
        self._notices_send, self._notices = trio.open_memory_channel[tuple[str, int]](
            TAKEOVER_NOTICE_BUFFER
        )
        self._trio_token = trio.lowlevel.current_trio_token()

    @property
    def leases(self) -> SessionLeases:
        assert self._leases is not None, "used outside open_replica_leases"
        return self._leases

    async def connect(self, backend: PostgresSessionStore) -> None:
        """Open the lock and listening connections (on a worker thread); raises
        ``StoreUnavailable`` when they cannot be opened."""
        try:
            self._leases = await trio.to_thread.run_sync(SessionLeases, backend, self.on_lost)
        except StoreError as exc:
            raise StoreUnavailable(f"session locks unavailable: {exc}") from exc

    async def close(self) -> None:
        """Free every lock (closing the lock connection), even when cancelled."""
        self._notices_send.close()
        if self._leases is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._leases.close)

    def changed(self, session_id: str) -> None:
        self._changed[session_id] = None
        self._wake.set()

    async def acquire(self, session_id: str) -> int | None:
        try:
            return await trio.to_thread.run_sync(self.leases.acquire, session_id)
        except UnknownSession:
            return None

    def on_lost(self, session_id: str, epoch: int) -> None:
        """The listener thread heard that another replica claimed ``session_id``."""
        try:
            trio.from_thread.run(
                self._notices_send.send, (session_id, epoch), trio_token=self._trio_token
            )
        except (trio.RunFinishedError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the process is ending; its locks go with its connection

    async def _reconcile(self) -> None:
        """Hold the lock of every id ``LiveSessions`` holds, and only those."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while self._changed:
                session_id = next(iter(self._changed))
                del self._changed[session_id]
                wanted = self._live.holder(session_id) is not None
                try:
                    if wanted:
                        await trio.to_thread.run_sync(self.leases.hold, session_id)
                    else:
                        await trio.to_thread.run_sync(self.leases.release, session_id)
                except StoreError as exc:
                    # The epoch still fences the session; a takeover of it elsewhere
                    # only waits out DEFAULT_TAKEOVER_WAIT_SECS.
                    logger.warning("session %s: its lock could not be updated: %s", session_id, exc)

    async def _detach_lost(self, nursery: trio.Nursery) -> None:
        async for session_id, epoch in self._notices:
            nursery.start_soon(self._detach, session_id, epoch)

    async def _detach(self, session_id: str, epoch: int) -> None:
        """Detach this process's copy of ``session_id`` if it is older than ``epoch`` (a
        restore still running here is waited for: it may have claimed a later epoch)."""
        try:
            await self._detach_older(session_id, epoch)
        except Exception:
            # The copy stays fenced by its epoch: its next prompt is refused.
            logger.exception("session %s: detaching the copy taken elsewhere failed", session_id)

    async def _detach_older(self, session_id: str, epoch: int) -> None:
        while True:
            table = self._live.holder(session_id)
            if table is None:
                return
            session = table.get(session_id)
            if session is None:
                restoring = table.restore_in_progress(session_id)
                if restoring is None:
                    return  # closing: it leaves anyway
                await restoring.wait()
                continue
            if session.epoch is not None and session.epoch >= epoch:
                return
            logger.info("session %s taken over by another replica; detaching it", session_id)
            await table.surrender(session_id)
            return

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._reconcile)
            nursery.start_soon(self._detach_lost, nursery)
            task_status.started()


@asynccontextmanager
async def open_replica_leases(
    live: LiveSessions, store: AsyncSessionStore | None
) -> AsyncIterator[ReplicaLeases]:
    """Lock the process's live sessions in its PostgreSQL store while the body runs; the
    locks are freed on the way out (even when cancelled)."""
    if store is None or not isinstance(store.sync, PostgresSessionStore):
        raise TypeError("session locks need a PostgreSQL session store")
    keeper = ReplicaLeases(live)
    try:
        await keeper.connect(store.sync)
        async with trio.open_nursery() as nursery:
            await nursery.start(keeper.run)
            live.locks = keeper
            try:
                yield keeper
            finally:
                live.locks = None
                nursery.cancel_scope.cancel()
    finally:
        await keeper.close()
