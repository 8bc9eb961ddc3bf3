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


def _text(key: str, value: str) -> str:
    found = LONE_SURROGATE.search(value)
    if found is not None:
        raise RefusedCall(
            f"Invalid '{key}': contains the unpaired surrogate \\u{ord(found.group()):04x} "
            f"at position {found.start()}, which is not text"
        )
    return value


def required_str(arguments: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise RefusedCall(f"Missing or invalid '{key}': expected a string")
    if not allow_empty and not value:
        raise RefusedCall(f"'{key}' must not be empty")
    return _text(key, value)


def optional_str(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RefusedCall(f"Invalid '{key}': expected a string")
    return _text(key, value)


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
