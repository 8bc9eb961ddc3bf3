"""``PostgresSessionStore``: the session store on a PostgreSQL database several processes share.

The same contract as the SQLite ``SessionStore`` (storage/contract.py), through psycopg 3's
blocking API on the caller's thread (``AsyncSessionStore``'s worker thread: psycopg's
asyncio connection does not run under trio). One connection, calls serialized; a
connection that breaks is dropped and opened again by the next call, and until then every
call fails with ``StoreError`` (``AsyncSessionStore`` keeps the turns it could not write).

* One transaction per answered turn: the session row's UPDATE (which also checks the
  fencing epoch when the caller gives one) and batched inserts (``unnest``) of its messages
  and tool rows.
* Text columns cannot hold NUL in PostgreSQL: every text value that comes from a client, a
  model or a tool goes through ``codec.escape_nul`` on the way in and ``unescape_nul`` on
  the way out, so tool output with NUL bytes round-trips exactly.
* Loads run in one REPEATABLE READ, READ ONLY transaction: every SELECT sees one snapshot.
* Fencing: ``claim_session`` bumps ``owner_epoch``; a commit made with an older epoch is
  refused with ``SessionFenced`` and writes nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, Self, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from acp_server.agent.conversation import CompletedTurn
from acp_server.storage.codec import (
    EncodedMessage,
    decode_messages,
    encode_message,
    escape_nul,
    now_text,
    plan_from_json,
    plan_to_json,
    restore_window,
    unescape_nul,
)
from acp_server.storage.pg_session_extras import SessionExtras
from acp_server.storage.postgres_schema import Connection, migrate
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
    DEFAULT_PAGE_SIZE,
    NEWEST_FIRST,
    SESSION_INFO_SELECT,
    SessionPage,
    page_from_rows,
    page_query,
    session_info,
)
from acp_server.storage.session_store import DEFAULT_MAX_RESTORED_MESSAGES

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_SECS: Final = 5
"""How long opening a connection waits for the server (libpq ``connect_timeout``)."""
_STATEMENT_TIMEOUT_MS: Final = 30_000
"""A statement still running after this long is cancelled by the server (a lock another
replica holds too long must not hang a turn's commit forever)."""
_KEEPALIVES: Final = "keepalives=1 keepalives_idle=10 keepalives_interval=5 keepalives_count=3"
"""TCP keepalives: a server that vanished is noticed in seconds, not hours."""

T = TypeVar("T")


def describe_url(url: str) -> str:
    """The database a URL names, for messages: never its password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "PostgreSQL (unparsable URL)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{parts.get('dbname') or ''}"


def _text(value: str | None) -> str | None:
    return None if value is None else escape_nul(value)


def _info_unescaped(info: StoredSessionInfo) -> StoredSessionInfo:
    return dataclasses.replace(
        info,
        session_id=unescape_nul(info.session_id),
        agent_alias=unescape_nul(info.agent_alias),
        workspace_dir=unescape_nul(info.workspace_dir),
        title=None if info.title is None else unescape_nul(info.title),
    )


class PostgresSessionStore(SessionExtras):
    """Blocking access to the session tables of one PostgreSQL database. Thread-safe."""

    def __init__(self, url: str, *, connect_timeout_secs: int = DEFAULT_CONNECT_TIMEOUT_SECS):
        """Use ``PostgresSessionStore.open``, which also checks and migrates the schema."""
        self.url = url
        self.location = describe_url(url)
        self._connect_timeout = connect_timeout_secs
        self._conn: Connection | None = None
        self._closed = False
        self._lock = threading.Lock()
        self.migrated_from: int | None = None
        """The schema version ``open`` found (it migrated from there when it was older)."""

    @classmethod
    def open(cls, url: str, *, connect_timeout_secs: int = DEFAULT_CONNECT_TIMEOUT_SECS) -> Self:
        """Connect and migrate; ``StoreUnavailable`` (naming the database, never the
        password) when the server cannot be reached or the schema is newer than ours."""
        store = cls(url, connect_timeout_secs=connect_timeout_secs)
        try:
            with store._lock:
                store.migrated_from, _now = migrate(store._connection(), store.location)
        except StoreUnavailable:
            store.close()
            raise
        except (StoreError, psycopg.Error) as exc:
            store.close()
            cause = exc.__cause__ if isinstance(exc, StoreError) and exc.__cause__ else exc
            raise StoreUnavailable(
                f"Cannot use the PostgreSQL session store {store.location}: {cause}"
            ) from exc
        return store

    # -- connection and transaction plumbing

    def connect(self, *, autocommit: bool = True) -> Connection:
        """A new connection to the store's database (``StoreError`` when unreachable)."""
        try:
            given = conninfo_to_dict(self.url)
            # Ours first: a statement_timeout in the URL's own options wins.
            options = f"-c statement_timeout={_STATEMENT_TIMEOUT_MS} {given.get('options') or ''}"
            conninfo = make_conninfo(
                self.url,
                connect_timeout=given.get("connect_timeout") or self._connect_timeout,
                options=options.strip(),
                application_name=given.get("application_name") or "zeroclaw",
            )
            return psycopg.connect(f"{conninfo} {_KEEPALIVES}", autocommit=autocommit)
        except psycopg.Error as exc:
            raise StoreError(
                f"The PostgreSQL session store {self.location} is unreachable: {exc}"
            ) from exc

    def _connection(self) -> Connection:
        if self._closed:
            raise StoreError("The session store is closed")
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._conn = conn = self.connect()
        return conn

    def _run(self, body: Callable[[Connection], T], *, read_only: bool = False) -> T:
        """``body`` in one transaction (a snapshot for reads); psycopg errors become
        ``StoreError`` and a broken connection is replaced by the next call."""
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    if read_only:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    return body(conn)
            except StoreError:
                raise
            except psycopg.Error as exc:
                if conn.broken or isinstance(exc, psycopg.OperationalError):
                    conn.close()
                    self._conn = None
                raise StoreError(f"Session store error ({self.location}): {exc}") from exc

    def transaction(self, body: Callable[[Connection], T]) -> T:
        """Run ``body`` in one read-write transaction on the store's connection (tools such
        as storage/pg_import.py); errors as every store call's."""
        return self._run(body)

    def ping(self) -> None:
        """One round trip to the database, reconnecting when needed; ``StoreError`` if not."""
        self._run(lambda conn: conn.execute("SELECT 1").fetchone())

    # -- API (storage/contract.py)

    def create_session(self, session_id: str, agent_alias: str, workspace_dir: str) -> None:
        """A new session, at fencing epoch 1."""
        now = now_text()

        def insert(conn: Connection) -> None:
            row = conn.execute(
                "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir,"
                " created_at, last_activity) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (session_uuid) DO NOTHING RETURNING id",
                (*map(escape_nul, (session_id, agent_alias, workspace_dir)), now, now),
            ).fetchone()
            if row is None:
                raise DuplicateSession(f"Session {session_id} is already stored")

        self._run(insert)

    def append_turn(
        self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
    ) -> None:
        """Write one completed turn in one transaction (all or nothing). With ``epoch``,
        only while the session's fencing epoch is still that one (else ``SessionFenced``)."""
        self.append_turns(session_id, (turn,), epoch=epoch)

    def append_turns(
        self, session_id: str, turns: Sequence[CompletedTurn], *, epoch: int | None = None
    ) -> None:
        """Write ``turns`` in order, in one transaction, as ``append_turn``."""
        encoded = [
            (
                [encode_message(message) for message in turn.messages],
                plan_to_json(turn.plan) if turn.plan is not None else None,
                turn.usage.total_tokens,
            )
            for turn in turns
        ]
        key = escape_nul(session_id)
        now = now_text()

        def write(conn: Connection) -> None:
            for messages, plan_json, tokens in encoded:
                row = conn.execute(
                    "UPDATE acp_sessions SET turn_count = turn_count + 1, last_activity = %s,"
                    " token_count = token_count + %s, plan_json = coalesce(%s, plan_json)"
                    " WHERE session_uuid = %s AND (%s::bigint IS NULL OR owner_epoch = %s)"
                    " RETURNING id, turn_count - 1",
                    (now, tokens, plan_json, key, epoch, epoch),
                ).fetchone()
                if row is None:
                    self._refuse_turn(conn, session_id, key, epoch)
                    return
                _insert_messages(conn, int(row[0]), int(row[1]), messages, now)

        self._run(write)

    @staticmethod
    def _refuse_turn(conn: Connection, session_id: str, key: str, epoch: int | None) -> None:
        current = conn.execute(
            "SELECT owner_epoch FROM acp_sessions WHERE session_uuid = %s", (key,)
        ).fetchone()
        if current is None:
            raise UnknownSession(f"Session not found in the store: {session_id}")
        assert epoch is not None  # without one the UPDATE matches any stored session
        raise SessionFenced(session_id, epoch=epoch, current=int(current[0]))

    def claim_session(self, session_id: str) -> int | None:
        """Take the session over: bump its fencing epoch and return it (None: not stored).
        Every commit made with an older epoch is refused from now on."""

        def bump(conn: Connection) -> int | None:
            row = conn.execute(
                "UPDATE acp_sessions SET owner_epoch = owner_epoch + 1"
                " WHERE session_uuid = %s RETURNING owner_epoch",
                (escape_nul(session_id),),
            ).fetchone()
            return None if row is None else int(row[0])

        return self._run(bump)

    def current_epoch(self, session_id: str) -> int | None:
        """The session's fencing epoch (None: not stored)."""
        return self._session_number("owner_epoch", session_id)

    def session_row_id(self, session_id: str) -> int | None:
        """The session's row id (the key of its advisory lock), None when not stored."""
        return self._session_number("id", session_id)

    def _session_number(self, column: Literal["id", "owner_epoch"], session_id: str) -> int | None:
        def read(conn: Connection) -> int | None:
            row = conn.execute(
                f"SELECT {column} FROM acp_sessions WHERE session_uuid = %s",
                (escape_nul(session_id),),
            ).fetchone()
            return None if row is None else int(row[0])

        return self._run(read)

    def load_session(
        self, session_id: str, *, max_messages: int | None = DEFAULT_MAX_RESTORED_MESSAGES
    ) -> StoredSession | None:
        """The stored session and its conversation, or None (as ``SessionStore``)."""

        def read(conn: Connection) -> StoredSession | None:
            row = conn.execute(
                f"{SESSION_INFO_SELECT} WHERE s.session_uuid = %s", (escape_nul(session_id),)
            ).fetchone()
            if row is None:
                return None
            session_row_id = int(row[0])
            info = _info_unescaped(session_info(row))
            plan_row = conn.execute(
                "SELECT plan_json FROM acp_sessions WHERE id = %s", (session_row_id,)
            ).fetchone()
            per_turn = conn.execute(
                "SELECT turn_seq, count(*) FROM acp_messages WHERE session_id = %s"
                " GROUP BY turn_seq ORDER BY turn_seq IS NULL, turn_seq DESC",
                (session_row_id,),
            ).fetchall()
            total, first_turn = restore_window(per_turn, max_messages)
            window = "" if first_turn is None else " AND m.turn_seq >= %s"
            params = (session_row_id,) if first_turn is None else (session_row_id, first_turn)
            message_rows = [
                (int(r[0]), unescape_nul(r[1]), unescape_nul(r[2]), _unescaped(r[3]))
                for r in conn.execute(
                    "SELECT m.id, m.role, m.content, m.reasoning_content FROM acp_messages AS m"
                    f" WHERE m.session_id = %s{window} ORDER BY m.id",
                    params,
                )
            ]
            tool_rows = [
                (
                    int(r[0]),
                    unescape_nul(r[1]),
                    unescape_nul(r[2]),
                    r[3],
                    unescape_nul(r[4]),
                    r[5],
                    _unescaped(r[6]),
                )
                for r in conn.execute(
                    "SELECT t.message_id, t.tool_call_id, t.tool_name, t.event_kind, t.payload,"
                    " t.ok, t.record_json"
                    " FROM acp_tool_calls AS t JOIN acp_messages AS m ON m.id = t.message_id"
                    f" WHERE m.session_id = %s{window} ORDER BY t.id",
                    params,
                )
            ]
            plan_json = plan_row[0] if plan_row else None
            return StoredSession(
                info=dataclasses.replace(info, message_count=total),
                messages=decode_messages(message_rows, tool_rows),
                plan=plan_from_json(plan_json, session_id) if plan_json is not None else None,
                dropped_messages=total - len(message_rows),
            )

        return self._run(read, read_only=True)

    def touch(self, session_id: str) -> None:
        now = now_text()

        def update(conn: Connection) -> None:
            cursor = conn.execute(
                "UPDATE acp_sessions SET last_activity = %s WHERE session_uuid = %s",
                (now, escape_nul(session_id)),
            )
            if cursor.rowcount == 0:
                raise UnknownSession(f"Session not found in the store: {session_id}")

        self._run(update)

    def list_sessions(self) -> list[StoredSessionInfo]:
        def read(conn: Connection) -> list[StoredSessionInfo]:
            rows = conn.execute(f"{SESSION_INFO_SELECT} {NEWEST_FIRST}").fetchall()
            return [_info_unescaped(session_info(row)) for row in rows]

        return self._run(read, read_only=True)

    def list_page(
        self,
        *,
        workspace_dir: str | None,
        cursor: str | None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> SessionPage:
        """One ``session/list`` page (session_list.py); raises ``BadCursor``."""
        query, params = page_query(
            workspace_dir=None if workspace_dir is None else escape_nul(workspace_dir),
            cursor=cursor,
            page_size=page_size,
            placeholder="%s",
        )

        def read(conn: Connection) -> SessionPage:
            page = page_from_rows(conn.execute(query, params).fetchall(), page_size)
            sessions = tuple(_info_unescaped(info) for info in page.sessions)
            return dataclasses.replace(page, sessions=sessions)

        return self._run(read, read_only=True)

    def set_title(self, session_id: str, title: str) -> bool:
        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE acp_sessions SET title = %s WHERE session_uuid = %s AND title IS NULL",
                (escape_nul(title), escape_nul(session_id)),
            )
            return cursor.rowcount > 0

        return self._run(update)

    def delete_session(self, session_id: str) -> bool:
        def delete(conn: Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM acp_sessions WHERE session_uuid = %s", (escape_nul(session_id),)
            )
            return cursor.rowcount > 0

        return self._run(delete)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _unescaped(value: str | None) -> str | None:
    return None if value is None else unescape_nul(value)


def _insert_messages(
    conn: Connection,
    session_row_id: int,
    turn_seq: int,
    messages: Sequence[EncodedMessage],
    now: str,
) -> None:
    """A turn's messages and tool rows: ids drawn first, then one INSERT per table."""
    if not messages:
        return
    ids = sorted(
        int(row[0])
        for row in conn.execute(
            "SELECT nextval('acp_messages_id_seq') FROM generate_series(1, %s)", (len(messages),)
        )
    )
    conn.execute(
        "INSERT INTO acp_messages"
        " (id, session_id, role, content, reasoning_content, created_at, turn_seq)"
        " SELECT id, %s, role, content, reasoning, %s, %s"
        " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[])"
        " AS m(id, role, content, reasoning) ORDER BY id",
        (
            session_row_id,
            now,
            turn_seq,
            ids,
            [escape_nul(m.role) for m in messages],
            [escape_nul(m.content) for m in messages],
            [_text(m.reasoning) for m in messages],
        ),
    )
    tool_rows: list[tuple[Any, ...]] = [
        (message_id, *row)
        for message_id, m in zip(ids, messages, strict=True)
        for row in m.tool_rows
    ]
    if not tool_rows:
        return
    columns = list(zip(*tool_rows, strict=True))
    conn.execute(
        "INSERT INTO acp_tool_calls (message_id, tool_call_id, tool_name, event_kind, payload,"
        " ok, record_json, created_at)"
        " SELECT message_id, call_id, name, kind, payload, ok, record, %s"
        " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
        " %s::integer[], %s::text[]) WITH ORDINALITY"
        " AS t(message_id, call_id, name, kind, payload, ok, record, position)"
        " ORDER BY position",
        (
            now,
            list(columns[0]),
            [escape_nul(v) for v in columns[1]],
            [escape_nul(v) for v in columns[2]],
            list(columns[3]),
            [escape_nul(v) for v in columns[4]],
            list(columns[5]),
            [_text(v) for v in columns[6]],
        ),
    )
