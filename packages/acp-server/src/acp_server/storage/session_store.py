"""``SessionStore``: synchronous, thread-safe access to one session database.

Every write is ``BEGIN IMMEDIATE`` under SQLite's busy timeout and is retried as a whole on
SQLITE_BUSY until a bounded deadline; reads are one deferred transaction each, so every
SELECT of a load sees the same snapshot.
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

from acp_server.agent.conversation import CompletedTurn
from acp_server.storage.codec import (
    decode_messages,
    encode_message,
    now_text,
    parse_time,
    plan_from_json,
    plan_to_json,
    restore_window,
)
from acp_server.storage.lock_holders import lock_holder_note
from acp_server.storage.migrations import MIGRATIONS, SCHEMA_VERSION
from acp_server.storage.records import (
    DuplicateSession,
    SessionFenced,
    StoredSession,
    StoredSessionInfo,
    StoreError,
    StoreUnavailable,
    UnknownSession,
)
from acp_server.storage.session_list import (
    NEWEST_FIRST,
    SESSION_INFO_SELECT,
    SessionPage,
    read_page,
    session_info,
)
from acp_server.storage.sqlite_extras import SqliteSessionExtras

logger = logging.getLogger(__name__)

DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
"""How long SQLite itself waits for another connection's lock (the reference uses 5 s)."""

DEFAULT_LOCK_RETRY_DEADLINE_SECS: Final = 5.0
"""Total time a transaction is retried on SQLITE_BUSY before it is reported as a failure.
Store calls run one at a time, so this also bounds how long a ``session/new`` queued behind
a turn's commit can wait; a turn that still cannot be written is kept and written with the
session's next commit (acp_server/storage/async_store.py), so nothing is lost by giving up."""

DEFAULT_OPEN_LOCK_DEADLINE_SECS: Final = 2.0
"""How long opening waits for a lock another process holds before giving up (the server then
runs with in-memory sessions rather than keep a client's ``initialize`` waiting)."""

DEFAULT_CREATE_LOCK_DEADLINE_SECS: Final = 2.0
"""How long ``create_session`` waits for a lock (a client's ``session/new`` waits on it)."""

DEFAULT_MAX_RESTORED_MESSAGES: Final = 20_000
"""Most messages ``load_session`` returns. Older whole turns beyond it stay in the store but
are not restored, so a restore's memory and replay time stay bounded however long a
session grew; the caller learns how many were left out (``StoredSession.dropped_messages``)."""


CREATOR_EPOCH: Final = 1
"""The fencing epoch a new session's row starts at, and its creator holds."""

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


class SessionStore(SqliteSessionExtras):
    """Synchronous access to one session database. Thread-safe (calls are serialized)."""

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

    # -- API

    def create_session(self, session_id: str, agent_alias: str, workspace_dir: str) -> None:
        """Store a new session; its creator holds it at ``CREATOR_EPOCH``."""
        now = now_text()

        def insert(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir,"
                    " created_at, last_activity, owner_epoch) VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, agent_alias, workspace_dir, now, now, CREATOR_EPOCH),
                )
            except sqlite3.IntegrityError as exc:
                raise DuplicateSession(f"Session {session_id} is already stored") from exc

        self._write(insert, within=DEFAULT_CREATE_LOCK_DEADLINE_SECS)

    def claim_session(self, session_id: str) -> int | None:
        """Make the caller the session's one live copy: bump its fencing epoch, in one
        write transaction, and return the new value (None when there is no such session).
        Commits carrying an earlier epoch are refused from now on (``SessionFenced``). A
        claim always succeeds, so a holder that died never keeps a session from loading."""

        def bump(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(
                "UPDATE acp_sessions SET owner_epoch = owner_epoch + 1"
                " WHERE session_uuid = ? RETURNING owner_epoch",
                (session_id,),
            ).fetchall()
            return int(row[0][0]) if row else None

        return self._write(bump)

    def current_epoch(self, session_id: str) -> int | None:
        """The session's fencing epoch now (None when there is no such session): one
        indexed read in SQLite's own implicit transaction."""
        conn = self._connection()

        def read() -> int | None:
            row = conn.execute(
                "SELECT owner_epoch FROM acp_sessions WHERE session_uuid = ?", (session_id,)
            ).fetchone()
            return int(row[0]) if row is not None else None

        with self._lock:
            try:
                return self._retry_busy(read)
            except sqlite3.Error as exc:
                raise StoreError(f"Session store error: {exc}") from exc

    def append_turn(
        self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
    ) -> None:
        """Write one completed turn in one transaction (all or nothing).

        ``turn.messages`` is everything the turn added to the history, the user's message
        first. With ``epoch``, the session must still be held at that epoch (see
        ``claim_session``). Raises ``UnknownSession`` or ``SessionFenced`` (nothing
        written) or ``StoreError``; after any failure the database holds exactly what it
        held before the call.
        """
        self.append_turns(session_id, (turn,), epoch=epoch)

    def append_turns(
        self, session_id: str, turns: Sequence[CompletedTurn], *, epoch: int | None = None
    ) -> None:
        """Write ``turns`` in order, in one transaction (all or nothing), as ``append_turn``."""
        writes = [self._turn_writer(session_id, turn, epoch) for turn in turns]

        def write_all(conn: sqlite3.Connection) -> None:
            for write in writes:
                write(conn)

        self._write(write_all)

    def _turn_writer(
        self, session_id: str, turn: CompletedTurn, epoch: int | None
    ) -> Callable[[sqlite3.Connection], None]:
        """The statements that write ``turn`` (encoded now, before any transaction)."""
        encoded = [encode_message(message) for message in turn.messages]
        plan_json = plan_to_json(turn.plan) if turn.plan is not None else None
        tokens = turn.usage.total_tokens
        now = now_text()

        def write(conn: sqlite3.Connection) -> None:
            # One statement finds the session, checks its epoch and counts the turn (the
            # transaction makes them one step); the turn's rows carry the number it had.
            row = conn.execute(
                "UPDATE acp_sessions SET turn_count = turn_count + 1, last_activity = ?,"
                " token_count = token_count + ?, plan_json = coalesce(?, plan_json)"
                " WHERE session_uuid = ? AND (?5 IS NULL OR owner_epoch = ?5)"
                " RETURNING id, turn_count - 1",
                (now, tokens, plan_json, session_id, epoch),
            ).fetchall()  # all: the statement is finished before the next one starts
            if not row:
                _raise_not_held(conn, session_id, epoch)
            session_row_id, turn_seq = int(row[0][0]), int(row[0][1])
            for message in encoded:
                cursor = conn.execute(
                    "INSERT INTO acp_messages"
                    " (session_id, role, content, reasoning_content, created_at, turn_seq)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        session_row_id,
                        message.role,
                        message.content,
                        message.reasoning,
                        now,
                        turn_seq,
                    ),
                )
                if message.tool_rows:
                    message_id = cursor.lastrowid
                    conn.executemany(
                        "INSERT INTO acp_tool_calls"
                        " (message_id, tool_call_id, tool_name, event_kind, payload, ok,"
                        " record_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        [(message_id, *tool_row, now) for tool_row in message.tool_rows],
                    )

        return write

    def load_session(
        self, session_id: str, *, max_messages: int | None = DEFAULT_MAX_RESTORED_MESSAGES
    ) -> StoredSession | None:
        """The stored session and its conversation, or None when no such session.

        With ``max_messages``, only the newest whole turns that fit are returned (always at
        least the newest turn); ``dropped_messages`` says how many older ones were left out.
        """

        def read(conn: sqlite3.Connection) -> StoredSession | None:
            row = conn.execute(
                "SELECT id, agent_alias, workspace_dir, created_at, last_activity, plan_json,"
                " token_count, turn_count, title FROM acp_sessions WHERE session_uuid = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            session_row_id = row[0]
            total, first_turn = _restore_window(conn, session_row_id, max_messages)
            # Rows the reference wrote have no turn_seq: they are the oldest turns, and are
            # kept only when everything is (first_turn None).
            window = "" if first_turn is None else " AND m.turn_seq >= ?"
            params = (session_row_id,) if first_turn is None else (session_row_id, first_turn)
            message_rows = conn.execute(
                "SELECT m.id, m.role, m.content, m.reasoning_content FROM acp_messages AS m"
                f" WHERE m.session_id = ?{window} ORDER BY m.id",
                params,
            ).fetchall()
            tool_rows = conn.execute(
                "SELECT t.message_id, t.tool_call_id, t.tool_name, t.event_kind, t.payload,"
                " t.ok, t.record_json"
                " FROM acp_tool_calls AS t JOIN acp_messages AS m ON m.id = t.message_id"
                f" WHERE m.session_id = ?{window} ORDER BY t.id",
                params,
            ).fetchall()
            messages = decode_messages(message_rows, tool_rows)
            plan = plan_from_json(row[5], session_id) if row[5] is not None else None
            info = StoredSessionInfo(
                session_id=session_id,
                agent_alias=row[1],
                workspace_dir=row[2],
                created_at=parse_time(row[3]),
                last_activity=parse_time(row[4]),
                message_count=total,
                token_count=int(row[6]),
                turn_count=int(row[7]),
                title=row[8],
            )
            return StoredSession(
                info=info,
                messages=messages,
                plan=plan,
                dropped_messages=total - len(message_rows),
            )

        return self._read(read)

    def touch(self, session_id: str) -> None:
        """Record activity on a session without a turn (inbound session/update)."""
        now = now_text()

        def update(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE acp_sessions SET last_activity = ? WHERE session_uuid = ?",
                (now, session_id),
            )
            if cursor.rowcount == 0:
                raise UnknownSession(f"Session not found in the store: {session_id}")

        self._write(update)

    def list_sessions(self) -> list[StoredSessionInfo]:
        """Every stored session, most recently active first."""

        def read(conn: sqlite3.Connection) -> list[StoredSessionInfo]:
            rows = conn.execute(f"{SESSION_INFO_SELECT} {NEWEST_FIRST}").fetchall()
            return [session_info(row) for row in rows]

        return self._read(read)

    def list_page(self, *, workspace_dir: str | None, cursor: str | None) -> SessionPage:
        """One ``session/list`` page (session_list.py); raises ``BadCursor``."""
        return self._read(lambda conn: read_page(conn, workspace_dir=workspace_dir, cursor=cursor))

    def set_title(self, session_id: str, title: str) -> bool:
        """Name a session that has no title yet; False when it had one (or is not stored)."""

        def update(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE acp_sessions SET title = ? WHERE session_uuid = ? AND title IS NULL",
                (title, session_id),
            )
            return cursor.rowcount > 0

        return self._write(update)

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its conversation; False when there was no such session."""

        def delete(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute("DELETE FROM acp_sessions WHERE session_uuid = ?", (session_id,))
            return cursor.rowcount > 0

        return self._write(delete)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _raise_not_held(conn: sqlite3.Connection, session_id: str, epoch: int | None) -> None:
    """A turn's UPDATE matched no row: the session is gone, or held at another epoch."""
    row = conn.execute(
        "SELECT owner_epoch FROM acp_sessions WHERE session_uuid = ?", (session_id,)
    ).fetchone()
    if row is None or epoch is None:
        raise UnknownSession(f"Session not found in the store: {session_id}")
    raise SessionFenced(session_id, epoch=epoch, current=int(row[0]))


def _restore_window(
    conn: sqlite3.Connection, session_row_id: int, max_messages: int | None
) -> tuple[int, int | None]:
    """(stored message count, oldest turn_seq to restore or None for everything)."""
    per_turn = conn.execute(
        "SELECT turn_seq, count(*) FROM acp_messages WHERE session_id = ?"
        " GROUP BY turn_seq ORDER BY turn_seq IS NULL, turn_seq DESC",
        (session_row_id,),
    ).fetchall()
    return restore_window(per_turn, max_messages)
