"""The SQLite session store (``<workspace_dir>/sessions/acp-sessions.db``).

Seed, "Session persistence": every completed turn is written in one atomic transaction, a
session survives process restarts, and when the file cannot be created or opened the server
falls back to in-memory sessions (``StoreUnavailable``) without ever deleting that file.

``SessionStore`` is plain synchronous code (testable without trio, safe to call from several
threads); ``AsyncSessionStore`` runs every call on its own worker thread, one at a time, so
SQLite never blocks the event loop.

Schema (modelled on the reference, research/zeroclaw.md §3.2, so a database the reference
created is adopted rather than rejected):

* ``acp_sessions``: one row per session (uuid, owner alias, workspace, timestamps,
  ``token_count``, ``plan_json`` = the latest plan, ``turn_count``).
* ``acp_messages``: one row per ``ChatMessage`` in conversation order (``id`` order),
  ``turn_seq`` = the turn that wrote it.
* ``acp_tool_calls``: ``'in'`` rows are the tool calls of a message (``payload`` = arguments
  JSON); an ``'out'`` row carries a tool result (``payload`` = result text) together with its
  ``tool_call_id`` and ``tool_name``. We attach ``'out'`` rows to the ``tool`` message that
  holds the result (so any message order round-trips exactly); the reference attached them to
  the preceding assistant message, and ``load_session`` reads that layout too.

Concurrency: WAL lets readers run beside one writer; every write is ``BEGIN IMMEDIATE``
(take the write lock up front, so a transaction never has to upgrade and fail half-way) under
SQLite's busy timeout, and is retried as a whole on SQLITE_BUSY until a bounded deadline, so
two processes sharing one file (two editor windows) never see "database is locked".
"""

from __future__ import annotations

import functools
import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import trio

from acp_server.agent.conversation import ChatMessage, CompletedTurn, PlanEntry, Role, ToolCall

logger = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 2
"""``PRAGMA user_version`` after every migration in ``MIGRATIONS`` has run."""

DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
"""How long SQLite itself waits for another connection's lock (the reference uses 5 s)."""

DEFAULT_LOCK_RETRY_DEADLINE_SECS: Final = 30.0
"""Total time a transaction is retried on SQLITE_BUSY before it is reported as a failure."""

DEFAULT_MAX_RESTORED_MESSAGES: Final = 20_000
"""Most messages ``load_session`` returns. Older whole turns beyond it stay in the store but
are not restored, so a restore's memory and replay time stay bounded however long a
session grew; the caller learns how many were left out (``StoredSession.dropped_messages``)."""

DEFAULT_MAX_TOOL_ARGUMENTS_BYTES: Final = 16 * 1024 * 1024
"""Largest encoded tool-argument object accepted for storage (a model cannot produce more)."""

DEFAULT_STORE_THREAD_IDLE_SECS: Final = 30.0
"""How long ``AsyncSessionStore``'s worker thread waits for work before it exits (it is
started again by the next call). Its queue needs no limit of its own: each queued call is a
task awaiting it, and the server bounds its tasks (``DEFAULT_MAX_CONCURRENT_REQUESTS``)."""

_RETRY_INITIAL_DELAY_SECS: Final = 0.002
_RETRY_MAX_DELAY_SECS: Final = 0.1
_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_ROLES: Final[dict[str, Role]] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}

T = TypeVar("T")


class StoreError(Exception):
    """A store operation failed (SQLite error, I/O error)."""


class StoreUnavailable(StoreError):
    """The store could not be opened; the server runs with in-memory sessions only."""


class UnknownSession(StoreError):
    """The session id has no row in the store (nothing was written)."""


class DuplicateSession(StoreError):
    """``create_session`` was given an id that is already stored."""


@dataclass(frozen=True, slots=True)
class StoredSessionInfo:
    session_id: str
    agent_alias: str
    workspace_dir: str
    created_at: datetime
    last_activity: datetime
    message_count: int
    token_count: int = 0
    turn_count: int = 0


@dataclass(frozen=True, slots=True)
class StoredSession:
    info: StoredSessionInfo
    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanEntry, ...] | None
    dropped_messages: int = 0
    """Stored messages left out by ``load_session``'s ``max_messages`` (oldest whole turns)."""

    @property
    def kept_turns(self) -> int:
        """Turns in ``messages`` (each turn starts with the user's prompt)."""
        return sum(message.role == "user" for message in self.messages)


# --------------------------------------------------------------------------- schema

# Step 1 is the reference's schema, written so that it is a no-op on a database the
# reference created (tables exist; its older files may still lack killed_at / plan_json,
# which _adopt_reference_columns adds). Step 2 is ours.
_SCHEMA_V1: Final = (
    """
    CREATE TABLE IF NOT EXISTS acp_sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_uuid TEXT NOT NULL UNIQUE,
        agent_alias TEXT NOT NULL,
        workspace_dir TEXT NOT NULL,
        token_count INTEGER NOT NULL DEFAULT 0,
        killed_at TEXT,
        created_at TEXT NOT NULL,
        last_activity TEXT NOT NULL,
        plan_json TEXT
    )
    """,
    "CREATE INDEX IF NOT EXISTS idx_acp_sessions_uuid ON acp_sessions(session_uuid)",
    "CREATE INDEX IF NOT EXISTS idx_acp_sessions_alias ON acp_sessions(agent_alias)",
    """
    CREATE TABLE IF NOT EXISTS acp_messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id INTEGER NOT NULL REFERENCES acp_sessions(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        reasoning_content TEXT,
        created_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS idx_acp_messages_session ON acp_messages(session_id, id)",
    """
    CREATE TABLE IF NOT EXISTS acp_tool_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id INTEGER NOT NULL REFERENCES acp_messages(id) ON DELETE CASCADE,
        tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        event_kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        outcome TEXT,
        created_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS idx_acp_tool_calls_message ON acp_tool_calls(message_id, id)",
    "CREATE INDEX IF NOT EXISTS idx_acp_tool_calls_lookup ON acp_tool_calls(tool_call_id)",
    """
    CREATE TABLE IF NOT EXISTS acp_session_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id INTEGER NOT NULL REFERENCES acp_sessions(id) ON DELETE CASCADE,
        action TEXT NOT NULL,
        outcome TEXT NOT NULL,
        payload TEXT,
        created_at TEXT NOT NULL
    )
    """,
    """
    CREATE INDEX IF NOT EXISTS idx_acp_session_events_session
        ON acp_session_events(session_id, id)
    """,
)

_SCHEMA_V2: Final = (
    # Which turn wrote a message: lets restore trim history by whole turns and lets anyone
    # check that a turn is present in full. NULL on rows the reference wrote.
    "ALTER TABLE acp_messages ADD COLUMN turn_seq INTEGER",
    "ALTER TABLE acp_sessions ADD COLUMN turn_count INTEGER NOT NULL DEFAULT 0",
)


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V1:
        conn.execute(statement)
    _adopt_reference_columns(conn)


def _adopt_reference_columns(conn: sqlite3.Connection) -> None:
    """Older reference databases predate these two columns (it added them the same way)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(acp_sessions)")}
    if "killed_at" not in columns:
        conn.execute("ALTER TABLE acp_sessions ADD COLUMN killed_at TEXT")
    if "plan_json" not in columns:
        conn.execute("ALTER TABLE acp_sessions ADD COLUMN plan_json TEXT")


def _migrate_to_v2(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_V2:
        conn.execute(statement)


MIGRATIONS: Final[tuple[Callable[[sqlite3.Connection], None], ...]] = (
    _migrate_to_v1,
    _migrate_to_v2,
)
"""``MIGRATIONS[n]`` takes a database from ``user_version`` n to n + 1. Append, never edit."""

assert len(MIGRATIONS) == SCHEMA_VERSION


# --------------------------------------------------------------------------- encoding


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def plan_entries_json(plan: Sequence[PlanEntry]) -> list[dict[str, str]]:
    """A plan as stored: the ``plan`` update's ``entries`` objects (``activeForm`` optional)."""
    entries: list[dict[str, str]] = []
    for entry in plan:
        item = {"content": entry.content, "status": entry.status, "priority": entry.priority}
        if entry.active_form is not None:
            item["activeForm"] = entry.active_form
        entries.append(item)
    return entries


def _plan_to_json(plan: Sequence[PlanEntry]) -> str:
    return json.dumps(plan_entries_json(plan), ensure_ascii=False, separators=(",", ":"))


def _plan_from_json(raw: str, session_id: str) -> tuple[PlanEntry, ...] | None:
    try:
        items = json.loads(raw)
        return tuple(
            PlanEntry(
                content=str(item["content"]),
                status=item.get("status", "pending"),
                priority=item.get("priority", "medium"),
                active_form=item.get("activeForm"),
            )
            for item in items
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        # A damaged plan must not make the whole conversation unrecoverable.
        logger.warning("Ignoring an unreadable stored plan for session %s", session_id)
        return None


def _encode_arguments(call: ToolCall) -> str:
    try:
        encoded = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"Tool call {call.id} ({call.name}) has arguments that are not JSON: {exc}"
        ) from exc
    if len(encoded) > DEFAULT_MAX_TOOL_ARGUMENTS_BYTES:
        raise StoreError(
            f"Tool call {call.id} ({call.name}) arguments exceed "
            f"{DEFAULT_MAX_TOOL_ARGUMENTS_BYTES} bytes; not stored"
        )
    return encoded


def _decode_arguments(payload: str) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except ValueError:
        return {"arguments": payload}
    return value if isinstance(value, dict) else {"arguments": value}


@dataclass(frozen=True, slots=True)
class _EncodedMessage:
    """A message ready for INSERT: everything that can fail is done before BEGIN."""

    role: str
    content: str
    reasoning: str | None
    tool_rows: tuple[tuple[str, str, str, str], ...]  # (tool_call_id, tool_name, kind, payload)


def _encode_message(message: ChatMessage) -> _EncodedMessage:
    if message.role not in _ROLES:
        raise StoreError(f"Unknown message role {message.role!r}; not stored")
    rows = [(call.id, call.name, "in", _encode_arguments(call)) for call in message.tool_calls]
    content = message.content
    if message.role == "tool" and message.tool_call_id is not None:
        # The result text lives in the 'out' row (as in the reference); the message row
        # keeps its place in the conversation order.
        rows.append((message.tool_call_id, message.tool_name or "", "out", message.content))
        content = ""
    return _EncodedMessage(message.role, content, message.reasoning, tuple(rows))


# --------------------------------------------------------------------------- sync store


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SessionStore:
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

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        lock_retry_deadline_secs: float = DEFAULT_LOCK_RETRY_DEADLINE_SECS,
    ) -> SessionStore:
        """Open (creating if needed) and migrate the database at ``path``.

        Raises ``StoreUnavailable`` when the directory or file cannot be created, opened or
        written, is not a SQLite database, or was created by a newer schema. The file itself
        is never deleted, truncated or replaced.
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
        store = cls(conn, path, lock_retry_deadline_secs=lock_retry_deadline_secs)
        try:
            store._configure(busy_timeout_ms)
            store._write(store._migrate)
        except StoreUnavailable:
            conn.close()
            raise
        except (StoreError, sqlite3.Error) as exc:
            conn.close()
            raise StoreUnavailable(f"Cannot use the session store {path}: {exc}") from exc
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

    def _retry_busy(self, operation: Callable[[], T]) -> T:
        deadline = time.monotonic() + self._lock_retry_deadline
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

    def _transaction(self, body: Callable[[sqlite3.Connection], T], begin: str) -> T:
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

        with self._lock:
            try:
                return self._retry_busy(attempt)
            except StoreError:
                raise
            except sqlite3.Error as exc:
                raise StoreError(f"Session store error: {exc}") from exc

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # IMMEDIATE takes the write lock at BEGIN, so a writer waits (busy timeout + retry)
        # up front instead of failing at its first INSERT with SQLITE_BUSY_SNAPSHOT.
        return self._transaction(body, "BEGIN IMMEDIATE")

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        # One deferred read transaction: every SELECT of a load sees the same snapshot.
        return self._transaction(body, "BEGIN")

    # -- API

    def create_session(self, session_id: str, agent_alias: str, workspace_dir: str) -> None:
        now = _now()

        def insert(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO acp_sessions"
                    " (session_uuid, agent_alias, workspace_dir, created_at, last_activity)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (session_id, agent_alias, workspace_dir, now, now),
                )
            except sqlite3.IntegrityError as exc:
                raise DuplicateSession(f"Session {session_id} is already stored") from exc

        self._write(insert)

    def append_turn(self, session_id: str, turn: CompletedTurn) -> None:
        """Write one completed turn in one transaction (all or nothing).

        ``turn.messages`` is everything the turn added to the history, the user's message
        first. Raises ``UnknownSession`` (nothing written) or ``StoreError``; after any
        failure the database holds exactly what it held before the call.
        """
        encoded = [_encode_message(message) for message in turn.messages]
        plan_json = _plan_to_json(turn.plan) if turn.plan is not None else None
        tokens = turn.usage.total_tokens
        now = _now()

        def write(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT id, turn_count FROM acp_sessions WHERE session_uuid = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise UnknownSession(f"Session not found in the store: {session_id}")
            session_row_id, turn_seq = int(row[0]), int(row[1])
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
                        " (message_id, tool_call_id, tool_name, event_kind, payload, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        [(message_id, *tool_row, now) for tool_row in message.tool_rows],
                    )
            conn.execute(
                "UPDATE acp_sessions SET turn_count = turn_count + 1, last_activity = ?,"
                " token_count = token_count + ?, plan_json = coalesce(?, plan_json)"
                " WHERE id = ?",
                (now, tokens, plan_json, session_row_id),
            )

        self._write(write)

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
                " token_count, turn_count FROM acp_sessions WHERE session_uuid = ?",
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
                "SELECT t.message_id, t.tool_call_id, t.tool_name, t.event_kind, t.payload"
                " FROM acp_tool_calls AS t JOIN acp_messages AS m ON m.id = t.message_id"
                f" WHERE m.session_id = ?{window} ORDER BY t.id",
                params,
            ).fetchall()
            messages = _decode_messages(message_rows, tool_rows)
            plan = _plan_from_json(row[5], session_id) if row[5] is not None else None
            info = StoredSessionInfo(
                session_id=session_id,
                agent_alias=row[1],
                workspace_dir=row[2],
                created_at=_parse_time(row[3]),
                last_activity=_parse_time(row[4]),
                message_count=total,
                token_count=int(row[6]),
                turn_count=int(row[7]),
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
        now = _now()

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
            rows = conn.execute(
                "SELECT s.session_uuid, s.agent_alias, s.workspace_dir, s.created_at,"
                " s.last_activity, s.token_count, s.turn_count,"
                " (SELECT count(*) FROM acp_messages AS m WHERE m.session_id = s.id)"
                " FROM acp_sessions AS s ORDER BY s.last_activity DESC, s.id DESC"
            ).fetchall()
            return [
                StoredSessionInfo(
                    session_id=r[0],
                    agent_alias=r[1],
                    workspace_dir=r[2],
                    created_at=_parse_time(r[3]),
                    last_activity=_parse_time(r[4]),
                    message_count=int(r[7]),
                    token_count=int(r[5]),
                    turn_count=int(r[6]),
                )
                for r in rows
            ]

        return self._read(read)

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


def _restore_window(
    conn: sqlite3.Connection, session_row_id: int, max_messages: int | None
) -> tuple[int, int | None]:
    """(stored message count, oldest turn_seq to restore or None for everything)."""
    per_turn = conn.execute(
        "SELECT turn_seq, count(*) FROM acp_messages WHERE session_id = ?"
        " GROUP BY turn_seq ORDER BY turn_seq IS NULL, turn_seq DESC",
        (session_row_id,),
    ).fetchall()
    total = sum(int(count) for _turn, count in per_turn)
    if max_messages is None or total <= max_messages:
        return total, None
    kept = 0
    first_turn: int | None = None
    for turn_seq, count in per_turn:
        if turn_seq is None or (kept and kept + count > max_messages):
            break
        kept += count
        first_turn = turn_seq
    return total, first_turn


def _decode_messages(
    message_rows: Sequence[tuple[int, str, str, str | None]],
    tool_rows: Sequence[tuple[int, str, str, str, str]],
) -> tuple[ChatMessage, ...]:
    calls_by_message: dict[int, list[ToolCall]] = {}
    results_by_message: dict[int, list[tuple[str, str, str]]] = {}
    for message_id, call_id, name, kind, payload in tool_rows:
        if kind == "in":
            call = ToolCall(id=call_id, name=name, arguments=_decode_arguments(payload))
            calls_by_message.setdefault(message_id, []).append(call)
        elif kind == "out":
            results_by_message.setdefault(message_id, []).append((call_id, name, payload))

    messages: list[ChatMessage] = []
    for message_id, role_text, content, reasoning in message_rows:
        role = _ROLES.get(role_text, "system")
        calls = tuple(calls_by_message.get(message_id, ()))
        results = results_by_message.get(message_id, ())
        if role == "tool" and results:
            call_id, name, payload = results[0]
            messages.append(
                ChatMessage(
                    role="tool",
                    content=payload,
                    reasoning=reasoning,
                    tool_calls=calls,
                    tool_call_id=call_id,
                    tool_name=name or None,
                )
            )
            continue
        messages.append(
            ChatMessage(role=role, content=content, reasoning=reasoning, tool_calls=calls)
        )
        # The reference's layout: results hang off the assistant message that asked for them.
        messages.extend(
            ChatMessage(role="tool", content=payload, tool_call_id=call_id, tool_name=name or None)
            for call_id, name, payload in results
        )
    return tuple(messages)


# --------------------------------------------------------------------------- async wrapper


class _StoreCall:
    """One call handed to the store thread, and its outcome."""

    __slots__ = ("args", "done", "error", "function", "result", "token")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.token = trio.lowlevel.current_trio_token()
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.function(*self.args)
        except BaseException as exc:  # handed back to the awaiting task, re-raised there
            self.error = exc
        try:
            self.token.run_sync_soon(self.done.set)
        except trio.RunFinishedError:
            pass  # the event loop is gone; nobody is waiting any more


class _StoreThread:
    """A long-lived worker thread that runs store calls one at a time, in order.

    Why not ``trio.to_thread.run_sync`` per call: every completed turn is committed before
    it is answered (issue 5), so the hop is on each turn's critical path, and handing a call
    to a thread already waiting on a queue skips the generic hop's limiter, context copy and
    thread-cache handoff (in-process: ~45 µs a round trip instead of ~60 µs). The thread
    exits after ``DEFAULT_STORE_THREAD_IDLE_SECS`` without work, or when the store is
    closed, and is started again on demand, so an unclosed store never pins a thread.
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_StoreCall | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, call: _StoreCall) -> None:
        with self._lock:
            self._calls.put(call)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name="zeroclaw-session-store", daemon=True
                )
                self._thread.start()

    def stop(self) -> None:
        """Let the thread exit once the calls queued so far are done."""
        self._calls.put(None)

    def _serve(self) -> None:
        calls = self._calls
        while True:
            try:
                call = calls.get(timeout=DEFAULT_STORE_THREAD_IDLE_SECS)
            except queue.Empty:
                call = None
            if call is not None:
                call.run()
                continue
            with self._lock:
                if calls.empty():  # nothing slipped in meanwhile: leave
                    self._thread = None
                    return


class AsyncSessionStore:
    """Runs a ``SessionStore`` on a worker thread, one call at a time (trio).

    Calls are not abandoned when the caller is cancelled: a commit that has started finishes
    (or rolls back) before the cancellation is delivered, so a turn is never half written.
    """

    def __init__(self, store: SessionStore) -> None:
        self.sync = store
        self._worker = _StoreThread()

    @classmethod
    async def open(cls, path: Path) -> AsyncSessionStore:
        """Open on a worker thread; raises ``StoreUnavailable`` like ``SessionStore.open``."""
        store = await trio.to_thread.run_sync(SessionStore.open, path)
        return cls(store)

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        await trio.lowlevel.checkpoint_if_cancelled()
        call = _StoreCall(function, args)
        self._worker.submit(call)
        # Shielded: once submitted the call runs to its end (see the class docstring); a
        # cancellation is delivered right after, by the checkpoint below.
        with trio.CancelScope(shield=True):
            await call.done.wait()
        if call.error is not None:
            raise call.error
        result: T = call.result
        await trio.lowlevel.checkpoint_if_cancelled()
        return result

    async def create_session(self, session_id: str, agent_alias: str, workspace_dir: str) -> None:
        await self._call(self.sync.create_session, session_id, agent_alias, workspace_dir)

    async def append_turn(self, session_id: str, turn: CompletedTurn) -> None:
        await self._call(self.sync.append_turn, session_id, turn)

    async def load_session(
        self, session_id: str, *, max_messages: int | None = DEFAULT_MAX_RESTORED_MESSAGES
    ) -> StoredSession | None:
        return await self._call(
            functools.partial(self.sync.load_session, max_messages=max_messages), session_id
        )

    async def touch(self, session_id: str) -> None:
        await self._call(self.sync.touch, session_id)

    async def list_sessions(self) -> list[StoredSessionInfo]:
        return await self._call(self.sync.list_sessions)

    async def delete_session(self, session_id: str) -> bool:
        return await self._call(self.sync.delete_session, session_id)

    async def aclose(self) -> None:
        try:
            await self._call(self.sync.close)
        finally:
            self._worker.stop()
