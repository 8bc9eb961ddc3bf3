"""``zeroclaw cost``: what the agents spent, per UTC day, agent and principal (the gateway
principal a call was made for; ``(operator)`` for the local operator), from the spending
ledger of the session store (``acp_spend``, storage/spend.py; the SQLite file, or PostgreSQL
with ``[storage] url``), against the ``[cost]`` caps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import click

from acp_server.cli.main import EXIT_CONFIG_ERROR, fail
from acp_server.cli.sessions import (
    _CONFIG_DIR_OPTION,
    _JSON_OPTION,
    EXIT_STORE_ERROR,
    OPERATOR_LABEL,
    _open_existing,
    _print_json,
    plain_table,
    store_location,
)
from acp_server.config import Config, ConfigError, load_config, resolve_config_dir
from acp_server.storage import SpendRow, StoreError

DEFAULT_COST_DAYS: Final = 30


def _config(config_dir: Path | None) -> Config:
    if config_dir is None:
        inherited = click.get_current_context().find_root().params.get("config_dir")
        config_dir = inherited if isinstance(inherited, Path) else None
    try:
        return load_config(resolve_config_dir(config_dir))
    except ConfigError as exc:
        fail(str(exc), code=EXIT_CONFIG_ERROR)


def _rows(config: Config, since_day: str) -> list[SpendRow]:
    store = _open_existing(store_location(config))
    if store is None:
        return []
    try:
        return store.spend_summary(since_day)
    except StoreError as exc:
        fail(str(exc), code=EXIT_STORE_ERROR)
    finally:
        store.close()


@click.command("cost")
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=DEFAULT_COST_DAYS,
    show_default=True,
    help="How many UTC days back to show, today included.",
)
@_CONFIG_DIR_OPTION
@_JSON_OPTION
def cost_command(days: int, config_dir: Path | None, as_json: bool) -> None:
    """Show model spend per UTC day, agent and principal, and today's and this month's
    totals against the [cost] limits (each principal's today against its own cap)."""
    config = _config(config_dir)
    today = datetime.now(UTC).date()
    since = (today - timedelta(days=days - 1)).isoformat()
    month_start = today.replace(day=1).isoformat()
    rows = _rows(config, min(since, month_start))
    shown = [row for row in rows if row.day >= since]
    day_total = sum(row.cost_usd for row in rows if row.day == today.isoformat())
    month_total = sum(row.cost_usd for row in rows if row.day >= month_start)
    cost = config.cost
    principals_today: dict[str, float] = {}
    for row in rows:
        if row.day == today.isoformat() and row.principal is not None:
            principals_today[row.principal] = (
                principals_today.get(row.principal, 0.0) + row.cost_usd
            )
    if as_json:
        _print_json(
            {
                "days": [
                    {
                        "day": row.day,
                        "agent": row.agent_alias,
                        "principal": row.principal,
                        "calls": row.calls,
                        "inputTokens": row.input_tokens,
                        "outputTokens": row.output_tokens,
                        "costUsd": row.cost_usd,
                    }
                    for row in shown
                ],
                "todayUsd": day_total,
                "monthUsd": month_total,
                "dailyLimitUsd": cost.daily_limit_usd if cost.enabled else None,
                "monthlyLimitUsd": cost.monthly_limit_usd if cost.enabled else None,
                "principalsTodayUsd": principals_today,
            }
        )
        return
    if shown:
        headers = ("DAY (UTC)", "AGENT", "PRINCIPAL", "CALLS", "INPUT", "OUTPUT", "USD")
        cells = [
            (
                row.day,
                row.agent_alias,
                row.principal or OPERATOR_LABEL,
                str(row.calls),
                str(row.input_tokens),
                str(row.output_tokens),
                f"{row.cost_usd:.4f}",
            )
            for row in shown
        ]
        click.echo(plain_table(headers, cells))
    else:
        click.echo(f"No priced model calls in the last {days} days.")
    limits = (
        (f" of ${cost.daily_limit_usd:.2f}", f" of ${cost.monthly_limit_usd:.2f}")
        if cost.enabled
        else ("", "")
    )
    click.echo(
        f"Today ({today.isoformat()} UTC): ${day_total:.4f}{limits[0]}; "
        f"this month: ${month_total:.4f}{limits[1]}"
    )
    for principal, spent in sorted(principals_today.items()):
        cents = cost.principal_cap_cents(principal)
        of = "" if cents is None else f" of ${cents / 100:.2f}"
        click.echo(f"Today, principal {principal}: ${spent:.4f}{of}")
