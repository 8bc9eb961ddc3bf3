"""Copying sessions into the PostgreSQL store (``zeroclaw storage import-sqlite``).

Rows are copied as they are (turn numbers, timestamps, plans, tool records: see
storage/transfer.py), each session in one PostgreSQL transaction together with its line in
``acp_imported_sessions``. A session whose id the database already holds is left alone, so
running the import again, or after it was interrupted, copies nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from acp_server.storage.codec import escape_nul, now_text
from acp_server.storage.dialect import POSTGRES
from acp_server.storage.postgres.schema import Connection
from acp_server.storage.postgres.store import PostgresSessionStore
from acp_server.storage.transfer import SESSION_COLUMNS, ExportedSession

_SESSION_COLUMN_LIST: Final = ", ".join(SESSION_COLUMNS)
_TEXT_SESSION_FIELDS: Final = frozenset(
    SESSION_COLUMNS.index(column)
    for column in ("session_uuid", "agent_alias", "workspace_dir", "killed_at", "title")
)
"""Ids, paths, titles: anything a client could send, and so may hold NUL."""


@dataclass(frozen=True, slots=True)
class ImportReport:
    copied: int
    """Sessions copied by this run."""
    already_there: int
    """Sessions the database already held (an earlier import, or the same id)."""
    messages: int
    """Messages copied by this run."""


def import_sessions(
    sessions: Iterable[ExportedSession], source: str, target: PostgresSessionStore
) -> ImportReport:
    """Copy ``sessions`` (read from ``source``, which ``acp_imported_sessions`` records)
    into ``target``. Raises ``StoreError`` when the database refuses a write (sessions
    copied before it stay copied)."""
    copied = already = messages = 0
    for session in sessions:

        def copy(pg: Connection, session: ExportedSession = session) -> bool:
            return _copy_session(pg, source, session.session, session.messages, session.tool_rows)

        if target.transaction(copy):
            copied += 1
            messages += len(session.messages)
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
        f"INSERT INTO acp_sessions ({_SESSION_COLUMN_LIST})"
        f" VALUES ({POSTGRES.params(len(SESSION_COLUMNS))})"
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
