"""What the PostgreSQL store keeps beside a session's history, as the SQLite store does:
its extra jail roots (ACP ``additionalDirectories``), its config option choices, and the
spending ledger of the ``[cost]`` caps (storage/spend.py) that every replica shares.

The columns and the table are PostgreSQL schema step 3 (storage/postgres_schema.py); values
are stored as the SQLite store stores them, so both decode with the same functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg

from acp_server.storage.codec import escape_nul, unescape_nul
from acp_server.storage.session_config import (
    decode_choices,
    decode_directories,
    encode_choices,
    encode_directories,
)
from acp_server.storage.spend import SpendEntry, SpendRow, SpendTotals

Connection = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")


class SessionExtras:
    """The store methods beyond history (storage/contract.py); ``PostgresSessionStore``
    supplies ``_run``, which runs a body in one transaction on its connection."""

    def _run(self, body: Callable[[Connection], T], *, read_only: bool = False) -> T:
        raise NotImplementedError

    def set_additional_dirs(self, session_id: str, directories: Sequence[str]) -> bool:
        return self._update_column(
            "additional_dirs_json", session_id, encode_directories(directories)
        )

    def additional_dirs(self, session_id: str) -> tuple[str, ...]:
        return decode_directories(self._read_column("additional_dirs_json", session_id))

    def set_config_choices(self, session_id: str, choices: Mapping[str, str]) -> bool:
        return self._update_column("config_json", session_id, encode_choices(choices))

    def config_choices(self, session_id: str) -> dict[str, str]:
        return decode_choices(self._read_column("config_json", session_id))

    def record_spend(self, entry: SpendEntry) -> None:
        def insert(conn: Connection) -> None:
            conn.execute(
                "INSERT INTO acp_spend (day, agent_alias, session_uuid, model, input_tokens,"
                " output_tokens, cost_usd, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    entry.day,
                    escape_nul(entry.agent_alias),
                    escape_nul(entry.session_id),
                    escape_nul(entry.model),
                    entry.input_tokens,
                    entry.output_tokens,
                    entry.cost_usd,
                    entry.created_at,
                ),
            )

        self._run(insert)

    def spend_totals(self, day: str, agent_alias: str) -> SpendTotals:
        month = day[:7]

        def read(conn: Connection) -> SpendTotals:
            row = conn.execute(
                "SELECT coalesce(sum(CASE WHEN day = %s THEN cost_usd END), 0),"
                " coalesce(sum(cost_usd), 0),"
                " coalesce(sum(CASE WHEN day = %s AND agent_alias = %s THEN cost_usd END), 0)"
                " FROM acp_spend WHERE day >= %s AND day <= %s",
                (day, day, escape_nul(agent_alias), f"{month}-01", f"{month}-31"),
            ).fetchone()
            assert row is not None  # an aggregate always answers one row
            return SpendTotals(
                day_usd=float(row[0]), month_usd=float(row[1]), agent_day_usd=float(row[2])
            )

        return self._run(read, read_only=True)

    def spend_summary(self, since_day: str) -> list[SpendRow]:
        def read(conn: Connection) -> list[SpendRow]:
            rows = conn.execute(
                "SELECT day, agent_alias, count(*), sum(input_tokens), sum(output_tokens),"
                " sum(cost_usd) FROM acp_spend WHERE day >= %s GROUP BY day, agent_alias"
                " ORDER BY day DESC, agent_alias",
                (since_day,),
            ).fetchall()
            return [
                SpendRow(
                    day=str(day),
                    agent_alias=unescape_nul(str(alias)),
                    calls=int(calls),
                    input_tokens=int(tokens_in),
                    output_tokens=int(tokens_out),
                    cost_usd=float(cost),
                )
                for day, alias, calls, tokens_in, tokens_out, cost in rows
            ]

        return self._run(read, read_only=True)

    def _update_column(self, column: str, session_id: str, value: str | None) -> bool:
        # ``column`` is one of this class's literals, never input.
        def update(conn: Connection) -> bool:
            cursor = conn.execute(
                f"UPDATE acp_sessions SET {column} = %s WHERE session_uuid = %s",
                (value, escape_nul(session_id)),
            )
            return cursor.rowcount > 0

        return self._run(update)

    def _read_column(self, column: str, session_id: str) -> str | None:
        def read(conn: Connection) -> str | None:
            row = conn.execute(
                f"SELECT {column} FROM acp_sessions WHERE session_uuid = %s",
                (escape_nul(session_id),),
            ).fetchone()
            return None if row is None or row[0] is None else str(row[0])

        return self._run(read, read_only=True)
