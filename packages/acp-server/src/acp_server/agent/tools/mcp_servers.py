"""Which MCP servers a session gets, and whether ``initialize`` may offer HTTP MCP.

A session's MCP servers come from two places: ``[agents.<alias>] mcp_servers`` in
config.toml and the ``mcpServers`` of ``session/new`` (ACP's ``McpServerStdio``,
``McpServerHttp`` and ``McpServerSse``). Both are used only when the agent sets
``acp_enable_mcp`` (off by default, as in ZeroClaw's implementation): a stdio server runs an arbitrary
command on this host before any approval, and an HTTP one makes this host connect where
the client says, which a paired gateway client must not be able to do unless the operator
opted in.

Trust (docs/security.md, "MCP servers"): config.toml is the operator's, and the editor that
launched ``zeroclaw acp`` over stdio is trusted, so their servers are reached wherever they
are. A gateway client may be anyone holding a paired token, on another machine: an HTTP
server it names is reached only on public addresses (the web tools' rule, checked on every
connection, agent/tools/mcp_http.py) unless the agent sets ``mcp_allow_private_hosts``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from acp_core import schema
from acp_core.aliases import resolve_session_alias
from acp_core.errors import InvalidParamsError
from acp_server.config import (
    AgentConfig,
    AnyMcpServerConfig,
    Config,
    McpHttpServerConfig,
    McpServerConfig,
)
from acp_server.config.mcp import headers_problem, url_problem

logger = logging.getLogger(__name__)

DEFAULT_MAX_MCP_SERVERS: Final = 16
"""Servers per session; more is almost certainly a misconfiguration."""


def select_mcp_servers(
    agent: AgentConfig, requested: Sequence[schema.McpServer], *, remote: bool = False
) -> tuple[AnyMcpServerConfig, ...]:
    """The servers to start for a new session of ``agent``.

    ``requested`` is ``session/new``'s parsed ``mcpServers``; ``remote``: they come from a
    gateway client. With ``acp_enable_mcp`` off everything is ignored (logged once per
    session when the client asked for servers). With it on: the agent's configured
    servers, then the client's, a client server replacing a configured one of the same
    name.

    Raises:
        InvalidParamsError: too many servers, or one that cannot be used as given (an
            empty command, a URL that is not http(s), a header that cannot be sent).
    """
    if not agent.acp_enable_mcp:
        if requested:
            logger.warning(
                "Ignoring %d MCP server(s) from session/new: agent %r does not set "
                "acp_enable_mcp = true in config.toml",
                len(requested),
                agent.alias,
            )
        return ()
    chosen: dict[str, AnyMcpServerConfig] = {server.name: server for server in agent.mcp_servers}
    public_only = remote and not agent.mcp_allow_private_hosts
    for index, server in enumerate(requested):
        chosen[server.name] = _from_client(server, index, public_only=public_only)
    if len(chosen) > DEFAULT_MAX_MCP_SERVERS:
        raise InvalidParamsError(
            f"Too many MCP servers ({len(chosen)}); at most {DEFAULT_MAX_MCP_SERVERS} per session"
        )
    for config in chosen.values():
        if isinstance(config, McpServerConfig) and not config.command.strip():
            raise InvalidParamsError(f"MCP server {config.name!r} has an empty command")
    return tuple(chosen.values())


def _from_client(server: schema.McpServer, index: int, *, public_only: bool) -> AnyMcpServerConfig:
    if isinstance(server, schema.McpServerStdio):
        return McpServerConfig(
            name=server.name,
            command=server.command,
            args=tuple(server.args),
            env={variable.name: variable.value for variable in server.env},
        )
    headers = tuple((header.name, header.value) for header in server.headers)
    problem = url_problem(server.url) or headers_problem(headers)
    if problem is not None:
        raise InvalidParamsError(
            f"Invalid parameter: mcpServers[{index}]: MCP server {server.name!r}: {problem}"
        )
    return McpHttpServerConfig(
        name=server.name,
        url=server.url,
        transport=server.type,
        headers=headers,
        public_only=public_only,
    )


def offers_mcp_over_http(config: Config, connection_default: str | None) -> bool:
    """``mcpCapabilities.http`` and ``.sse``: whether the session a client opens connects
    the HTTP MCP servers it names, which it does when its agent sets ``acp_enable_mcp``.
    The agent is the one ``session/new`` picks without ``agentAlias`` (the connection's,
    ``default_agent``, or the sole one); when none is picked so, every agent the client
    may name must enable MCP."""
    dispatchable = {alias: agent.dispatchable for alias, agent in config.agents.items()}
    try:
        alias = resolve_session_alias(
            explicit=None,
            connection_default=connection_default,
            config_default=config.acp.default_agent,
            agents=dispatchable,
        )
    except InvalidParamsError:
        choices = [agent for agent in config.agents.values() if agent.dispatchable]
        return bool(choices) and all(agent.acp_enable_mcp for agent in choices)
    return config.agents[alias].acp_enable_mcp
