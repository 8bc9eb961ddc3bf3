"""The client side of a JSON-RPC connection, shared by the in-memory server harness
(tests/server/server_harness.py) and the pipe and WebSocket clients of the end-to-end tests
(tests/e2e/helpers.py, tests/e2e/gateway_harness.py): the package's own peer,
``acp_server.protocol.client`` (exported by ``acp_server.testing``)."""

from __future__ import annotations

from acp_server.protocol.client import (
    COMMANDS_UPDATE,
    JsonDict,
    JsonRpcPeer,
    RequestHandler,
    is_session_info,
    is_side_notice,
    is_update_of_kind,
)

__all__ = [
    "COMMANDS_UPDATE",
    "JsonDict",
    "JsonRpcPeer",
    "RequestHandler",
    "is_session_info",
    "is_side_notice",
    "is_update_of_kind",
]
