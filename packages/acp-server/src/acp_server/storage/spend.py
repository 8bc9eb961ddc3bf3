"""The spending ledger (``acp_spend``): one row per priced model call, by UTC day, agent and
principal (the gateway principal it was made for; NULL for the local operator).

Every process sharing a session store shares its ledger, so the ``[cost]`` caps hold over
all of them (agent/limits/spend.py checks them; ``zeroclaw cost`` shows the rows by day and agent).
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
    principal: str | None = None
    """The gateway principal the call was made for (None: the local operator)."""


class SpendTotals(msgspec.Struct, frozen=True):
    """What was spent on ``day`` (every agent), in its month, by one agent on ``day`` and
    by one principal on ``day``."""

    day_usd: float = 0.0
    month_usd: float = 0.0
    agent_day_usd: float = 0.0
    principal_day_usd: float = 0.0


class SpendRow(msgspec.Struct, frozen=True):
    """One day's spend of one agent."""

    day: str
    agent_alias: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    principal: str | None = None


def insert_spend(conn: Connection, dialect: Dialect, entry: SpendEntry) -> None:
    conn.execute(
        "INSERT INTO acp_spend (day, agent_alias, session_uuid, model, input_tokens,"
        f" output_tokens, cost_usd, created_at, principal) VALUES ({dialect.params(9)})",
        (
            entry.day,
            dialect.text(entry.agent_alias),
            dialect.text(entry.session_id),
            dialect.text(entry.model),
            entry.input_tokens,
            entry.output_tokens,
            entry.cost_usd,
            entry.created_at,
            dialect.optional_text(entry.principal),
        ),
    )


def read_totals(
    conn: Connection, dialect: Dialect, day: str, agent_alias: str, principal: str | None = None
) -> SpendTotals:
    """Totals for ``day`` (``YYYY-MM-DD``) and its calendar month (``principal_day_usd``:
    0 unless ``principal`` is given)."""
    p = dialect.placeholder
    month = day[:7]
    row = conn.execute(
        f"SELECT coalesce(sum(CASE WHEN day = {p} THEN cost_usd END), 0),"
        " coalesce(sum(cost_usd), 0),"
        f" coalesce(sum(CASE WHEN day = {p} AND agent_alias = {p} THEN cost_usd END), 0),"
        f" coalesce(sum(CASE WHEN day = {p} AND principal = {p} THEN cost_usd END), 0)"
        f" FROM acp_spend WHERE day >= {p} AND day <= {p}",
        (
            day,
            day,
            dialect.text(agent_alias),
            day,
            dialect.optional_text(principal),
            f"{month}-01",
            f"{month}-31",
        ),
    ).fetchone()
    return SpendTotals(
        day_usd=float(row[0]),
        month_usd=float(row[1]),
        agent_day_usd=float(row[2]),
        principal_day_usd=float(row[3]),
    )


def read_summary(conn: Connection, dialect: Dialect, since_day: str) -> list[SpendRow]:
    """Spend per day, agent and principal from ``since_day`` on, newest day first."""
    rows = conn.execute(
        "SELECT day, agent_alias, count(*), sum(input_tokens), sum(output_tokens),"
        " sum(cost_usd), principal FROM acp_spend"
        f" WHERE day >= {dialect.placeholder} GROUP BY day, agent_alias, principal"
        " ORDER BY day DESC, agent_alias, principal IS NOT NULL, principal",
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
            principal=dialect.read_optional_text(principal),
        )
        for day, alias, calls, tokens_in, tokens_out, cost, principal in rows
    ]
