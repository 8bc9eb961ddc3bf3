"""Argument validation shared by the built-in tools.

Models send arguments as a decoded JSON object; these helpers turn a wrong type or a
missing field into a ``RefusedCall`` error the model can act on, naming the field.
Tools read every argument through them before doing anything, so such a call did not run
(the action budget does not count it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from acp_server.agent.tools._text import LONE_SURROGATE
from acp_server.agent.tools.base import RefusedCall


def checked_text(key: str, value: str) -> str:
    """``value`` (the argument ``key``, or a string inside it) when it is text: a lone
    surrogate (JSON's unpaired ``\\ud800``) is refused, naming where it is."""
    found = LONE_SURROGATE.search(value)
    if found is not None:
        raise RefusedCall(
            f"Invalid '{key}': contains the unpaired surrogate \\u{ord(found.group()):04x} "
            f"at position {found.start()}, which is not text"
        )
    return value


def unreadable_argument(arguments: Mapping[str, Any]) -> str | None:
    """Why a call's arguments are not text, or None: the first string anywhere in them
    (names included, at any depth) holding a lone surrogate. The runtime refuses such a
    call before deciding, showing or running it, for every tool alike (tools/base.py)."""

    def first(value: Any, where: str) -> str | None:
        if isinstance(value, str):
            found = LONE_SURROGATE.search(value)
            if found is None:
                return None
            return (
                f"Invalid '{where}': contains the unpaired surrogate "
                f"\\u{ord(found.group()):04x} at position {found.start()}, which is not text"
            )
        if isinstance(value, Mapping):
            for key, item in value.items():
                name = str(key)
                if LONE_SURROGATE.search(name) is not None:
                    shown = name.encode("utf-8", "backslashreplace").decode()
                    inside = f" in '{where}'" if where else ""
                    return f"Invalid argument name {shown!r}{inside}: it is not text"
                problem = first(item, f"{where}.{name}" if where else name)
                if problem is not None:
                    return problem
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                problem = first(item, f"{where}[{index}]")
                if problem is not None:
                    return problem
        return None

    return first(arguments, "")


def required_str(arguments: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise RefusedCall(f"Missing or invalid '{key}': expected a string")
    if not allow_empty and not value:
        raise RefusedCall(f"'{key}' must not be empty")
    return checked_text(key, value)


def optional_str(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RefusedCall(f"Invalid '{key}': expected a string")
    return checked_text(key, value)


def optional_int(
    arguments: Mapping[str, Any], key: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    # JSON numbers may arrive as 3.0; bool is an int subclass and never meant here.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RefusedCall(f"Invalid '{key}': expected an integer")
    if value < minimum:
        raise RefusedCall(f"Invalid '{key}': must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise RefusedCall(f"Invalid '{key}': must be at most {maximum}")
    return value


def optional_bool(arguments: Mapping[str, Any], key: str) -> bool | None:
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise RefusedCall(f"Invalid '{key}': expected true or false")
    return value


def strip_control_chars(text: str) -> str:
    """Drop C0/C1 control characters (titles, MIME types: display-only strings)."""
    return "".join(char for char in text if char.isprintable() or char == " ")
