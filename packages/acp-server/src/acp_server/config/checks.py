"""Value checks the config parser applies: each returns ``None`` or the problem in words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from acp_core.gateway_contract import port_problem


def type_name(value: object) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def kind_name(kind: type) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        kind, kind.__name__
    )


def positive(value: float) -> str | None:
    return None if value > 0 else f"must be greater than 0, got {value}"


def non_negative(value: float) -> str | None:
    return None if value >= 0 else f"must not be negative, got {value}"


def listen_port(value: int) -> str | None:
    return port_problem(value, "listen")


def non_blank(value: str) -> str | None:
    return None if value.strip() else "must not be blank"


ERROR_CODE_STYLES: Final = ("zeroclaw", "acp")


def one_of(choices: tuple[str, ...]) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value in choices:
            return None
        return f"must be one of {', '.join(choices)}; got {value!r}"

    return check


def risk_level(value: str) -> str | None:
    if value in ("readonly", "supervised", "full"):
        return None
    return f"must be one of readonly, supervised, full; got {value!r}"
