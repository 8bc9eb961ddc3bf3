"""HTTP MCP servers as agent tools, in process, against tests/e2e/mcp_fixture_server.py
served on 127.0.0.1: the public-address rule on a name that resolves to loopback, a
server's own call timeout, and connecting again after a lost connection."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from acp_server.agent.tools.mcp import open_mcp_tools
from acp_server.config import McpHttpServerConfig
from tests.e2e.mcp_http_harness import Transport, serve_mcp_over_http
from tests.e2e.test_mcp_toolset import tool_context
from tests.helpers import poll_until

pytestmark = [
    pytest.mark.e2e,  # spawns MCP server processes
    # The SDK's streamable HTTP client reads its GET event stream with a bare `async for`
    # and cancels it when the MCP session ends (mcp.client.streamable_http
    # handle_get_stream), leaving httpx2's reading generators to trio's finalizer. Its
    # connections are closed with the client; only these warnings are left.
    pytest.mark.filterwarnings(r"ignore:Async generator 'http(x|core)2\.:ResourceWarning"),
]

CEILING_SECS = 30


async def test_a_public_only_server_is_refused_before_any_connection(tmp_path: Path) -> None:
    with trio.fail_after(CEILING_SECS):
        async with serve_mcp_over_http("streamable-http") as server:
            # A name, not an address: the check is on what it resolves to.
            url = f"http://localhost:{server.port}/mcp"
            config = McpHttpServerConfig(name="web", url=url, public_only=True)
            async with open_mcp_tools([config], cwd=tmp_path) as toolset:
                await toolset.wait_ready()
                problems = toolset.problems
            requests = (await server.stats())["requests"]
    assert requests == 0
    [problem] = problems
    assert problem.startswith(
        f"MCP server 'web' could not be reached at {url}: cannot connect: refusing to connect "
        "to localhost ("
    )
    assert "a loopback address; a gateway client may name public MCP servers only" in problem


async def test_a_servers_own_call_timeout_ends_the_call_and_tells_the_server(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with serve_mcp_over_http("sse") as server:
            config = McpHttpServerConfig(
                name="slow", url=server.url, transport="sse", call_timeout_secs=0.5
            )
            async with open_mcp_tools([config], cwd=tmp_path) as toolset:
                await toolset.wait_ready()
                tool = toolset.tools["mcp__slow__wait_for_cancel"]
                output = await tool.run({"label": "slow-call"}, tool_context(tmp_path))

                async def cancelled() -> bool:
                    labels: list[str] = (await server.stats())["cancelled"]
                    return labels == ["slow-call"]

                await poll_until(cancelled)
    assert not output.ok
    assert output.text == "Error: MCP server 'slow' did not answer `wait_for_cancel` within 0.5 s."


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_the_call_right_after_a_lost_connection_tries_again_and_says_why_it_failed(
    tmp_path: Path, transport: Transport
) -> None:
    """The next call may come while the lost connection is still being closed: it waits
    for that, then connects again (here in vain, the server being down)."""
    context = tool_context(tmp_path)
    with trio.fail_after(CEILING_SECS):
        async with serve_mcp_over_http(transport) as server:
            config = McpHttpServerConfig(
                name="web", url=server.url, transport="sse" if transport == "sse" else "http"
            )
            async with open_mcp_tools([config], cwd=tmp_path) as toolset:
                await toolset.wait_ready()
                echo = toolset.tools["mcp__web__echo"]
                await server.stop()
                lost = await echo.run({"text": "a"}, context)
                again = await echo.run({"text": "b"}, context)
                async with serve_mcp_over_http(transport, port=server.port):
                    back = await echo.run({"text": "c"}, context)
    assert lost.text.startswith("Error: the connection to MCP server 'web' was lost while running")
    assert again.text.startswith(
        "Error: the connection to MCP server 'web' is lost (cannot connect: "
    )
    assert back.text == "echo: c"
