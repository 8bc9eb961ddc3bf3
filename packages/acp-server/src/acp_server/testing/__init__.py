"""Test doubles for code that embeds or drives the ACP server, in the manner of
``trio.testing``: small, public, and used by this project's own tests.

- ``open_server(config, provider=..., tools=...)``: one ACP connection served in memory
  (``serve_connection`` over a ``MemoryTransport``), yielding the ``MemoryClient`` that
  drives it; ``memory_app`` builds the process-wide state several connections can share.
- ``JsonRpcPeer``: the client side of any JSON-RPC connection (also what `zeroclaw prompt`
  runs on), on ``acp_core.RpcConnection``; ``answer(option_id)`` answers its permission
  requests.
- ``ScriptedProvider`` (``text_round``, ``tool_round``): a model that plays back events.
- ``StubTool``: a tool that records its calls and can be held mid-call.
- ``tool_context(workspace)``: a ``ToolContext`` to run one tool outside a turn, with the
  ``Recorder`` of what it sent.

Nothing else in ``acp_server`` imports this package (the import contract's ``cli |
testing`` layer, ``pyproject.toml``).
"""

from acp_server.protocol.client import (
    JsonDict,
    JsonRpcPeer,
    PeerClosed,
    RequestHandler,
    is_session_info,
    is_side_notice,
    is_update_of_kind,
)
from acp_server.testing._doubles import ScriptedProvider, StubTool, text_round, tool_round
from acp_server.testing._memory import (
    MemoryClient,
    MemoryTransport,
    answer,
    memory_app,
    open_server,
)
from acp_server.testing._tool_context import Recorder, tool_context

__all__ = [
    "JsonDict",
    "JsonRpcPeer",
    "MemoryClient",
    "MemoryTransport",
    "PeerClosed",
    "Recorder",
    "RequestHandler",
    "ScriptedProvider",
    "StubTool",
    "answer",
    "is_session_info",
    "is_side_notice",
    "is_update_of_kind",
    "memory_app",
    "open_server",
    "text_round",
    "tool_context",
    "tool_round",
]
