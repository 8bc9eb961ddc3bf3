"""The SQLite session store's schema and its migrations (``PRAGMA user_version``).

Step 1 is the schema of ZeroClaw's own server (the ZeroClaw ACP documentation, "Session
persistence": ``<workspace_dir>/sessions/acp-sessions.db``), written so that it is a no-op
on a database that server created, which is then adopted rather than rejected; the later
steps are ours. ``SessionStore.open`` runs every step from the file's version up to
``SCHEMA_VERSION`` in one write transaction. The tables are described in
storage/history.py; PostgreSQL has the same ones (storage/postgres/schema.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Final

SCHEMA_VERSION: Final = 9
"""``PRAGMA user_version`` after every migration in ``MIGRATIONS`` has run."""


# Step 1: a database ZeroClaw's own server created already has these tables (its older
# files may still lack killed_at / plan_json, which _adopt_older_columns adds).
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
    # check that a turn is present in full. NULL on rows ZeroClaw's own server wrote.
    "ALTER TABLE acp_messages ADD COLUMN turn_seq INTEGER",
    "ALTER TABLE acp_sessions ADD COLUMN turn_count INTEGER NOT NULL DEFAULT 0",
)


_SCHEMA_V3: Final = (
    # A tool result's outcome and structured record ('out' rows): ``ok`` is
    # ``ToolOutput.ok``; ``record_json`` is its ``ToolRecord`` (what it streamed, the file it
    # delivered; codec.py), so replay never reads the result text. NULL record_json marks a
    # result written before this step: replay rebuilds its record from its text
    # (ToolDefinition.legacy_record), the only place those rows kept it.
    "ALTER TABLE acp_tool_calls ADD COLUMN ok INTEGER",
    "ALTER TABLE acp_tool_calls ADD COLUMN record_json TEXT",
    # Older results followed one convention for failure, an "Error:" prefix on the text;
    # their flag is migrated from it once here, and nothing reads the text for it again.
    "UPDATE acp_tool_calls SET ok = (substr(payload, 1, 6) <> 'Error:') WHERE event_kind = 'out'",
)


_SCHEMA_V4: Final = (
    # The session's title (ACP ``session_info_update``), from its first prompt; NULL on
    # sessions written before this step and on sessions not prompted yet.
    "ALTER TABLE acp_sessions ADD COLUMN title TEXT",
    # session/list pages newest first, by activity.
    "CREATE INDEX IF NOT EXISTS idx_acp_sessions_activity ON acp_sessions(last_activity, id)",
)


_SCHEMA_V5: Final = (
    # The spending ledger of the [cost] caps (storage/spend.py): one row per priced model
    # call; session_uuid is not a reference, the ledger outlives sessions.
    """
    CREATE TABLE IF NOT EXISTS acp_spend (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        day TEXT NOT NULL,
        agent_alias TEXT NOT NULL,
        session_uuid TEXT NOT NULL,
        model TEXT NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX IF NOT EXISTS idx_acp_spend_day ON acp_spend(day, agent_alias)",
)


_SCHEMA_V6: Final = (
    # The session's extra jail roots (ACP ``additionalDirectories``) as a JSON array of
    # canonical paths; NULL when it has none.
    "ALTER TABLE acp_sessions ADD COLUMN additional_dirs_json TEXT",
)


_SCHEMA_V7: Final = (
    # The session's config option choices (ACP session/set_config_option) as a JSON object
    # {configId: value}; NULL until a client changes one (the agent's defaults apply).
    "ALTER TABLE acp_sessions ADD COLUMN config_json TEXT",
)


_SCHEMA_OWNER_EPOCH: Final = (
    # The fencing epoch of a session's live copy (docs/persistence.md, "One live copy per
    # session"): each session/load or session/resume bumps it and the copy that did holds
    # the new value; a turn commit carrying another value writes nothing. Rows stored
    # before this step start at 1, as a new session does.
    "ALTER TABLE acp_sessions ADD COLUMN owner_epoch INTEGER NOT NULL DEFAULT 1",
)


_SCHEMA_PRINCIPALS: Final = (
    # Who a session belongs to (docs/gateway.md, "Principals"): the name of the gateway
    # token's principal that created it; NULL for the local operator (stdio `zeroclaw acp`)
    # and for every session stored before this step.
    "ALTER TABLE acp_sessions ADD COLUMN principal TEXT",
    "CREATE INDEX IF NOT EXISTS idx_acp_sessions_principal"
    " ON acp_sessions(principal, last_activity, id)",
    # The gateway's paired tokens and their principals (storage/tokens.py).
    """
    CREATE TABLE IF NOT EXISTS acp_paired_tokens (
        digest TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        source TEXT NOT NULL,
        paired_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
    )
    """,
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_acp_paired_tokens_live_principal"
    " ON acp_paired_tokens(principal) WHERE revoked_at IS NULL",
    # The principal a priced model call was made for ([cost.principals]); NULL: the operator.
    "ALTER TABLE acp_spend ADD COLUMN principal TEXT",
)


def _statements(statements: tuple[str, ...]) -> Callable[[sqlite3.Connection], None]:
    """A migration step that runs ``statements`` in order."""

    def step(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return step


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    _statements(_SCHEMA_V1)(conn)
    _adopt_older_columns(conn)


def _adopt_older_columns(conn: sqlite3.Connection) -> None:
    """Older databases of ZeroClaw's own server predate these two columns (it added them
    the same way)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(acp_sessions)")}
    if "killed_at" not in columns:
        conn.execute("ALTER TABLE acp_sessions ADD COLUMN killed_at TEXT")
    if "plan_json" not in columns:
        conn.execute("ALTER TABLE acp_sessions ADD COLUMN plan_json TEXT")


MIGRATIONS: Final[tuple[Callable[[sqlite3.Connection], None], ...]] = (
    _migrate_to_v1,
    _statements(_SCHEMA_V2),
    _statements(_SCHEMA_V3),
    _statements(_SCHEMA_V4),
    _statements(_SCHEMA_V5),
    _statements(_SCHEMA_V6),
    _statements(_SCHEMA_V7),
    _statements(_SCHEMA_OWNER_EPOCH),
    _statements(_SCHEMA_PRINCIPALS),
)
"""``MIGRATIONS[n]`` takes a database from ``user_version`` n to n + 1. Append, never edit."""

assert len(MIGRATIONS) == SCHEMA_VERSION
