"""The tool set of an ACP session: the built-in tools plus any MCP tools.

ACP sessions carry no memory tools (the ZeroClaw ACP documentation, "Memory"): memory_recall, memory_store,
memory_forget, memory_export and memory_purge are never registered here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from acp_server.agent.providers.base import ToolSpec
from acp_server.agent.tools.base import Tool, ToolDefinition
from acp_server.agent.tools.deliver import DeliverFileTool
from acp_server.agent.tools.files import FileEditTool, FileReadTool, FileWriteTool
from acp_server.agent.tools.interaction import AskUserTool, EscalateToHumanTool, TodoWriteTool
from acp_server.agent.tools.search import ContentSearchTool, GlobSearchTool
from acp_server.agent.tools.shell import ShellTool
from acp_server.agent.tools.web import HttpRequestTool, WebFetchTool
from acp_server.config.values import WebConfig

logger = logging.getLogger(__name__)


BUILTIN_TOOL_CLASSES: Final = (
    ShellTool,
    FileReadTool,
    FileWriteTool,
    FileEditTool,
    GlobSearchTool,
    ContentSearchTool,
    DeliverFileTool,
    AskUserTool,
    EscalateToHumanTool,
    TodoWriteTool,
    WebFetchTool,
    HttpRequestTool,
)
"""Every built-in tool, in the order the model sees them."""


WEB_TOOL_CLASSES: Final = (WebFetchTool, HttpRequestTool)
"""The built-in tools built with the ``[web]`` settings."""


def builtin_tools(web: WebConfig | None = None) -> list[Tool]:
    """Fresh instances of every built-in tool, in the order the model sees them."""
    return [
        tool_class(web) if tool_class in WEB_TOOL_CLASSES else tool_class()
        for tool_class in BUILTIN_TOOL_CLASSES
    ]


_BUILTIN_DEFINITIONS: Final[dict[str, ToolDefinition]] = {
    tool_class.definition.name: tool_class.definition for tool_class in BUILTIN_TOOL_CLASSES
}


def definition_for(name: str) -> ToolDefinition:
    """The definition of the tool called ``name``: a built-in's own, else the fallback
    (MCP and unknown tools). Live turns and replay look tools up the same way, so a call
    looks the same in both. ``build_tools`` never lets an MCP tool shadow a built-in."""
    definition = _BUILTIN_DEFINITIONS.get(name)
    return definition if definition is not None else ToolDefinition.fallback(name)


def definition_of(tool: Tool | None, name: str) -> ToolDefinition:
    """The definition a session's tool declares (a skill's tool carries its command rules),
    else ``definition_for(name)``."""
    own = getattr(tool, "definition", None)
    return own if isinstance(own, ToolDefinition) else definition_for(name)


def build_tools(
    *, include_mcp: Sequence[Tool] = (), web: WebConfig | None = None
) -> dict[str, Tool]:
    """All built-in tools by name, then ``include_mcp``.

    An MCP tool whose name collides with a built-in (or an earlier MCP tool) is skipped
    with a warning: the built-in's security checks must not be shadowed.
    """
    tools: dict[str, Tool] = {tool.name: tool for tool in builtin_tools(web)}
    for tool in include_mcp:
        if tool.name in tools:
            logger.warning("MCP tool %r skipped: a tool with that name already exists", tool.name)
            continue
        tools[tool.name] = tool
    return tools


def tool_specs(tools: Mapping[str, Tool] | Iterable[Tool]) -> list[ToolSpec]:
    """What the model is told about each tool."""
    values = tools.values() if isinstance(tools, Mapping) else tools
    return [ToolSpec(tool.name, tool.description, tool.parameters) for tool in values]
