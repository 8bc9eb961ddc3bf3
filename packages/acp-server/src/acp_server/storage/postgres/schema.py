"""The PostgreSQL session store's schema and its migrations.

The tables and columns are the SQLite store's (storage/sqlite/schema.py), so one row codec
(storage/codec.py) and one set of statements (storage/sql_store.py) serve both; timestamps
stay ISO 8601 text, which sorts as time does, so ``session/list`` cursors
(storage/session_list.py) are the same too. Added here: the shared gateway tokens and
pairing code (step 2, storage/postgres/tokens.py) and the sessions copied in from SQLite
(``acp_imported_sessions``, storage/postgres/importer.py).

The version lives in ``acp_schema_version`` (one row). ``migrate`` runs the missing steps in
one transaction under a transaction-level advisory lock, so replicas starting together
migrate once: the others wait on the lock and then find nothing left to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import psycopg

from acp_server.storage.records import StoreUnavailable

logger = logging.getLogger(__name__)

PG_SCHEMA_VERSION: Final = 4
"""``acp_schema_version.version`` after every step in ``PG_MIGRATIONS`` has run."""

ADVISORY_LOCK_NAMESPACE: Final = 0x5A43_4C57  # "ZCLW"
"""First key of this store's two-key advisory locks (``pg_advisory_xact_lock(ns, n)``);
session locks use the one-bigint form with the session's row id, a separate key space."""
MIGRATION_LOCK: Final = 1
REVOKED_CHANNEL: Final = "zeroclaw_token_revoked"
"""The NOTIFY channel of token revocations (payload: a digest, or ``*`` for every token)."""
"""Second key of the lock ``migrate`` holds for its transaction."""

_SCHEMA_V1: Final = (
    """
    CREATE TABLE acp_sessions (
        id BIGSERIAL PRIMARY KEY,
        session_uuid TEXT NOT NULL UNIQUE,
        agent_alias TEXT NOT NULL,
        workspace_dir TEXT NOT NULL,
        token_count BIGINT NOT NULL DEFAULT 0,
        killed_at TEXT,
        created_at TEXT NOT NULL,
        last_activity TEXT NOT NULL,
        plan_json TEXT,
        turn_count BIGINT NOT NULL DEFAULT 0,
        title TEXT,
        owner_epoch BIGINT NOT NULL DEFAULT 1
    )
    """,
    "CREATE INDEX idx_acp_sessions_alias ON acp_sessions(agent_alias)",
    "CREATE INDEX idx_acp_sessions_activity ON acp_sessions(last_activity, id)",
    """
    CREATE TABLE acp_messages (
        id BIGSERIAL PRIMARY KEY,
        session_id BIGINT NOT NULL REFERENCES acp_sessions(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        reasoning_content TEXT,
        created_at TEXT NOT NULL,
        turn_seq BIGINT
    )
    """,
    "CREATE INDEX idx_acp_messages_session ON acp_messages(session_id, id)",
    "CREATE INDEX idx_acp_messages_turn ON acp_messages(session_id, turn_seq)",
    """
    CREATE TABLE acp_tool_calls (
        id BIGSERIAL PRIMARY KEY,
        message_id BIGINT NOT NULL REFERENCES acp_messages(id) ON DELETE CASCADE,
        tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        event_kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        outcome TEXT,
        created_at TEXT NOT NULL,
        ok INTEGER,
        record_json TEXT
    )
    """,
    "CREATE INDEX idx_acp_tool_calls_message ON acp_tool_calls(message_id, id)",
    "CREATE INDEX idx_acp_tool_calls_lookup ON acp_tool_calls(tool_call_id)",
    # Which SQLite sessions `zeroclaw storage import-sqlite` copied in, so a second run
    # copies nothing twice (storage/postgres/importer.py).
    """
    CREATE TABLE acp_imported_sessions (
        session_uuid TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        imported_at TEXT NOT NULL
    )
    """,
)

Connection = psycopg.Connection[tuple[Any, ...]]


def _migrate_to_v1(conn: Connection) -> None:
    for statement in _SCHEMA_V1:
        conn.execute(statement)


_SCHEMA_V2: Final = (
    # Paired token digests shared by every gateway replica (storage/postgres/tokens.py). A
    # revoked digest keeps its row, so importing an old config.toml never revives it.
    """
    CREATE TABLE acp_paired_tokens (
        digest TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        paired_at TEXT NOT NULL,
        revoked_at TEXT
    )
    """,
    # The one-time pairing code and its brute-force counters: one row, taken FOR UPDATE.
    """
    CREATE TABLE acp_pairing (
        one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
        code TEXT,
        discoverable BOOLEAN NOT NULL DEFAULT FALSE,
        failures INTEGER NOT NULL DEFAULT 0,
        locked_until DOUBLE PRECISION,
        attempts DOUBLE PRECISION[] NOT NULL DEFAULT '{}'
    )
    """,
    "INSERT INTO acp_pairing DEFAULT VALUES",
)


def _migrate_to_v2(conn: Connection) -> None:
    for statement in _SCHEMA_V2:
        conn.execute(statement)


_SCHEMA_V3: Final = (
    # What the SQLite store keeps beside the history (its schema steps 5 to 7), with the
    # same encodings and statements (storage/settings.py): the session's extra jail roots
    # and config option choices, and the spending ledger of the [cost] caps (storage/spend.py).
    "ALTER TABLE acp_sessions ADD COLUMN additional_dirs_json TEXT",
    "ALTER TABLE acp_sessions ADD COLUMN config_json TEXT",
    """
    CREATE TABLE acp_spend (
        id BIGSERIAL PRIMARY KEY,
        day TEXT NOT NULL,
        agent_alias TEXT NOT NULL,
        session_uuid TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX idx_acp_spend_day ON acp_spend(day, agent_alias)",
)


def _migrate_to_v3(conn: Connection) -> None:
    for statement in _SCHEMA_V3:
        conn.execute(statement)


_SCHEMA_V4: Final = (
    # The SQLite store's step 9: who a session belongs to (NULL: the local operator, and
    # every session stored before), the paired tokens' principals and last-use times
    # (storage/tokens.py; a token paired before is named after its digest), the principal
    # a priced model call was made for.
    "ALTER TABLE acp_sessions ADD COLUMN principal TEXT",
    "CREATE INDEX idx_acp_sessions_principal ON acp_sessions(principal, last_activity, id)",
    "ALTER TABLE acp_paired_tokens ADD COLUMN principal TEXT",
    "ALTER TABLE acp_paired_tokens ADD COLUMN last_used_at TEXT",
    "UPDATE acp_paired_tokens SET principal = 'token-' || left(digest, 12)",
    "ALTER TABLE acp_paired_tokens ALTER COLUMN principal SET NOT NULL",
    "CREATE UNIQUE INDEX idx_acp_paired_tokens_live_principal"
    " ON acp_paired_tokens(principal) WHERE revoked_at IS NULL",
    "ALTER TABLE acp_spend ADD COLUMN principal TEXT",
)


def _migrate_to_v4(conn: Connection) -> None:
    for statement in _SCHEMA_V4:
        conn.execute(statement)


PG_MIGRATIONS: Final[tuple[Callable[[Connection], None], ...]] = (
    _migrate_to_v1,
    _migrate_to_v2,
    _migrate_to_v3,
    _migrate_to_v4,
)
"""``PG_MIGRATIONS[n]`` takes a database from version n to n + 1. Append, never edit."""

assert len(PG_MIGRATIONS) == PG_SCHEMA_VERSION


def schema_version(conn: Connection) -> int:
    """The database's schema version (0: never migrated). Call inside a transaction."""
    exists = conn.execute("SELECT to_regclass('acp_schema_version') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT version FROM acp_schema_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Connection, location: str) -> tuple[int, int]:
    """Bring the schema up to ``PG_SCHEMA_VERSION``; (version before, version after).

    Raises ``StoreUnavailable`` for a database a newer zeroclaw migrated."""
    with conn.transaction():
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", (ADVISORY_LOCK_NAMESPACE, MIGRATION_LOCK)
        )
        version = schema_version(conn)
        if version > PG_SCHEMA_VERSION:
            raise StoreUnavailable(
                f"The session store {location} has schema version {version}, newer than this "
                f"zeroclaw understands ({PG_SCHEMA_VERSION}); upgrade zeroclaw to use it"
            )
        if version == 0:
            conn.execute(
                "CREATE TABLE acp_schema_version (one BOOLEAN PRIMARY KEY DEFAULT TRUE"
                " CHECK (one), version INTEGER NOT NULL)"
            )
            conn.execute("INSERT INTO acp_schema_version (version) VALUES (0)")
        for step in range(version, PG_SCHEMA_VERSION):
            PG_MIGRATIONS[step](conn)
            logger.info("Session store %s migrated to schema %d", location, step + 1)
        conn.execute("UPDATE acp_schema_version SET version = %s", (PG_SCHEMA_VERSION,))
    return version, PG_SCHEMA_VERSION
