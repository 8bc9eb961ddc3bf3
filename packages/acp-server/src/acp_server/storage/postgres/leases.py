"""One live copy of a session across replicas sharing a PostgreSQL store.

A replica that makes a session live calls ``SessionLeases.acquire``: it bumps the session's
fencing epoch (``PostgresSessionStore.claim_session``), announces the takeover with
``NOTIFY zeroclaw_session_taken`` (payload: replica, epoch, session id), and takes a
session-level advisory lock keyed by the session's row id on a connection kept for locks
alone. The replica that held the session at an older epoch hears the notification on its
listening connection, gives the lock up and calls its ``on_lost`` callback (detach the
copy: its commits would be refused anyway, their epoch is old). A session this replica
created takes its lock with ``hold`` (no takeover: nobody else can hold a new session).
A replica that died holds nothing: PostgreSQL frees a session-level lock when the
connection that took it closes, so the next acquire gets it at once.

A listening connection that breaks is opened again; the sessions whose epoch moved on
meanwhile (a notification missed) are then reported lost as if notified. A lock
connection that breaks has lost its locks (PostgreSQL freed them): the next lock call
opens a new one, and the sessions held keep their epoch, which still fences them.

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
from dataclasses import dataclass
from typing import Final

import psycopg

from acp_server.storage.postgres.schema import Connection
from acp_server.storage.postgres.store import PostgresSessionStore
from acp_server.storage.records import SessionFenced, StoreError, UnknownSession

logger = logging.getLogger(__name__)

TAKEOVER_CHANNEL: Final = "zeroclaw_session_taken"
DEFAULT_TAKEOVER_WAIT_SECS: Final = 5.0
"""How long ``acquire`` waits for the previous holder to give its lock up. Past it the
session is still taken (the epoch already fences the old copy's commits)."""
_LISTEN_POLL_SECS: Final = 0.5
_LOCK_RETRY_SECS: Final = 0.01
_RELISTEN_SECS: Final = 1.0


@dataclass
class _Held:
    key: int
    """The advisory lock key (the session's row id)."""
    epoch: int
    """The fencing epoch this replica holds the session at."""
    locked: bool
    """Whether the lock is held (False: the previous holder kept it past the wait)."""


class SessionLeases:
    """The sessions this replica holds live, and the notifications that take them away.

    ``on_lost(session_id, epoch)`` runs on the listener thread when another replica took
    one of our sessions over at ``epoch``; hand it to the event loop
    (``trio.from_thread``) from there. Every other method blocks: call it on a worker
    thread."""

    def __init__(self, store: PostgresSessionStore, on_lost: Callable[[str, int], None]) -> None:
        self.store = store
        self.replica = uuid.uuid4().hex
        self._on_lost = on_lost
        self._lock_conn: Connection = store.connect()
        self._listen_conn: Connection = self._listening_connection()
        self._held: dict[str, _Held] = {}
        self._guard = threading.Lock()
        self._stopping = threading.Event()
        self._listener = threading.Thread(
            target=self._listen, name="zeroclaw-session-leases", daemon=True
        )
        self._listener.start()

    def _listening_connection(self) -> Connection:
        return self.store.listen(TAKEOVER_CHANNEL, "Session takeover notifications unavailable")

    def held(self) -> set[str]:
        """The sessions whose lock this replica holds."""
        with self._guard:
            return {session_id for session_id, held in self._held.items() if held.locked}

    def acquire(self, session_id: str, *, wait_secs: float = DEFAULT_TAKEOVER_WAIT_SECS) -> int:
        """Make ``session_id`` live here; its new fencing epoch (pass it to every
        ``append_turn``).

        Raises:
            UnknownSession: it is not stored.
            SessionFenced: another replica claimed it again before this one got its lock.
            StoreError: the database could not be used.
        """
        key = self.store.session_row_id(session_id)
        epoch = self.store.claim_session(session_id) if key is not None else None
        if key is None or epoch is None:
            raise UnknownSession(f"Session not found in the store: {session_id}")
        self.store.transaction(
            lambda conn: conn.execute(
                "SELECT pg_notify(%s, %s)",
                (TAKEOVER_CHANNEL, f"{self.replica} {epoch} {session_id}"),
            )
        )
        deadline = time.monotonic() + wait_secs
        with self._guard:
            while True:
                held = self._held.get(session_id)
                if held is not None and held.locked:
                    held.epoch = epoch
                    break
                try:
                    locked = self._try_lock(key)
                except StoreError as exc:  # e.g. the server's lock table is full
                    logger.warning("session %s: taken over without its lock: %s", session_id, exc)
                    self._held[session_id] = _Held(key, epoch, locked=False)
                    break
                if locked:
                    self._held[session_id] = _Held(key, epoch, locked=True)
                    break
                if time.monotonic() >= deadline:
                    logger.warning(
                        "session %s: the previous holder kept its lock; taken over by epoch %d",
                        session_id,
                        epoch,
                    )
                    self._held[session_id] = _Held(key, epoch, locked=False)
                    break
                self._guard.release()
                try:
                    time.sleep(_LOCK_RETRY_SECS)  # a worker thread, never the event loop
                finally:
                    self._guard.acquire()
        current = self.store.current_epoch(session_id)
        if current != epoch:  # claimed again elsewhere while this replica waited
            self.release(session_id)
            raise SessionFenced(session_id, epoch=epoch, current=current or 0)
        return epoch

    def hold(self, session_id: str) -> bool:
        """Take the lock of a session this replica made live without a takeover (one it
        just created); False when another replica holds it or it is not stored."""
        with self._guard:
            held = self._held.get(session_id)
            if held is not None and held.locked:
                return True
        key = self.store.session_row_id(session_id)
        epoch = self.store.current_epoch(session_id) if key is not None else None
        if key is None or epoch is None:
            return False
        with self._guard:
            held = self._held.get(session_id)
            if held is not None and held.locked:
                return True
            if not self._try_lock(key):
                return False
            self._held[session_id] = _Held(key, epoch, locked=True)
            return True

    def release(self, session_id: str) -> None:
        """The session is no longer live here (closed, or lost to another replica)."""
        with self._guard:
            held = self._held.pop(session_id, None)
            if held is not None and held.locked:
                self._unlock(held.key)

    def _lock_connection(self) -> Connection:
        conn = self._lock_conn
        if conn.closed or conn.broken:
            conn.close()
            for held in self._held.values():
                held.locked = False  # PostgreSQL freed them with the connection
            self._lock_conn = conn = self.store.connect()
        return conn

    def _try_lock(self, key: int) -> bool:
        try:
            row = (
                self._lock_connection()
                .execute("SELECT pg_try_advisory_lock(%s)", (key,))
                .fetchone()
            )
        except psycopg.Error as exc:
            raise StoreError(f"Session lock failed ({self.store.location}): {exc}") from exc
        return bool(row and row[0])

    def _unlock(self, key: int) -> None:
        try:
            self._lock_connection().execute("SELECT pg_advisory_unlock(%s)", (key,))
        except (psycopg.Error, StoreError) as exc:
            logger.warning("session lock %d not released: %s", key, exc)

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                for note in self._listen_conn.notifies(timeout=_LISTEN_POLL_SECS):
                    replica, _, rest = note.payload.partition(" ")
                    epoch, _, session_id = rest.partition(" ")
                    if replica != self.replica and epoch.isdigit():
                        self._taken_elsewhere(session_id, int(epoch))
            except psycopg.Error as exc:
                if self._stopping.is_set():
                    return
                logger.warning("session takeover notifications interrupted: %s", exc)
                self._listen_again()

    def _listen_again(self) -> None:
        """Open the listening connection again, then report the sessions claimed
        elsewhere meanwhile (their notifications were missed)."""
        self._listen_conn.close()
        while not self._stopping.wait(_RELISTEN_SECS):
            try:
                self._listen_conn = self._listening_connection()
                with self._guard:
                    held = {session_id: entry.epoch for session_id, entry in self._held.items()}
                for session_id, epoch in held.items():
                    current = self.store.current_epoch(session_id)
                    if current is not None and current > epoch:
                        self._taken_elsewhere(session_id, current)
            except StoreError as exc:
                logger.warning("session takeover notifications still unavailable: %s", exc)
                continue
            logger.info("session takeover notifications resumed")
            return

    def _taken_elsewhere(self, session_id: str, epoch: int) -> None:
        with self._guard:
            held = self._held.get(session_id)
            if held is None or held.epoch >= epoch:
                return  # not ours, or ours again since (a later claim of this replica)
            del self._held[session_id]
            if held.locked:
                self._unlock(held.key)
        logger.info("session %s was taken over by another replica (epoch %d)", session_id, epoch)
        try:
            self._on_lost(session_id, epoch)
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
