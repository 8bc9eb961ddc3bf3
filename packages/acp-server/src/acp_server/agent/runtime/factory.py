"""What a session is built from: the factories of its tools and its security policy.

``AcpApp`` (acp_server/protocol/services/context.py) holds one of each, so tests and the
gateway can hand a session other tools or another policy; production uses the defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeAlias

from acp_server.agent.tools.base import Tool
from acp_server.config import AgentConfig, Config, RiskProfileConfig
from acp_server.security import SecurityPolicy

ToolsFactory: TypeAlias = Callable[[AgentConfig, Path, Config], Mapping[str, Tool]]
PolicyFactory: TypeAlias = Callable[[RiskProfileConfig, Path], SecurityPolicy]


def default_tools_factory(
    agent: AgentConfig, workspace: Path, config: Config
) -> Mapping[str, Tool]:
    """The built-in tools (memory tools are never part of ACP sessions: the ZeroClaw ACP
    documentation, "Memory").

    Tools are stateless: the session's workspace and policy reach them through
    ``ToolContext`` on every call.
    """
    # Made on first use: the tools' modules (and httpx for the web tools) are not loaded
    # before a turn needs them (tests/e2e/test_startup_imports.py).
    from acp_server.agent.tools.builtin_set import BuiltinTools

    return BuiltinTools(config.web)
