"""``SessionStore``: the session store in one SQLite file, synchronous and thread-safe.

The ZeroClaw ACP documentation, "Session persistence": every completed turn is written in
one atomic transaction, a session survives process restarts, and a file that cannot be
created or opened is reported (``StoreUnavailable``, the server then keeps sessions in
memory) without ever being deleted. The statements are the ones both backends share
(storage/sql_store.py); this module runs them on SQLite.

Concurrency: WAL lets readers run beside one writer; every write is ``BEGIN IMMEDIATE``
(take the write lock up front, so a transaction never has to upgrade and fail half-way)
under SQLite's busy timeout, and is retried as a whole on SQLITE_BUSY until a bounded
deadline, so two processes sharing one file (two editor windows) never see "database is
locked". Reads are one deferred transaction each, so every SELECT of a load sees the same
snapshot.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeVar

from acp_server.procfs import processes_holding
from acp_server.storage.codec import EncodedMessage
from acp_server.storage.dialect import SQLITE
from acp_server.storage.records import StoreError, StoreUnavailable
from acp_server.storage.sql_store import SqlSessionStore
from acp_server.storage.sqlite.schema import MIGRATIONS, SCHEMA_VERSION

logger = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
"""How long SQLite itself waits for another connection's lock."""

DEFAULT_LOCK_RETRY_DEADLINE_SECS: Final = 5.0
"""Total time a transaction is retried on SQLITE_BUSY before it is reported as a failure.
Store calls run one at a time, so this also bounds how long a ``session/new`` queued behind
a turn's commit can wait; a turn that still cannot be written is kept and written with the
session's next commit (storage/async_store.py), so nothing is lost by giving up."""

DEFAULT_OPEN_LOCK_DEADLINE_SECS: Final = 2.0
"""How long opening waits for a lock another process holds before giving up (the server then
runs with in-memory sessions rather than keep a client's ``initialize`` waiting)."""

DEFAULT_CREATE_LOCK_DEADLINE_SECS: Final = 2.0
"""How long ``create_session`` waits for a lock (a client's ``session/new`` waits on it)."""

_RETRY_INITIAL_DELAY_SECS: Final = 0.002
_RETRY_MAX_DELAY_SECS: Final = 0.1
_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6

T = TypeVar("T")


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SessionStore(SqlSessionStore[sqlite3.Connection]):
    """Synchronous access to one session database. Thread-safe (calls are serialized)."""

    dialect = SQLITE

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: Path,
        *,
        lock_retry_deadline_secs: float = DEFAULT_LOCK_RETRY_DEADLINE_SECS,
    ) -> None:
        """Use ``SessionStore.open``; this wraps an already configured connection."""
        self._conn: sqlite3.Connection | None = conn
        self.path = path
        self._lock = threading.Lock()
        self._lock_retry_deadline = lock_retry_deadline_secs
        self._busy_timeout_ms = DEFAULT_BUSY_TIMEOUT_MS

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        lock_retry_deadline_secs: float = DEFAULT_LOCK_RETRY_DEADLINE_SECS,
        open_lock_deadline_secs: float = DEFAULT_OPEN_LOCK_DEADLINE_SECS,
    ) -> SessionStore:
        """Open (creating if needed) and migrate the database at ``path``.

        Raises ``StoreUnavailable`` when the directory or file cannot be created, opened or
        written, is not a SQLite database, fails SQLite's ``quick_check``, was created by a
        newer schema, or stays locked by another process for ``open_lock_deadline_secs``
        (the message names the processes that have it open, when they can be known). The
        file itself is never deleted, truncated or replaced, and a file that fails the
        check is not written to at all.
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"Cannot create the session store directory {path.parent}: {exc.strerror or exc}"
            ) from exc
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            # SQLite would silently open a read-only file read-only; sessions must be writable.
            raise StoreUnavailable(
                f"The session store {path} is not readable and writable by this user"
            )
        try:
            conn = sqlite3.connect(
                path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # AsyncSessionStore hops worker threads
            )
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"Cannot open the session store {path}: {exc}") from exc
        store = cls(conn, path, lock_retry_deadline_secs=open_lock_deadline_secs)
        store._busy_timeout_ms = busy_timeout_ms
        try:
            # Opening waits for another process's lock no longer than its own deadline.
            store._configure(min(busy_timeout_ms, int(open_lock_deadline_secs * 1000)))
            store._write(store._migrate)
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        except StoreUnavailable:
            conn.close()
            raise
        except (StoreError, sqlite3.Error) as exc:
            conn.close()
            cause = exc.__cause__ if isinstance(exc, StoreError) else exc
            if isinstance(cause, sqlite3.OperationalError) and _is_busy(cause):
                raise StoreUnavailable(
                    f"The session store {path} is locked by another process{lock_holder_note(path)}"
                ) from exc
            raise StoreUnavailable(f"Cannot use the session store {path}: {exc}") from exc
        store._lock_retry_deadline = lock_retry_deadline_secs
        return store

    # -- setup

    def _configure(self, busy_timeout_ms: int) -> None:
        conn = self._connection()
        # Busy timeout first: switching to WAL may itself wait for another process.
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # Before anything that writes (switching to WAL rewrites the header): a file from a
        # newer schema, or one that is not a database at all, must stay byte-for-byte intact.
        version = self._retry_busy(lambda: int(conn.execute("PRAGMA user_version").fetchone()[0]))
        self._check_version(version)
        self._check_integrity()

        def set_wal() -> str:
            row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(row[0]).lower() if row else ""

        mode = self._retry_busy(set_wal)
        if mode != "wal":
            # Some filesystems (network mounts) cannot share WAL memory. A rollback journal
            # is slower and blocks readers during commits, but is just as safe: keep going.
            logger.warning(
                "Session store %s cannot use WAL on this filesystem; using journal mode %s",
                self.path,
                mode or "unknown",
            )
        # NORMAL in WAL mode: a process crash never loses a committed turn; only an OS crash
        # or power cut can lose the last few commits, never corrupt the file.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA temp_store = MEMORY")

    def _check_integrity(self) -> None:
        """``PRAGMA quick_check`` before anything is written: writing to a damaged file can
        spread the damage, so such a store is refused and left as it is."""
        conn = self._connection()
        try:
            rows = self._retry_busy(lambda: conn.execute("PRAGMA quick_check(1)").fetchall())
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise
            raise StoreUnavailable(
                f"The session store {self.path} is damaged ({exc}); it is left untouched"
            ) from exc
        verdict = str(rows[0][0]) if rows else "no answer"
        if verdict.lower() != "ok":
            raise StoreUnavailable(
                f"The session store {self.path} is damaged (quick_check: {verdict});"
                " it is left untouched"
            )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        self._check_version(version)  # again: another process may have migrated meanwhile
        for step in range(version, SCHEMA_VERSION):
            MIGRATIONS[step](conn)
            logger.debug("Session store %s migrated to schema %d", self.path, step + 1)
        # Always written, even when nothing migrated: proves the file is writable now
        # rather than at the first completed turn.
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreUnavailable(
                f"The session store {self.path} has schema version {version}, newer than this "
                f"zeroclaw understands ({SCHEMA_VERSION}); upgrade zeroclaw to use it"
            )

    # -- transaction plumbing

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("The session store is closed")
        return self._conn

    def _retry_busy(self, operation: Callable[[], T], within: float | None = None) -> T:
        deadline = time.monotonic() + (self._lock_retry_deadline if within is None else within)
        delay = _RETRY_INITIAL_DELAY_SECS
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                logger.debug("Session store busy, retrying: %s", exc)
                time.sleep(delay)  # on a worker thread: never the event loop
                delay = min(delay * 2, _RETRY_MAX_DELAY_SECS)

    def _transaction(
        self, body: Callable[[sqlite3.Connection], T], begin: str, within: float | None = None
    ) -> T:
        """Run ``body`` in one transaction, retried on SQLITE_BUSY for ``within`` seconds
        (default: the store's lock deadline; a shorter one also shortens SQLite's own
        busy wait for this call)."""
        conn = self._connection()

        def attempt() -> T:
            conn.execute(begin)
            try:
                result = body(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error as rollback_error:
                        # SQLite rolls back on its own when it can; report the first error.
                        logger.warning("Session store rollback failed: %s", rollback_error)
                raise
            return result

        short_wait = within is not None and within * 1000 < self._busy_timeout_ms
        with self._lock:
            try:
                if short_wait:
                    assert within is not None
                    conn.execute(f"PRAGMA busy_timeout = {int(within * 1000)}")
                try:
                    return self._retry_busy(attempt, within)
                finally:
                    if short_wait:
                        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            except StoreError:
                raise
            except sqlite3.Error as exc:
                note = (
                    lock_holder_note(self.path)
                    if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc)
                    else ""
                )
                raise StoreError(f"Session store error: {exc}{note}") from exc

    def _write(self, body: Callable[[sqlite3.Connection], T], within: float | None = None) -> T:
        # IMMEDIATE takes the write lock at BEGIN, so a writer waits (busy timeout + retry)
        # up front instead of failing at its first INSERT with SQLITE_BUSY_SNAPSHOT.
        return self._transaction(body, "BEGIN IMMEDIATE", within)

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # One deferred read transaction: every SELECT of a load sees the same snapshot.
        return self._transaction(body, "BEGIN")

    # -- what the shared statements need (storage/sql_store.py)

    @property
    def location(self) -> str:
        return str(self.path)

    def _write_waited_on(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # A client's session/new waits on this insert: give up on a busy file sooner.
        return self._write(body, within=DEFAULT_CREATE_LOCK_DEADLINE_SECS)

    def _read_statement(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # One indexed read in SQLite's own implicit transaction: the cheapest read there is.
        conn = self._connection()
        with self._lock:
            try:
                return self._retry_busy(lambda: body(conn))
            except sqlite3.Error as exc:
                raise StoreError(f"Session store error: {exc}") from exc

    def _insert_messages(
        self,
        conn: sqlite3.Connection,
        session_row_id: int,
        turn_seq: int,
        messages: Sequence[EncodedMessage],
        now: str,
    ) -> None:
        """One INSERT per message, its tool rows keyed by the row id SQLite just gave it."""
        for message in messages:
            cursor = conn.execute(
                "INSERT INTO acp_messages"
                " (session_id, role, content, reasoning_content, created_at, turn_seq)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_row_id, message.role, message.content, message.reasoning, now, turn_seq),
            )
            if message.tool_rows:
                message_id = cursor.lastrowid
                conn.executemany(
                    "INSERT INTO acp_tool_calls"
                    " (message_id, tool_call_id, tool_name, event_kind, payload, ok,"
                    " record_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(message_id, *tool_row, now) for tool_row in message.tool_rows],
                )

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def lock_holder_note(path: Path) -> str:
    """A clause naming the processes that may hold the lock of the database at ``path``
    (those with it, or its WAL, shared-memory or journal file, open), or "" when none can
    be known."""
    resolved = str(path.resolve())
    sidecars = ("", "-wal", "-shm", "-journal")
    holders = processes_holding(f"{resolved}{suffix}" for suffix in sidecars)
    return f": open in {', '.join(holders)}" if holders else ""
