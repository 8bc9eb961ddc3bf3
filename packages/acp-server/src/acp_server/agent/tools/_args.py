"""What a tool's argument Struct cannot say (agent/tools/arguments.py declares the rest).

Arguments that are not text (a lone surrogate in any string, names included) are refused
by the runtime before any tool sees them, and by ``parse_arguments`` for a tool called
directly; display-only strings lose their control characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from acp_server.agent.tools._text import LONE_SURROGATE


def unreadable_argument(arguments: Mapping[str, Any]) -> str | None:
    """Why a call's arguments are not text, or None: the first string anywhere in them
    (names included, at any depth) holding a lone surrogate. The runtime refuses such a
    call before deciding, showing or running it, for every tool alike (tools/base.py)."""
    try:
        msgspec.json.encode(arguments)
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        pass  # a surrogate, or not JSON data: the walk below says which string, if any
    else:
        return None  # every string in them, names included, is UTF-8 text

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


def strip_control_chars(text: str) -> str:
    """Drop C0/C1 control characters (titles, MIME types: display-only strings)."""
    return "".join(char for char in text if char.isprintable() or char == " ")
