"""One live copy of a session across replicas sharing a PostgreSQL store.

A replica that makes a session live calls ``SessionLeases.acquire``: it bumps the session's
fencing epoch (``PostgresSessionStore.claim_session``), announces the takeover with
``NOTIFY zeroclaw_session_taken``, and takes a session-level advisory lock keyed by the
session's row id on a connection kept for locks alone. The replica that held the session
hears the notification on its listening connection, calls its ``on_lost`` callback (detach
the copy: its commits would be refused anyway, their epoch is old) and gives the lock up.
A replica that died holds nothing: PostgreSQL frees a session-level lock when the
connection that took it closes, so the next acquire gets it at once.

Each held lock takes a slot of the server's shared lock table, which has room for
``max_locks_per_transaction × (max_connections + max_prepared_transactions)`` locks
(64 × 200 by default, about 12,800 for the whole cluster): raise
``max_locks_per_transaction`` when the replicas together keep more sessions live.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Final

import psycopg

from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.postgres_schema import Connection
from acp_server.storage.records import StoreError, UnknownSession

logger = logging.getLogger(__name__)

TAKEOVER_CHANNEL: Final = "zeroclaw_session_taken"
DEFAULT_TAKEOVER_WAIT_SECS: Final = 5.0
"""How long ``acquire`` waits for the previous holder to give its lock up. Past it the
session is still taken (the epoch already fences the old copy's commits)."""
_LISTEN_POLL_SECS: Final = 0.5
_LOCK_RETRY_SECS: Final = 0.01


class SessionLeases:
    """The sessions this replica holds live, and the notifications that take them away.

    ``on_lost(session_id)`` runs on the listener thread when another replica took one of
    our sessions over; hand it to the event loop (``trio.from_thread``) from there."""

    def __init__(self, store: PostgresSessionStore, on_lost: Callable[[str], None]) -> None:
        self.store = store
        self.replica = uuid.uuid4().hex
        self._on_lost = on_lost
        self._lock_conn: Connection = store.connect()
        self._listen_conn: Connection = store.connect()
        self._listen_conn.execute(f"LISTEN {TAKEOVER_CHANNEL}")
        self._held: dict[str, int] = {}  # session id -> advisory lock key (its row id)
        self._guard = threading.Lock()
        self._stopping = threading.Event()
        self._listener = threading.Thread(
            target=self._listen, name="zeroclaw-session-leases", daemon=True
        )
        self._listener.start()

    def held(self) -> set[str]:
        with self._guard:
            return set(self._held)

    def acquire(self, session_id: str, *, wait_secs: float = DEFAULT_TAKEOVER_WAIT_SECS) -> int:
        """Make ``session_id`` live here; its new fencing epoch (pass it to every
        ``append_turn``). Raises ``UnknownSession`` or ``StoreError``."""
        key = self.store.session_row_id(session_id)
        if key is None:
            raise UnknownSession(f"Session not found in the store: {session_id}")
        epoch = self.store.claim_session(session_id)
        if epoch is None:
            raise UnknownSession(f"Session not found in the store: {session_id}")
        self.store.transaction(
            lambda conn: conn.execute(
                "SELECT pg_notify(%s, %s)", (TAKEOVER_CHANNEL, f"{self.replica} {session_id}")
            )
        )
        deadline = time.monotonic() + wait_secs
        with self._guard:
            if session_id in self._held:
                return epoch
            while not self._try_lock(key):
                if time.monotonic() >= deadline:
                    logger.warning(
                        "session %s: the previous holder kept its lock; taken over by epoch %d",
                        session_id,
                        epoch,
                    )
                    return epoch
                self._guard.release()
                try:
                    time.sleep(_LOCK_RETRY_SECS)  # a worker thread, never the event loop
                finally:
                    self._guard.acquire()
            self._held[session_id] = key
        return epoch

    def release(self, session_id: str) -> None:
        """The session is no longer live here (closed, or lost to another replica)."""
        with self._guard:
            key = self._held.pop(session_id, None)
            if key is not None:
                self._unlock(key)

    def _try_lock(self, key: int) -> bool:
        try:
            row = self._lock_conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        except psycopg.Error as exc:
            raise StoreError(f"Session lock failed ({self.store.location}): {exc}") from exc
        return bool(row and row[0])

    def _unlock(self, key: int) -> None:
        try:
            self._lock_conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        except psycopg.Error as exc:
            logger.warning("session lock %d not released: %s", key, exc)

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                for note in self._listen_conn.notifies(timeout=_LISTEN_POLL_SECS):
                    replica, _, session_id = note.payload.partition(" ")
                    if replica != self.replica:
                        self._taken_elsewhere(session_id)
            except psycopg.Error as exc:
                if self._stopping.is_set():
                    return
                logger.warning("session takeover notifications lost: %s", exc)
                return

    def _taken_elsewhere(self, session_id: str) -> None:
        with self._guard:
            key = self._held.pop(session_id, None)
            if key is None:
                return
            self._unlock(key)
        logger.info("session %s was taken over by another replica", session_id)
        try:
            self._on_lost(session_id)
        except Exception:
            logger.exception("session %s: detaching the lost copy failed", session_id)

    def close(self) -> None:
        """Give every lock up (closing the lock connection frees them all)."""
        self._stopping.set()
        self._listener.join(_LISTEN_POLL_SECS * 4)
        with self._guard:
            self._held.clear()
        self._lock_conn.close()
        self._listen_conn.close()
