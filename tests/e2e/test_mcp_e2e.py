"""MCP tools in a real `zeroclaw acp` session, driven by the echo provider.

Servers come from config.toml (``[agents.x] acp_enable_mcp = true`` + ``mcp_servers``) and
from ``session/new``'s ``mcpServers``; both run tests/e2e/mcp_fixture_server.py.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import psutil
import pytest
import trio

from tests.e2e.helpers import JsonDict, RpcPipeClient, allow_once, open_session, spawn_acp
from tests.helpers import echo_config, poll_until, session_dir, write_config

pytestmark = pytest.mark.e2e

CEILING_SECS = 60
FIXTURE = Path(__file__).with_name("mcp_fixture_server.py")


def mcp_config() -> JsonDict:
    """Agent `echo` with MCP enabled and one configured server; agent `plain` without."""
    document = echo_config(
        extra_agents={
            "plain": {
                "model_provider": "echo.default",
                "risk_profile": "default",
                "runtime_profile": "default",
            }
        }
    )
    document["agents"]["echo"]["acp_enable_mcp"] = True
    document["agents"]["echo"]["mcp_servers"] = [
        {
            "name": "docs",
            "command": sys.executable,
            "args": [str(FIXTURE)],
            "env": {"FIXTURE_GREETING": "from config"},
        }
    ]
    return document


CLIENT_SERVER: JsonDict = {
    "name": "client",
    "command": sys.executable,
    "args": [str(FIXTURE)],
    "env": [{"name": "FIXTURE_GREETING", "value": "from the client"}],
}


async def run_tool(client: RpcPipeClient, session_id: str, line: str) -> tuple[JsonDict, JsonDict]:
    """Prompt the echo provider with one ``/tool`` line; the result and its tool update."""
    seen = len(client.updates(session_id))
    response = await client.prompt(session_id, line, on_request=allow_once)
    assert "result" in response, response
    updates = client.updates(session_id)[seen:]
    [finished] = [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    return response["result"], finished


def output_text(update: JsonDict) -> str:
    return "".join(
        item["content"]["text"] for item in update["content"] if item["content"]["type"] == "text"
    )


async def test_mcp_tools_from_config_and_client_run_with_approval(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", mcp_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(
                client, workspace, agentAlias="echo", mcpServers=[CLIENT_SERVER]
            )
            _, configured = await run_tool(client, session_id, "/tool mcp__docs__environment {}")
            _, from_client = await run_tool(client, session_id, "/tool mcp__client__environment {}")
            make = json.dumps({"name": "report.md", "content": "# Report\n"})
            _, blob = await run_tool(client, session_id, f"/tool mcp__client__make_file {make}")
            _, crashed = await run_tool(client, session_id, "/tool mcp__client__crash {}")
            _, survivor = await run_tool(
                client, session_id, '/tool mcp__docs__echo {"text": "still"}'
            )
            _, pid_update = await run_tool(client, session_id, "/tool mcp__docs__pid {}")
            permissions = [request["params"]["toolCall"] for request in client.server_requests]
    assert output_text(configured) == f"from config in {workspace}"
    assert output_text(from_client) == f"from the client in {workspace}"
    stored = workspace / "uploads" / (hashlib.sha256(b"# Report\n").hexdigest() + ".md")
    assert stored.read_text() == "# Report\n"
    assert output_text(blob) == f"made report.md\n\n[Document: report.md] {stored}"
    # As in ZeroClaw's implementation, a failed tool still "completes"; its output says what failed.
    assert output_text(crashed).startswith("Error: MCP server 'client' exited while running")
    assert survivor["status"] == "completed"
    assert output_text(survivor) == "echo: still"
    # Supervised: every MCP call asked first, labelled like any other tool.
    assert len(permissions) == 6
    assert permissions[0]["title"] == "mcp__docs__environment"
    # The servers ended with the session's process.
    assert not psutil.pid_exists(int(output_text(pid_update)))


async def test_mcp_stays_off_unless_the_agent_enables_it(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", mcp_config())
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(
                client, session_dir(tmp_path), agentAlias="plain", mcpServers=[CLIENT_SERVER]
            )
            _, update = await run_tool(client, session_id, '/tool mcp__client__echo {"text": "x"}')
    assert output_text(update).startswith("Error: ")
    assert "mcp__client__echo" in output_text(update)


async def test_a_server_that_cannot_start_is_named_and_servers_end_with_the_session(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", mcp_config())
    missing: JsonDict = {
        "name": "missing",
        "command": str(tmp_path / "no-such-mcp-server"),
        "args": [],
        "env": [],
    }
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(
                client,
                session_dir(tmp_path),
                agentAlias="echo",
                mcpServers=[missing, CLIENT_SERVER],
            )
            _, failed = await run_tool(client, session_id, "/tool mcp__missing__search {}")
            _, working = await run_tool(
                client, session_id, '/tool mcp__client__echo {"text": "ok"}'
            )
            _, pid_update = await run_tool(client, session_id, "/tool mcp__client__pid {}")
            server_pid = int(output_text(pid_update))
            assert psutil.pid_exists(server_pid)
            closed = await client.call("session/close", {"sessionId": session_id})
            assert closed["result"] == {}
            # The session ended, not the process: its MCP server goes with it.
            await poll_until(lambda: not _alive(server_pid), within=10)
    assert output_text(failed).startswith("Error: Unknown tool: mcp__missing__search")
    assert "MCP server 'missing' could not be started: command not found" in output_text(failed)
    assert output_text(working) == "echo: ok"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
