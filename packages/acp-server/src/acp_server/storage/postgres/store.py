"""``PostgresSessionStore``: the session store on a PostgreSQL database several processes share.

The same contract as the SQLite ``SessionStore`` (storage/contract.py) and the same
statements (storage/sql_store.py), through psycopg 3's blocking API on the caller's thread
(``AsyncSessionStore``'s worker thread: psycopg's asyncio connection does not run under
trio). One connection, calls serialized; a connection that breaks is dropped and opened
again by the next call, and until then every call fails with ``StoreError``.

* One transaction per answered turn: the session row's UPDATE (which also checks the
  fencing epoch when the caller gives one) and batched inserts (``unnest``) of its messages
  and tool rows.
* Text columns cannot hold NUL in PostgreSQL: every text value that comes from a client, a
  model or a tool goes through ``codec.escape_nul`` on the way in and ``unescape_nul`` on
  the way out (storage/dialect.py), so tool output with NUL bytes round-trips exactly.
* Loads run in one REPEATABLE READ, READ ONLY transaction: every SELECT sees one snapshot.
* Fencing: ``claim_session`` bumps ``owner_epoch``; a commit made with an older epoch is
  refused with ``SessionFenced`` and writes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, Self, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from acp_server.storage import history
from acp_server.storage.codec import EncodedMessage, escape_nul
from acp_server.storage.dialect import POSTGRES
from acp_server.storage.postgres.schema import REVOKED_CHANNEL, Connection, migrate
from acp_server.storage.records import StoreError, StoreUnavailable
from acp_server.storage.sql_store import SqlSessionStore

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


class PostgresSessionStore(SqlSessionStore[Connection]):
    """Blocking access to the session tables of one PostgreSQL database. Thread-safe."""

    dialect = POSTGRES

    def __init__(self, url: str, *, connect_timeout_secs: int = DEFAULT_CONNECT_TIMEOUT_SECS):
        """Use ``PostgresSessionStore.open``, which also checks and migrates the schema."""
        self.url = url
        self._location = describe_url(url)
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

    def listen(self, channel: str, unavailable: str) -> Connection:
        """A new connection that LISTENs on ``channel`` (read it with ``notifies``); when it
        cannot, ``StoreError`` with the message ``unavailable`` and the cause."""
        conn = self.connect()
        try:
            conn.execute(f"LISTEN {channel}")
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(f"{unavailable}: {exc}") from exc
        return conn

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
        """Run ``body`` in one read-write transaction on the store's connection (the shared
        tokens, the leases, the import: storage/postgres/); errors as every store call's."""
        return self._run(body)

    def ping(self) -> None:
        """One round trip to the database, reconnecting when needed; ``StoreError`` if not."""
        self._run(lambda conn: conn.execute("SELECT 1").fetchone())

    # -- what the shared statements need (storage/sql_store.py)

    @property
    def location(self) -> str:
        """The database, as ``describe_url`` names it (never its password)."""
        return self._location

    def _write(self, body: Callable[[Connection], T]) -> T:
        return self._run(body)

    def _read(self, body: Callable[[Connection], T]) -> T:
        return self._run(body, read_only=True)

    def _read_statement(self, body: Callable[[Connection], T]) -> T:
        return self._run(body)  # one SELECT: no round trip to set the snapshot up

    def _announce_revoked(self, conn: Connection, digests: Sequence[str]) -> None:
        # Delivered at commit to every replica's listener (storage/postgres/tokens.py).
        for digest in digests:
            conn.execute("SELECT pg_notify(%s, %s)", (REVOKED_CHANNEL, digest))

    def session_row_id(self, session_id: str) -> int | None:
        """The session's row id (the key of its advisory lock), None when not stored."""
        return self._read_statement(
            lambda conn: history.session_number(conn, POSTGRES, "id", session_id)
        )

    def _insert_messages(
        self,
        conn: Connection,
        session_row_id: int,
        turn_seq: int,
        messages: Sequence[EncodedMessage],
        now: str,
    ) -> None:
        """A turn's messages and tool rows: ids drawn first, then one INSERT per table."""
        ids = sorted(
            int(row[0])
            for row in conn.execute(
                "SELECT nextval('acp_messages_id_seq') FROM generate_series(1, %s)",
                (len(messages),),
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
                [POSTGRES.optional_text(m.reasoning) for m in messages],
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
                [POSTGRES.optional_text(v) for v in columns[6]],
            ),
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
