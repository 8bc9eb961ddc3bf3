"""One session's rows as a store holds them, for copying sessions from one store into
another (``zeroclaw storage import-sqlite``: storage/sqlite/export.py reads them from an
SQLite file, storage/postgres/importer.py writes them into PostgreSQL).

The rows are copied as they are, not decoded into messages and encoded again, so turn
numbers, timestamps, plans and tool records arrive exactly as they were stored. The
column lists below are the order of every row, on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

SESSION_COLUMNS: Final = (
    "session_uuid",
    "agent_alias",
    "workspace_dir",
    "token_count",
    "killed_at",
    "created_at",
    "last_activity",
    "plan_json",
    "turn_count",
    "title",
)
MESSAGE_COLUMNS: Final = ("id", "role", "content", "reasoning_content", "created_at", "turn_seq")
TOOL_COLUMNS: Final = (
    "message_id",
    "tool_call_id",
    "tool_name",
    "event_kind",
    "payload",
    "outcome",
    "created_at",
    "ok",
    "record_json",
)


@dataclass(frozen=True, slots=True)
class ExportedSession:
    session: tuple[Any, ...]
    """The ``acp_sessions`` row, in ``SESSION_COLUMNS`` order."""
    messages: list[tuple[Any, ...]]
    """Its ``acp_messages`` rows in conversation order, in ``MESSAGE_COLUMNS`` order (``id``
    is the source's: tool rows refer to it)."""
    tool_rows: list[tuple[Any, ...]]
    """Their ``acp_tool_calls`` rows in ``id`` order, in ``TOOL_COLUMNS`` order."""
