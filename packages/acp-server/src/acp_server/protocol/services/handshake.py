"""ACP ``initialize``: what the client is (recorded on its ``Outbound`` for every later
method: capabilities, the profile of how to ask it, whether its files are ours), and what
this agent offers it in return."""

from __future__ import annotations

from acp_core import schema
from acp_core.jsonrpc import Payload
from acp_server import __version__
from acp_server.agent.providers.images import agent_sees_images
from acp_server.agent.tools.mcp_servers import offers_mcp_over_http
from acp_server.protocol.client_profile import client_profile
from acp_server.protocol.services.auth_methods import auth_methods
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.security.sandbox import agent_posture


async def initialize(state: ConnectionState, params: schema.InitializeParams) -> Payload:
    config, outbound = state.config, state.outbound
    outbound.client_capabilities = params.client_capabilities
    outbound.client_profile = client_profile(params)
    outbound.shares_filesystem = params.shared_filesystem
    default_agent = outbound.connection_default_agent
    return schema.initialize_result(
        store_available=state.app.store is not None,
        version=__version__,
        default_model=config.default_model,
        max_sessions=config.acp.max_sessions,
        session_timeout_secs=config.acp.session_timeout_secs,
        sandbox=agent_posture(config, default_agent).meta(),
        image=agent_sees_images(config, default_agent),
        mcp_over_http=offers_mcp_over_http(config, default_agent),
        auth_methods=auth_methods(terminal_auth=params.terminal_auth),
    )
