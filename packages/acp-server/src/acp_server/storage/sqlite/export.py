"""Reading every session of an SQLite store as rows, for copying them elsewhere
(storage/transfer.py; ``zeroclaw storage import-sqlite``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from acp_server.storage.records import StoreError
from acp_server.storage.sqlite.store import SessionStore
from acp_server.storage.transfer import (
    MESSAGE_COLUMNS,
    SESSION_COLUMNS,
    TOOL_COLUMNS,
    ExportedSession,
)


def exported_sessions(source: Path) -> Iterator[ExportedSession]:
    """Every session of the SQLite store at ``source``, oldest first, one at a time.

    The file is opened as the server would first (so an older schema is migrated, and a
    file that is damaged or newer raises ``StoreUnavailable``), then read without writing;
    a missing file raises ``StoreError`` (it is never created)."""
    if not source.is_file():
        raise StoreError(f"No SQLite session store at {source}")
    SessionStore.open(source).close()  # checks and migrates it; never creates it
    with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as conn:
        sessions = conn.execute(
            f"SELECT id, {', '.join(SESSION_COLUMNS)} FROM acp_sessions ORDER BY id"
        ).fetchall()
        tool_columns = ", ".join(f"t.{column}" for column in TOOL_COLUMNS)
        for session in sessions:
            messages = conn.execute(
                f"SELECT {', '.join(MESSAGE_COLUMNS)} FROM acp_messages"
                " WHERE session_id = ? ORDER BY id",
                (session[0],),
            ).fetchall()
            tool_rows = conn.execute(
                f"SELECT {tool_columns} FROM acp_tool_calls AS t"
                " JOIN acp_messages AS m ON m.id = t.message_id WHERE m.session_id = ?"
                " ORDER BY t.id",
                (session[0],),
            ).fetchall()
            yield ExportedSession(tuple(session[1:]), messages, tool_rows)
