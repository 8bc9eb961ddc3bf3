"""The spending ledger (``acp_spend``): one row per priced model call, by UTC day and agent.

Every process sharing a session store shares its ledger, so the ``[cost]`` caps hold over
all of them (agent/cost.py checks them; ``zeroclaw cost`` shows the rows by day and agent).
``day`` is the call's UTC date (``YYYY-MM-DD``), ``created_at`` its UTC time (ISO 8601);
``session_uuid`` is not a reference, the ledger outlives sessions. The statements below
serve both backends (the table: SQLite schema step 5, PostgreSQL step 3).
"""

from __future__ import annotations

import msgspec

from acp_server.storage.dialect import Connection, Dialect


class SpendEntry(msgspec.Struct, frozen=True):
    """One priced model call."""

    day: str
    agent_alias: str
    session_id: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    created_at: str


class SpendTotals(msgspec.Struct, frozen=True):
    """What was spent on ``day`` (every agent), in its month, and by one agent on ``day``."""

    day_usd: float = 0.0
    month_usd: float = 0.0
    agent_day_usd: float = 0.0


class SpendRow(msgspec.Struct, frozen=True):
    """One day's spend of one agent."""

    day: str
    agent_alias: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


def insert_spend(conn: Connection, dialect: Dialect, entry: SpendEntry) -> None:
    conn.execute(
        "INSERT INTO acp_spend (day, agent_alias, session_uuid, model, input_tokens,"
        f" output_tokens, cost_usd, created_at) VALUES ({dialect.params(8)})",
        (
            entry.day,
            dialect.text(entry.agent_alias),
            dialect.text(entry.session_id),
            dialect.text(entry.model),
            entry.input_tokens,
            entry.output_tokens,
            entry.cost_usd,
            entry.created_at,
        ),
    )


def read_totals(conn: Connection, dialect: Dialect, day: str, agent_alias: str) -> SpendTotals:
    """Totals for ``day`` (``YYYY-MM-DD``) and its calendar month."""
    p = dialect.placeholder
    month = day[:7]
    row = conn.execute(
        f"SELECT coalesce(sum(CASE WHEN day = {p} THEN cost_usd END), 0),"
        " coalesce(sum(cost_usd), 0),"
        f" coalesce(sum(CASE WHEN day = {p} AND agent_alias = {p} THEN cost_usd END), 0)"
        f" FROM acp_spend WHERE day >= {p} AND day <= {p}",
        (day, day, dialect.text(agent_alias), f"{month}-01", f"{month}-31"),
    ).fetchone()
    return SpendTotals(day_usd=float(row[0]), month_usd=float(row[1]), agent_day_usd=float(row[2]))


def read_summary(conn: Connection, dialect: Dialect, since_day: str) -> list[SpendRow]:
    """Spend per day and agent from ``since_day`` on, newest day first."""
    rows = conn.execute(
        "SELECT day, agent_alias, count(*), sum(input_tokens), sum(output_tokens), sum(cost_usd)"
        f" FROM acp_spend WHERE day >= {dialect.placeholder} GROUP BY day, agent_alias"
        " ORDER BY day DESC, agent_alias",
        (since_day,),
    ).fetchall()
    return [
        SpendRow(
            day=str(day),
            agent_alias=dialect.read_text(str(alias)),
            calls=int(calls),
            input_tokens=int(tokens_in),
            output_tokens=int(tokens_out),
            cost_usd=float(cost),
        )
        for day, alias, calls, tokens_in, tokens_out, cost in rows
    ]
