"""Spending and action budgets: the ``[cost]`` and ``[actions]`` tables and the runtime
profile's ``max_actions_per_hour`` / ``max_cost_per_day_cents`` (``docs/agents.md``,
"Budgets")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from msgspec.structs import replace

from acp_core.gateway_contract import principal_problem
from acp_server.config.values import ActionsConfig, CostConfig, ModelPrice, RuntimeProfileConfig

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

COST_KEYS: Final = frozenset(
    {"enabled", "daily_limit_usd", "monthly_limit_usd", "rates"}
    | {"per_principal_daily_cents", "principals"}
    # ZeroClaw's warning and enforcement knobs: accepted, they change nothing here
    # (a cap reached always fails the turn).
    | {"warn_at_percent", "allow_override", "track_per_agent", "enforcement"}
)
ACTIONS_KEYS: Final = frozenset({"per_principal_per_hour", "principals"})
PRICE_KEYS: Final = frozenset({"input_per_mtok", "output_per_mtok", "cached_input_per_mtok"})


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


def parse_cost(parser: ConfigParser, doc: Mapping[str, Any]) -> CostConfig:
    """The ``[cost]`` table (ZeroClaw's keys and defaults)."""
    t = parser.table(doc, "cost", "cost")
    parser.warn_unknown(t, COST_KEYS, "cost")
    default = CostConfig()
    return CostConfig(
        enabled=parser.get(t, "enabled", "cost.enabled", bool, default.enabled),
        daily_limit_usd=parser.get(
            t,
            "daily_limit_usd",
            "cost.daily_limit_usd",
            float,
            default.daily_limit_usd,
            _not_negative,
        ),
        monthly_limit_usd=parser.get(
            t,
            "monthly_limit_usd",
            "cost.monthly_limit_usd",
            float,
            default.monthly_limit_usd,
            _not_negative,
        ),
        rates=_parse_rates(parser, t),
        per_principal_daily_cents=(
            parser.get(
                t,
                "per_principal_daily_cents",
                "cost.per_principal_daily_cents",
                int,
                0,
                _not_negative,
            )
            if "per_principal_daily_cents" in t
            else None
        ),
        principal_daily_cents=_principal_caps(parser, t, "cost", "max_cost_per_day_cents"),
    )


def _principal_caps(
    parser: ConfigParser, section: Mapping[str, Any], name_of_section: str, key: str
) -> dict[str, int]:
    """``[<section>.principals.<name>] <key>``: each gateway principal's own cap (spend per
    day, actions per hour), over the section's per-principal default."""
    principals = parser.table(section, "principals", f"{name_of_section}.principals")
    caps: dict[str, int] = {}
    for name in principals:
        dotted = f"{name_of_section}.principals.{name}"
        body = parser.table(principals, name, dotted)
        parser.warn_unknown(body, frozenset({key}), dotted)
        if key in body:
            caps[name] = parser.get(body, key, f"{dotted}.{key}", int, 0, _not_negative)
    return caps


def parse_actions(parser: ConfigParser, doc: Mapping[str, Any]) -> ActionsConfig:
    """The ``[actions]`` table: each gateway principal's hourly action budget, the
    per-principal counterpart of the runtime profile's ``max_actions_per_hour`` (named as
    ``[cost] per_principal_daily_cents`` and ``[cost.principals.<name>]`` are)."""
    t = parser.table(doc, "actions", "actions")
    parser.warn_unknown(t, ACTIONS_KEYS, "actions")
    default = (
        parser.get(
            t, "per_principal_per_hour", "actions.per_principal_per_hour", int, 0, _not_negative
        )
        if "per_principal_per_hour" in t
        else None
    )
    # A name no token can carry would never match: say so rather than cap nobody.
    for name in parser.table(t, "principals", "actions.principals"):
        problem = principal_problem(name)
        if problem is not None:
            raise parser.error(f"actions.principals.{name}", problem)
    caps = _principal_caps(parser, t, "actions", "max_actions_per_hour")
    return ActionsConfig(per_principal_per_hour=default, principal_per_hour=caps)


def _parse_rates(
    parser: ConfigParser, cost: Mapping[str, Any]
) -> dict[tuple[str, str], ModelPrice]:
    """``[cost.rates.providers.models.<type>."<model>"]`` tables."""
    rates = parser.table(cost, "rates", "cost.rates")
    parser.warn_unknown(rates, frozenset({"providers"}), "cost.rates")
    providers = parser.table(rates, "providers", "cost.rates.providers")
    parser.warn_unknown(providers, frozenset({"models"}), "cost.rates.providers")
    models = parser.table(providers, "models", "cost.rates.providers.models")
    prices: dict[tuple[str, str], ModelPrice] = {}
    for provider_type in models:
        type_key = f"cost.rates.providers.models.{provider_type}"
        by_model = parser.table(models, provider_type, type_key)
        for model in by_model:
            key = f'{type_key}."{model}"'
            body = parser.table(by_model, model, key)
            parser.warn_unknown(body, PRICE_KEYS, key)
            prices[(provider_type, model)] = ModelPrice(
                input_per_mtok=parser.get(
                    body, "input_per_mtok", f"{key}.input_per_mtok", float, 0.0, _not_negative
                ),
                output_per_mtok=parser.get(
                    body, "output_per_mtok", f"{key}.output_per_mtok", float, 0.0, _not_negative
                ),
            )
            # Cached input is billed at the input rate: providers report no cached count.
            parser.get(
                body, "cached_input_per_mtok", f"{key}.cached_input_per_mtok", float, 0.0,
                _not_negative,
            )  # fmt: skip
    return prices


def with_runtime_budget(
    parser: ConfigParser, body: Mapping[str, Any], prefix: str, profile: RuntimeProfileConfig
) -> RuntimeProfileConfig:
    """``profile`` with the runtime profile's ``max_actions_per_hour`` and
    ``max_cost_per_day_cents`` (both unset: no limit)."""
    actions = parser.get(
        body, "max_actions_per_hour", f"{prefix}.max_actions_per_hour", int, 0, _not_negative
    )
    cents = parser.get(
        body, "max_cost_per_day_cents", f"{prefix}.max_cost_per_day_cents", int, -1, _not_negative
    )
    return replace(
        profile,
        max_actions_per_hour=actions if "max_actions_per_hour" in body else None,
        max_cost_per_day_cents=cents if "max_cost_per_day_cents" in body else None,
    )
