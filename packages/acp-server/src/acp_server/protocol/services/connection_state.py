"""``ConnectionState``: what every service of one connection works on.

The process's ``AcpApp`` (services/context.py) and its configuration, the peer as an
``Outbound`` (protocol/outbound.py), the connection's ``SessionTable``
(services/session_table.py) and its running prompts by request id. The router
(protocol/router.py) hands it to each service function; nothing in it knows about the
transport or JSON-RPC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from acp_server.protocol.services.session_table import SessionTable

if TYPE_CHECKING:
    from acp_server.agent.runtime.session import Turn
    from acp_server.config import Config
    from acp_server.protocol.outbound import Outbound
    from acp_server.protocol.services.context import AcpApp


class ConnectionState:
    """One connection's session table and running prompts, over the process's app."""

    def __init__(self, app: AcpApp, outbound: Outbound) -> None:
        self.app = app
        self.config: Config = app.config
        self.outbound = outbound
        self.table = SessionTable(self.config.acp.max_sessions, app.live_sessions)
        self.prompt_turns: dict[str, Turn] = {}
        """Running prompts by the text of their request id (for ``$/cancel_request``)."""

    def agent_table(self) -> dict[str, bool]:
        """Each configured agent alias, and whether a client may pick it."""
        return {alias: agent.dispatchable for alias, agent in self.config.agents.items()}

    def cancel_all(self) -> None:
        """The connection is ending: cancel every turn and let every session go."""
        for session in self.table:
            if session.turn is not None:
                session.turn.cancel()
            session.close()

    def reap_idle(self) -> None:
        self.table.reap_idle(trio.current_time(), self.config.acp.idle_session_timeout)
