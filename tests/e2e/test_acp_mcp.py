"""MCP servers from session/new reach the agent's tools in a real `zeroclaw acp`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import open_session, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).resolve().with_name("mcp_fixture_server.py")


@pytest.mark.parametrize("enabled", [True, False])
async def test_session_mcp_servers_need_acp_enable_mcp(tmp_path: Path, enabled: bool) -> None:
    document = echo_config(level="full")
    document["agents"]["echo"]["acp_enable_mcp"] = enabled
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    server = {"name": "fx", "command": sys.executable, "args": [str(FIXTURE)], "env": []}
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace, mcpServers=[server])
            response = await client.call(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": '/tool mcp__fx__echo {"text": "ping-from-mcp"}',
                },
                within=45,
            )
            closed = await client.call("session/close", {"sessionId": session_id})
    content = response["result"]["content"]
    if enabled:
        assert "ping-from-mcp" in content
    else:
        assert "Unknown tool: mcp__fx__echo" in content
    assert closed["result"] == {}
