"""What the SQLite store keeps beside a session's history (storage/contract.py): its extra
jail roots (ACP ``additionalDirectories``), its config option choices and the spending
ledger of the ``[cost]`` caps (storage/spend.py). ``SessionStore`` supplies the
transactions; storage/pg_session_extras.py is the PostgreSQL twin."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from acp_server.storage.session_config import (
    decode_directories,
    encode_directories,
    read_choices,
    write_choices,
)
from acp_server.storage.spend import (
    SpendEntry,
    SpendRow,
    SpendTotals,
    insert_spend,
    read_summary,
    read_totals,
)

T = TypeVar("T")


class SqliteSessionExtras:
    def _write(self, body: Callable[[sqlite3.Connection], T], within: float | None = None) -> T:
        raise NotImplementedError

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    def set_additional_dirs(self, session_id: str, directories: Sequence[str]) -> bool:
        """Store the session's extra jail roots (ACP ``additionalDirectories``), replacing
        the ones stored before; False when the session is not stored."""
        encoded = encode_directories(directories)

        def update(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE acp_sessions SET additional_dirs_json = ? WHERE session_uuid = ?",
                (encoded, session_id),
            )
            return cursor.rowcount > 0

        return self._write(update)

    def additional_dirs(self, session_id: str) -> tuple[str, ...]:
        """The session's stored extra jail roots (none for an unknown session)."""

        def read(conn: sqlite3.Connection) -> tuple[str, ...]:
            row = conn.execute(
                "SELECT additional_dirs_json FROM acp_sessions WHERE session_uuid = ?",
                (session_id,),
            ).fetchone()
            return decode_directories(row[0] if row is not None else None)

        return self._read(read)

    def set_config_choices(self, session_id: str, choices: Mapping[str, str]) -> bool:
        """Store a session's config option choices (session_config.py)."""
        return self._write(lambda conn: write_choices(conn, session_id, choices))

    def config_choices(self, session_id: str) -> dict[str, str]:
        return self._read(lambda conn: read_choices(conn, session_id))

    def record_spend(self, entry: SpendEntry) -> None:
        """Add one priced model call to the spending ledger (storage/spend.py)."""
        self._write(lambda conn: insert_spend(conn, entry))

    def spend_totals(self, day: str, agent_alias: str) -> SpendTotals:
        """What was spent on ``day`` (UTC ``YYYY-MM-DD``), in its month, and by the agent."""
        return self._read(lambda conn: read_totals(conn, day, agent_alias))

    def spend_summary(self, since_day: str) -> list[SpendRow]:
        """Spend per UTC day and agent from ``since_day`` on, newest first."""
        return self._read(lambda conn: read_summary(conn, since_day))
