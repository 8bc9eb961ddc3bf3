"""In-memory harness for the ACP server: the public test kit (``acp_server.testing``) under
the names these tests use.

``ServerHarness`` (``acp_server.testing.MemoryClient``) is the client side of one
connection ``open_server`` serves over a ``MemoryTransport``: ``call`` sends a request and
returns its response, keeping notifications in ``notifications`` and answering
``session/request_permission`` with ``on_request``.
"""

from __future__ import annotations

from acp_server.testing import (
    MemoryClient,
    MemoryTransport,
    ScriptedProvider,
    StubTool,
    answer,
    memory_app,
    open_server,
    text_round,
    tool_round,
)

ServerHarness = MemoryClient
harness_app = memory_app

__all__ = [
    "MemoryTransport",
    "ScriptedProvider",
    "ServerHarness",
    "StubTool",
    "answer",
    "harness_app",
    "open_server",
    "text_round",
    "tool_round",
]
