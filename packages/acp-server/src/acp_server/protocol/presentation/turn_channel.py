"""The ``TurnIO`` (acp_server/agent/runtime/turn_io.py) a running turn talks to its client
through: its events rendered by ``TurnEvents`` (turn_events.py), sent as one session's
updates and permission requests over the peer's ``Outbound`` (protocol/outbound.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from acp_core import methods, schema
from acp_core.jsonrpc import ErrorResponse
from acp_server.agent.tools.base import ClientSide
from acp_server.protocol.presentation.client_calls import client_calls_for
from acp_server.protocol.presentation.turn_events import TurnEvents

if TYPE_CHECKING:
    from acp_server.config import AcpConfig
    from acp_server.protocol.outbound import Outbound

logger = logging.getLogger(__name__)


class TurnChannel(TurnEvents):
    """Updates for one session, and permission requests that wait at most ``[acp]
    permission_timeout_secs`` (unanswered counts as denied)."""

    def __init__(self, outbound: Outbound, session_id: str, *, acp: AcpConfig) -> None:
        self._outbound = outbound
        self._session_id = session_id
        self._timeout = acp.permission_timeout
        self.client: ClientSide | None = client_calls_for(outbound, session_id, acp)

    async def send_update(self, update: schema.SessionUpdate) -> None:
        await self._outbound.send_update(self._session_id, update)

    async def text(self, text: str, *, thought: bool = False) -> None:
        content = schema.TextContent(text=text)
        if thought:
            await self.send_update(schema.AgentThoughtChunk(content=content))
        else:
            await self.send_update(schema.AgentMessageChunk(content=content))

    async def request_permission(
        self, params: schema.RequestPermissionParams
    ) -> schema.PermissionOutcome | None:
        with trio.move_on_after(self._timeout):
            response = await self._outbound.call(methods.SESSION_REQUEST_PERMISSION, params)
            if isinstance(response, ErrorResponse):
                logger.info("permission request answered with an error: %s", response.error.message)
                return None
            return schema.parse_permission_outcome(response.result)
        logger.warning(
            "session %s: no answer to a permission request within %ss; denied",
            self._session_id,
            self._timeout,
        )
        return None
