"""The statements of a session and its conversation, written once for both SQL backends.

Each function runs inside a transaction its caller opened (``SqlSessionStore`` and the
backends' ``_write`` / ``_read``) on a connection of either driver; ``dialect`` gives the
placeholder and the NUL escaping (storage/dialect.py). Only the insert of a turn's messages
differs by backend (one row at a time with SQLite's ``lastrowid``, batched through
``unnest`` in PostgreSQL), so the backends supply that part themselves.

The tables (storage/sqlite/schema.py; PostgreSQL has the same names and columns):

* ``acp_sessions``: one row per session (uuid, owner alias, workspace, timestamps,
  ``token_count``, ``plan_json`` = the latest plan, ``turn_count``, ``title``,
  ``owner_epoch`` = the fencing epoch of its one live copy: ``claim``).
* ``acp_messages``: one row per ``ChatMessage`` in conversation order (``id`` order),
  ``turn_seq`` = the turn that wrote it.
* ``acp_tool_calls``: ``'in'`` rows are the tool calls of a message (``payload`` = arguments
  JSON); an ``'out'`` row carries a tool result (``payload`` = result text) with its
  ``tool_call_id`` and ``tool_name``, attached to the ``tool`` message that holds the result
  (so any message order round-trips exactly); ``decode_messages`` also reads results
  attached to the preceding assistant message, the layout of databases that ZeroClaw's own
  server wrote.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from acp_server.storage.codec import (
    decode_messages,
    parse_time,
    plan_from_json,
    restore_window,
    unescape_nul,
)
from acp_server.storage.dialect import Connection, Dialect
from acp_server.storage.records import (
    CREATOR_EPOCH,
    DuplicateSession,
    SessionFenced,
    StoredSession,
    StoredSessionInfo,
    UnknownSession,
)
from acp_server.storage.session_list import NEWEST_FIRST, SESSION_INFO_SELECT, session_info

SessionNumber = Literal["id", "owner_epoch"]

_SESSION_ROW: Final = (
    "SELECT id, agent_alias, workspace_dir, created_at, last_activity, plan_json,"
    " token_count, turn_count, title, principal FROM acp_sessions WHERE session_uuid = "
)


def not_found(session_id: str) -> UnknownSession:
    return UnknownSession(f"Session not found in the store: {session_id}")


def insert_session(
    conn: Connection,
    dialect: Dialect,
    session_id: str,
    agent_alias: str,
    workspace_dir: str,
    now: str,
    principal: str | None = None,
) -> None:
    """Store a new, empty session of ``principal`` (None: the local operator), held by its
    creator at ``CREATOR_EPOCH``; ``DuplicateSession`` (nothing written) when the id is
    taken."""
    text = dialect.text
    row = conn.execute(
        "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir, created_at,"
        f" last_activity, owner_epoch, principal) VALUES ({dialect.params(7)})"
        " ON CONFLICT (session_uuid) DO NOTHING RETURNING id",
        (
            text(session_id),
            text(agent_alias),
            text(workspace_dir),
            now,
            now,
            CREATOR_EPOCH,
            dialect.optional_text(principal),
        ),
    ).fetchall()  # all: the statement is finished before the transaction commits
    if not row:
        raise DuplicateSession(f"Session {session_id} is already stored")


def claim(conn: Connection, dialect: Dialect, session_id: str) -> int | None:
    """Bump the session's fencing epoch and return the new value (None: not stored)."""
    row = conn.execute(
        "UPDATE acp_sessions SET owner_epoch = owner_epoch + 1"
        f" WHERE session_uuid = {dialect.placeholder} RETURNING owner_epoch",
        (dialect.text(session_id),),
    ).fetchall()
    return int(row[0][0]) if row else None


def read_column(conn: Connection, dialect: Dialect, column: str, session_id: str) -> Any:
    """One column of the session's row: a one-value row, or None when it is not stored.
    ``column`` is always a name from this package, never input."""
    return conn.execute(
        f"SELECT {column} FROM acp_sessions WHERE session_uuid = {dialect.placeholder}",
        (dialect.text(session_id),),
    ).fetchone()


def owned_by(conn: Connection, dialect: Dialect, session_id: str, principal: str) -> bool:
    """Whether the session is stored and belongs to ``principal``."""
    p = dialect.placeholder
    row = conn.execute(
        f"SELECT 1 FROM acp_sessions WHERE session_uuid = {p} AND principal = {p}",
        (dialect.text(session_id), dialect.text(principal)),
    ).fetchone()
    return row is not None


def session_number(
    conn: Connection, dialect: Dialect, column: SessionNumber, session_id: str
) -> int | None:
    """The session's row id or fencing epoch (None: not stored)."""
    row = read_column(conn, dialect, column, session_id)
    return None if row is None else int(row[0])


def count_turn(
    conn: Connection,
    dialect: Dialect,
    session_id: str,
    *,
    tokens: int,
    plan_json: str | None,
    epoch: int | None,
    now: str,
) -> tuple[int, int]:
    """Count one turn on the session's row (its tokens, its plan, the activity time) and
    return (row id, the turn's number), all in one statement that also finds the session
    and, with ``epoch``, checks that it is still held at that epoch. Raises
    ``UnknownSession`` or ``SessionFenced`` when it matched no row."""
    p = dialect.placeholder
    params: list[Any] = [now, tokens, plan_json, dialect.text(session_id)]
    held = ""
    if epoch is not None:
        held = f" AND owner_epoch = {p}"
        params.append(epoch)
    row = conn.execute(
        f"UPDATE acp_sessions SET turn_count = turn_count + 1, last_activity = {p},"
        f" token_count = token_count + {p}, plan_json = coalesce({p}, plan_json)"
        f" WHERE session_uuid = {p}{held} RETURNING id, turn_count - 1",
        params,
    ).fetchall()  # all: the statement is finished before the next one starts
    if not row:
        current = session_number(conn, dialect, "owner_epoch", session_id)
        if current is None or epoch is None:
            raise not_found(session_id)
        raise SessionFenced(session_id, epoch=epoch, current=current)
    return int(row[0][0]), int(row[0][1])


def load(
    conn: Connection, dialect: Dialect, session_id: str, max_messages: int | None
) -> StoredSession | None:
    """The stored session with its newest whole turns within ``max_messages`` (always at
    least the newest turn), or None. Call it in one read transaction (one snapshot)."""
    p = dialect.placeholder
    row = conn.execute(f"{_SESSION_ROW}{p}", (dialect.text(session_id),)).fetchone()
    if row is None:
        return None
    session_row_id = int(row[0])
    per_turn = conn.execute(
        f"SELECT turn_seq, count(*) FROM acp_messages WHERE session_id = {p}"
        " GROUP BY turn_seq ORDER BY turn_seq IS NULL, turn_seq DESC",
        (session_row_id,),
    ).fetchall()
    total, first_turn = restore_window(per_turn, max_messages)
    # Rows without a turn_seq (written by ZeroClaw's own server) are the oldest turns, and
    # are kept only when everything is (first_turn None).
    window = "" if first_turn is None else f" AND m.turn_seq >= {p}"
    params = (session_row_id,) if first_turn is None else (session_row_id, first_turn)
    message_rows = conn.execute(
        "SELECT m.id, m.role, m.content, m.reasoning_content FROM acp_messages AS m"
        f" WHERE m.session_id = {p}{window} ORDER BY m.id",
        params,
    ).fetchall()
    tool_rows = conn.execute(
        "SELECT t.message_id, t.tool_call_id, t.tool_name, t.event_kind, t.payload,"
        " t.ok, t.record_json"
        " FROM acp_tool_calls AS t JOIN acp_messages AS m ON m.id = t.message_id"
        f" WHERE m.session_id = {p}{window} ORDER BY t.id",
        params,
    ).fetchall()
    if dialect.escapes_nul:  # per row, as directly as it goes: a load reads every message
        text = unescape_nul
        message_rows = [
            (r[0], text(r[1]), text(r[2]), None if r[3] is None else text(r[3]))
            for r in message_rows
        ]
        tool_rows = [
            (
                r[0],
                text(r[1]),
                text(r[2]),
                r[3],
                text(r[4]),
                r[5],
                None if r[6] is None else text(r[6]),
            )
            for r in tool_rows
        ]
    info = StoredSessionInfo(
        session_id=session_id,
        agent_alias=dialect.read_text(row[1]),
        workspace_dir=dialect.read_text(row[2]),
        created_at=parse_time(row[3]),
        last_activity=parse_time(row[4]),
        message_count=total,
        token_count=int(row[6]),
        turn_count=int(row[7]),
        title=dialect.read_optional_text(row[8]),
        principal=dialect.read_optional_text(row[9]),
    )
    return StoredSession(
        info=info,
        messages=decode_messages(message_rows, tool_rows),
        plan=plan_from_json(row[5], session_id) if row[5] is not None else None,
        dropped_messages=total - len(message_rows),
    )


def touch(conn: Connection, dialect: Dialect, session_id: str, now: str) -> None:
    """Record activity without a turn; ``UnknownSession`` when not stored."""
    p = dialect.placeholder
    cursor = conn.execute(
        f"UPDATE acp_sessions SET last_activity = {p} WHERE session_uuid = {p}",
        (now, dialect.text(session_id)),
    )
    if cursor.rowcount == 0:
        raise not_found(session_id)


def list_all(conn: Connection, dialect: Dialect) -> list[StoredSessionInfo]:
    """Every stored session, most recently active first."""
    rows = conn.execute(f"{SESSION_INFO_SELECT} {NEWEST_FIRST}", ()).fetchall()
    return [session_info(row, dialect) for row in rows]


def set_title(conn: Connection, dialect: Dialect, session_id: str, title: str) -> bool:
    """Name a session that has no title yet; False when it had one or is not stored."""
    p = dialect.placeholder
    cursor = conn.execute(
        f"UPDATE acp_sessions SET title = {p} WHERE session_uuid = {p} AND title IS NULL",
        (dialect.text(title), dialect.text(session_id)),
    )
    return cursor.rowcount > 0


def delete(conn: Connection, dialect: Dialect, session_id: str) -> bool:
    """Delete a session and (by cascade) its conversation; False when there was none."""
    cursor = conn.execute(
        f"DELETE FROM acp_sessions WHERE session_uuid = {dialect.placeholder}",
        (dialect.text(session_id),),
    )
    return cursor.rowcount > 0
