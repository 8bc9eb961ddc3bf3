"""A session's built-in tools, made when first used rather than at session/new.

Opening a session names its tools (``tuple(session.tools)``: the system prompt and the
skills' collision checks read the names) but runs none: the tools' modules (``registry.py``
imports every one of them: ~3 ms of a cold ``zeroclaw acp`` start) load at the first look
at a tool itself, which is the first turn's. ``tests/server/agent/test_tools_builtin_set.py``
checks the names here are the registry's, in the registry's order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from acp_server.agent.tools.base import Tool
    from acp_server.config.values import WebConfig

BUILTIN_TOOL_NAMES: Final = (
    "shell",
    "file_read",
    "file_write",
    "file_edit",
    "glob_search",
    "content_search",
    "deliver_file",
    "ask_user",
    "escalate_to_human",
    "todo_write",
    "web_fetch",
    "http_request",
)
"""``registry.BUILTIN_TOOL_CLASSES``' names, in the order the model sees them."""


class BuiltinTools(Mapping[str, "Tool"]):
    """``registry.build_tools(web=web)``, built at the first access to a tool (not to a
    name); a mapping like the dict it stands for (equal to it, iterated in its order)."""

    def __init__(self, web: WebConfig | None = None) -> None:
        self._web = web
        self._tools: dict[str, Tool] | None = None

    def _built(self) -> dict[str, Tool]:
        if self._tools is None:
            from acp_server.agent.tools.registry import build_tools

            self._tools = build_tools(web=self._web)
        return self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._built()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(BUILTIN_TOOL_NAMES)

    def __len__(self) -> int:
        return len(BUILTIN_TOOL_NAMES)

    def __contains__(self, name: object) -> bool:
        return name in BUILTIN_TOOL_NAMES

    def __repr__(self) -> str:
        return f"BuiltinTools({list(BUILTIN_TOOL_NAMES)!r}, built={self._tools is not None})"
