"""Paging the stored sessions for ACP ``session/list``: newest activity first, optionally
only one workspace, each page ending in an opaque cursor that names where the next starts.

The cursor is the (last_activity, row id) of the page's last session, so a page never
repeats or skips a session that stayed put while the client paged (keyset paging: a
session touched meanwhile moves to the front, where a new listing finds it).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from acp_server.storage.codec import parse_time
from acp_server.storage.dialect import Connection, Dialect
from acp_server.storage.records import StoredSessionInfo

DEFAULT_PAGE_SIZE: Final = 50
"""Sessions per ``session/list`` page."""


SESSION_INFO_SELECT: Final = (
    "SELECT s.id, s.session_uuid, s.agent_alias, s.workspace_dir, s.created_at,"
    " s.last_activity, s.token_count, s.turn_count, s.title,"
    " (SELECT count(*) FROM acp_messages AS m WHERE m.session_id = s.id), s.principal"
    " FROM acp_sessions AS s"
)
"""The columns ``session_info`` reads, for every listing of sessions."""
NEWEST_FIRST: Final = "ORDER BY s.last_activity DESC, s.id DESC"


def session_info(row: Sequence[Any], dialect: Dialect) -> StoredSessionInfo:
    """One row of ``SESSION_INFO_SELECT`` as a ``StoredSessionInfo``."""
    text = dialect.read_text
    return StoredSessionInfo(
        session_id=text(row[1]),
        agent_alias=text(row[2]),
        workspace_dir=text(row[3]),
        created_at=parse_time(row[4]),
        last_activity=parse_time(row[5]),
        token_count=int(row[6]),
        turn_count=int(row[7]),
        title=dialect.read_optional_text(row[8]),
        message_count=int(row[9]),
        principal=dialect.read_optional_text(row[10]),
    )


class BadCursor(ValueError):
    """The cursor is not one a ``session/list`` page handed out."""


class SessionPage(msgspec.Struct, frozen=True):
    sessions: tuple[StoredSessionInfo, ...]
    next_cursor: str | None


def encode_cursor(last_activity: str, row_id: int) -> str:
    text = json.dumps([last_activity, row_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, int]:
    """Raises ``BadCursor`` for anything ``encode_cursor`` did not make."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error) as exc:
        raise BadCursor(cursor) from exc
    match value:
        case [str() as last_activity, int() as row_id] if not isinstance(row_id, bool):
            return last_activity, row_id
    raise BadCursor(cursor)


def page_query(
    *,
    workspace_dir: str | None,
    cursor: str | None,
    page_size: int,
    placeholder: str,
    principal: str | None = None,
) -> tuple[str, list[object]]:
    """The SELECT of one page (filtered to ``workspace_dir`` and to ``principal``'s
    sessions when given) after ``cursor``, and its parameters; ``placeholder`` is the
    driver's (SQLite ``?``, psycopg ``%s``). It asks for one row more than a page, which
    ``page_from_rows`` reads as "more"."""
    conditions: list[str] = []
    params: list[object] = []
    if principal is not None:
        conditions.append(f"s.principal = {placeholder}")
        params.append(principal)
    if workspace_dir is not None:
        conditions.append(f"s.workspace_dir = {placeholder}")
        params.append(workspace_dir)
    if cursor is not None:
        last_activity, row_id = decode_cursor(cursor)
        conditions.append(f"(s.last_activity, s.id) < ({placeholder}, {placeholder})")
        params.extend((last_activity, row_id))
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    params.append(page_size + 1)
    return f"{SESSION_INFO_SELECT}{where} {NEWEST_FIRST} LIMIT {placeholder}", params


def page_from_rows(rows: Sequence[Sequence[Any]], page_size: int, dialect: Dialect) -> SessionPage:
    """The page ``page_query``'s rows make, with the cursor of the next one when more."""
    more = len(rows) > page_size
    rows = rows[:page_size]
    sessions = tuple(session_info(row, dialect) for row in rows)
    next_cursor = encode_cursor(rows[-1][5], int(rows[-1][0])) if more else None
    return SessionPage(sessions=sessions, next_cursor=next_cursor)


def read_page(
    conn: Connection,
    dialect: Dialect,
    *,
    workspace_dir: str | None,
    cursor: str | None,
    page_size: int = DEFAULT_PAGE_SIZE,
    principal: str | None = None,
) -> SessionPage:
    """One page of sessions (filtered to ``workspace_dir``, and to ``principal``'s
    sessions, when given) after ``cursor``; raises ``BadCursor``."""
    query, params = page_query(
        workspace_dir=None if workspace_dir is None else dialect.text(workspace_dir),
        cursor=cursor,
        page_size=page_size,
        placeholder=dialect.placeholder,
        principal=dialect.optional_text(principal),
    )
    return page_from_rows(conn.execute(query, params).fetchall(), page_size, dialect)
