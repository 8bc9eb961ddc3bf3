"""Copying an SQLite session store into the PostgreSQL one (`zeroclaw storage import-sqlite`).

Rows are copied as they are (turn numbers, timestamps, plans, tool records), each session
in one PostgreSQL transaction together with its line in ``acp_imported_sessions``. A session
whose id the database already holds is left alone, so running the import again, or after
it was interrupted, copies nothing twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_server.storage.codec import escape_nul, now_text
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.postgres_schema import Connection
from acp_server.storage.records import StoreError
from acp_server.storage.session_store import SessionStore

_SESSION_COLUMNS = (
    "session_uuid, agent_alias, workspace_dir, token_count, killed_at, created_at,"
    " last_activity, plan_json, turn_count, title"
)
_TEXT_SESSION_FIELDS = (0, 1, 2, 4, 9)  # ids, paths, titles: anything a client could send


@dataclass(frozen=True, slots=True)
class ImportReport:
    copied: int
    """Sessions copied by this run."""
    already_there: int
    """Sessions the database already held (an earlier import, or the same id)."""
    messages: int
    """Messages copied by this run."""


def import_sqlite(source: Path, target: PostgresSessionStore) -> ImportReport:
    """Copy every session of the SQLite store at ``source`` into ``target``.

    The file is opened as the server would (so an older schema is migrated first); a file
    that is missing, damaged or newer raises ``StoreUnavailable``. Raises ``StoreError``
    when the database refuses a write (sessions copied before it stay copied)."""
    if not source.is_file():
        raise StoreError(f"No SQLite session store at {source}")
    SessionStore.open(source).close()  # checks and migrates it; never creates it
    copied = already = messages = 0
    with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as conn:
        sessions = conn.execute(
            f"SELECT id, {_SESSION_COLUMNS} FROM acp_sessions ORDER BY id"
        ).fetchall()
        for session in sessions:
            message_rows = conn.execute(
                "SELECT id, role, content, reasoning_content, created_at, turn_seq"
                " FROM acp_messages WHERE session_id = ? ORDER BY id",
                (session[0],),
            ).fetchall()
            tool_rows = conn.execute(
                "SELECT t.message_id, t.tool_call_id, t.tool_name, t.event_kind, t.payload,"
                " t.outcome, t.created_at, t.ok, t.record_json FROM acp_tool_calls AS t"
                " JOIN acp_messages AS m ON m.id = t.message_id WHERE m.session_id = ?"
                " ORDER BY t.id",
                (session[0],),
            ).fetchall()

            def copy(
                pg: Connection,
                session: Sequence[Any] = session,
                message_rows: Sequence[Sequence[Any]] = message_rows,
                tool_rows: Sequence[Sequence[Any]] = tool_rows,
            ) -> bool:
                return _copy_session(pg, str(source), session[1:], message_rows, tool_rows)

            if target.transaction(copy):
                copied += 1
                messages += len(message_rows)
            else:
                already += 1
    return ImportReport(copied=copied, already_there=already, messages=messages)


def _text(value: Any) -> Any:
    return escape_nul(value) if isinstance(value, str) else value


def _copy_session(
    pg: Connection,
    source: str,
    session: Sequence[Any],
    message_rows: Sequence[Sequence[Any]],
    tool_rows: Sequence[Sequence[Any]],
) -> bool:
    """One session's rows; False (nothing written) when its id is already stored."""
    values = [
        _text(value) if index in _TEXT_SESSION_FIELDS else value
        for index, value in enumerate(session)
    ]
    row = pg.execute(
        f"INSERT INTO acp_sessions ({_SESSION_COLUMNS}) VALUES"
        " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (session_uuid) DO NOTHING RETURNING id",
        values,
    ).fetchone()
    if row is None:
        return False
    session_row_id = int(row[0])
    pg.execute(
        "INSERT INTO acp_imported_sessions (session_uuid, source, imported_at) VALUES (%s, %s, %s)",
        (values[0], escape_nul(source), now_text()),
    )
    if not message_rows:
        return True
    new_ids = sorted(
        int(r[0])
        for r in pg.execute(
            "SELECT nextval('acp_messages_id_seq') FROM generate_series(1, %s)",
            (len(message_rows),),
        )
    )
    id_map = {int(m[0]): new_id for m, new_id in zip(message_rows, new_ids, strict=True)}
    columns = list(zip(*message_rows, strict=True))
    pg.execute(
        "INSERT INTO acp_messages"
        " (id, session_id, role, content, reasoning_content, created_at, turn_seq)"
        " SELECT id, %s, role, content, reasoning, created_at, turn_seq"
        " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
        " %s::bigint[]) AS m(id, role, content, reasoning, created_at, turn_seq) ORDER BY id",
        (
            session_row_id,
            new_ids,
            *([_text(v) for v in columns[index]] for index in (1, 2, 3, 4)),
            list(columns[5]),
        ),
    )
    if tool_rows:
        tools = list(zip(*tool_rows, strict=True))
        pg.execute(
            "INSERT INTO acp_tool_calls (message_id, tool_call_id, tool_name, event_kind,"
            " payload, outcome, created_at, ok, record_json)"
            " SELECT message_id, call_id, name, kind, payload, outcome, created_at, ok, record"
            " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
            " %s::text[], %s::text[], %s::integer[], %s::text[]) WITH ORDINALITY AS"
            " t(message_id, call_id, name, kind, payload, outcome, created_at, ok, record,"
            " position) ORDER BY position",
            (
                [id_map[int(v)] for v in tools[0]],
                *([_text(v) for v in tools[index]] for index in (1, 2, 3, 4, 5, 6)),
                list(tools[7]),
                [_text(v) for v in tools[8]],
            ),
        )
    return True
