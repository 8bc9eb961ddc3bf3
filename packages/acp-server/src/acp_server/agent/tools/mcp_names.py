"""The name prefix of the tools an MCP server lends a session, apart from ``mcp.py``.

The action limits and the turn only need to recognise such a name; importing it from
here keeps ``agent/tools/mcp.py`` (and what it imports) off ``zeroclaw acp``'s start,
which ``tests/e2e/test_startup_imports.py`` checks. ``mcp.py`` builds the names with it.
"""

from __future__ import annotations

from typing import Final

MCP_TOOL_PREFIX: Final = "mcp__"
