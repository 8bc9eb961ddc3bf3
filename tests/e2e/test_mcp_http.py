"""MCP servers over streamable HTTP and HTTP+SSE in a real `zeroclaw acp` (and `zeroclaw
gateway`), driven by the echo provider's ``/tool`` lines.

The servers are tests/e2e/mcp_fixture_server.py on 127.0.0.1 in child processes; what they
saw (headers, cancelled calls, ended sessions) is read back from their ``/stats``.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import allow_once, open_session, spawn_acp, unused_port
from tests.e2e.mcp_http_harness import HttpMcpServer, Transport, serve_mcp_over_http
from tests.helpers import echo_config, poll_until, session_dir, write_config
from tests.jsonrpc_peer import JsonDict, JsonRpcPeer

pytestmark = pytest.mark.e2e

CEILING_SECS = 90
TOKEN = "t0ken-for-the-fixture"
TRANSPORTS: tuple[Transport, ...] = ("streamable-http", "sse")


def acp_type(transport: Transport) -> str:
    """ACP's ``type`` of an ``mcpServers`` entry for ``transport``."""
    return "http" if transport == "streamable-http" else "sse"


def client_server(
    name: str, server: HttpMcpServer | str, transport: Transport, **headers: str
) -> JsonDict:
    """An ACP ``McpServerHttp`` / ``McpServerSse`` entry (``headers`` by name)."""
    url = server if isinstance(server, str) else server.url
    return {
        "type": acp_type(transport),
        "name": name,
        "url": url,
        "headers": [
            {"name": key.replace("_", "-"), "value": value} for key, value in headers.items()
        ],
    }


def bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def mcp_config(tmp_path: Path, *, level: str = "supervised", **agent: Any) -> Path:
    document = echo_config(level=level)
    document["agents"]["echo"].update({"acp_enable_mcp": True, **agent})
    return write_config(tmp_path / "cfg", document)


async def run_tool(peer: JsonRpcPeer, session_id: str, line: str) -> tuple[str, str]:
    """One ``/tool`` turn: (its finished tool card's text, the agent text streamed)."""
    seen = len(peer.notifications)
    response = await peer.prompt(session_id, line, on_request=allow_once)
    assert "result" in response, response
    updates = [
        note["params"]["update"]
        for note in peer.notifications[seen:]
        if note["params"].get("sessionId") == session_id
    ]
    [finished] = [
        update
        for update in updates
        if update["sessionUpdate"] == "tool_call_update" and update["status"] != "in_progress"
    ]
    card = "".join(
        item["content"]["text"] for item in finished["content"] if item["content"]["type"] == "text"
    )
    said = "".join(
        update["content"]["text"]
        for update in updates
        if update["sessionUpdate"] == "agent_message_chunk"
    )
    return card, said


async def test_http_and_sse_servers_from_client_and_config_run_with_approval_and_headers(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with (
            serve_mcp_over_http("streamable-http", token=TOKEN) as streamable,
            serve_mcp_over_http("sse", token=TOKEN) as sse,
        ):
            configured = {
                "name": "cfg",
                "type": "sse",
                "url": sse.url,
                "headers": {**bearer(), "X-Probe": "from config.toml"},
            }
            config_dir = mcp_config(tmp_path, mcp_servers=[configured])
            from_client = client_server(
                "web", streamable, "streamable-http", **bearer(), X_Probe="from the client"
            )
            async with spawn_acp(config_dir) as client:
                init = await client.call("initialize", {"protocolVersion": 1})
                new = await client.call(
                    "session/new",
                    {"cwd": str(session_dir(tmp_path)), "mcpServers": [from_client]},
                )
                session_id = new["result"]["sessionId"]
                web_probe, _ = await run_tool(
                    client, session_id, '/tool mcp__web__header {"name": "X-Probe"}'
                )
                cfg_probe, _ = await run_tool(
                    client, session_id, '/tool mcp__cfg__header {"name": "x-probe"}'
                )
                echoed, _ = await run_tool(
                    client, session_id, '/tool mcp__web__echo {"text": "hi"}'
                )
                asked = [
                    request["params"]["toolCall"]["title"] for request in client.server_requests
                ]
                closed = await client.call("session/close", {"sessionId": session_id})
                assert closed["result"] == {}

                # Closing the session ends each MCP session: streamable HTTP's DELETE, and
                # the SSE stream closed.
                async def ended() -> bool:
                    deleted: int = (await streamable.stats())["deleted"]
                    open_streams: int = (await sse.stats())["open_streams"]
                    return deleted == 1 and open_streams == 0

                await poll_until(ended, within=15)
    assert init["result"]["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": True}
    assert (web_probe, cfg_probe, echoed) == ("from the client", "from config.toml", "echo: hi")
    # Each call was approved first, as a stdio MCP tool's is.
    assert asked == ["mcp__web__header", "mcp__cfg__header", "mcp__web__echo"]


async def test_http_mcp_is_offered_only_to_agents_that_enable_mcp(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            init = await client.call("initialize", {"protocolVersion": 1})
    assert init["result"]["agentCapabilities"]["mcpCapabilities"] == {"http": False, "sse": False}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_cancelled_turn_stops_its_http_mcp_call_at_once(
    tmp_path: Path, transport: Transport
) -> None:
    config_dir = mcp_config(tmp_path, level="full")
    with trio.fail_after(CEILING_SECS):
        async with serve_mcp_over_http(transport) as server, spawn_acp(config_dir) as client:
            session_id = await open_session(
                client, session_dir(tmp_path), mcpServers=[client_server("web", server, transport)]
            )
            # The call waits until cancelled; the MCP call timeout is 300 s, so only the
            # turn's cancel can end it before this test's ceiling.
            request_id = await client.prompt_request(
                session_id, '/tool mcp__web__wait_for_cancel {"label": "turn-1"}'
            )

            async def server_has(key: str) -> bool:
                labels: list[str] = (await server.stats())[key]
                return labels == ["turn-1"]

            await poll_until(partial(server_has, "started"), within=15)
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.wait_response(request_id)
            await poll_until(partial(server_has, "cancelled"), within=15)
            after, _ = await run_tool(client, session_id, '/tool mcp__web__echo {"text": "on"}')
    assert response["result"]["stopReason"] == "cancelled"
    assert after == "echo: on"


async def test_unreachable_refusing_and_mismatched_servers_are_named_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    config_dir = mcp_config(tmp_path)
    gone_url = f"http://127.0.0.1:{unused_port()}/mcp"
    with trio.fail_after(CEILING_SECS):
        async with (
            serve_mcp_over_http("streamable-http", token=TOKEN) as locked,
            serve_mcp_over_http("streamable-http") as working,
            spawn_acp(config_dir) as client,
        ):
            servers = [
                client_server("gone", gone_url, "streamable-http"),
                client_server("locked", locked, "streamable-http"),
                # An HTTP+SSE client pointed at a streamable HTTP endpoint.
                client_server("mixed", working, "sse"),
                client_server("web", working, "streamable-http"),
            ]
            session_id = await open_session(client, session_dir(tmp_path), mcpServers=servers)
            card, said = await run_tool(client, session_id, '/tool mcp__web__echo {"text": "ok"}')
            missing, _ = await run_tool(client, session_id, "/tool mcp__locked__echo {}")
    assert card == "echo: ok"
    assert f"[MCP server 'gone' could not be reached at {gone_url}: cannot connect: " in said
    assert (
        f"[MCP server 'locked' could not be reached at {locked.url}: the server answered "
        "HTTP 401 Unauthorized: check the token or headers it is given]"
    ) in said
    assert (
        f"[MCP server 'mixed' could not be reached at {working.url}: the server answered "
        "HTTP 400 Bad Request: is the URL its MCP endpoint"
    ) in said
    assert missing.startswith("Error: Unknown tool: mcp__locked__echo")
    assert "MCP server 'locked' could not be reached" in missing


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_that_goes_away_is_reported_and_reconnected_when_it_is_back(
    tmp_path: Path, transport: Transport
) -> None:
    config_dir = mcp_config(tmp_path, level="full")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            async with serve_mcp_over_http(transport) as first:
                port = first.port
                session_id = await open_session(
                    client,
                    session_dir(tmp_path),
                    mcpServers=[client_server("web", first, transport)],
                )
                before, _ = await run_tool(client, session_id, '/tool mcp__web__echo {"text": "1"}')
            lost, _ = await run_tool(client, session_id, '/tool mcp__web__echo {"text": "2"}')
            down, _ = await run_tool(client, session_id, '/tool mcp__web__echo {"text": "3"}')
            async with serve_mcp_over_http(transport, port=port):
                back, _ = await run_tool(client, session_id, '/tool mcp__web__echo {"text": "4"}')
    assert before == "echo: 1"
    assert lost.startswith(
        "Error: the connection to MCP server 'web' was lost while running `echo`"
    )
    assert lost.endswith("the next call connects again.")
    assert down.startswith("Error: the connection to MCP server 'web' is lost (cannot connect: ")
    assert back == "echo: 4"


async def test_gateway_clients_reach_private_mcp_servers_only_where_the_operator_allows(
    tmp_path: Path,
) -> None:
    document = echo_config(
        extra_agents={
            "trusting": {
                "model_provider": "echo.default",
                "risk_profile": "default",
                "runtime_profile": "default",
                "acp_enable_mcp": True,
                "mcp_allow_private_hosts": True,
            }
        }
    )
    document["agents"]["echo"]["acp_enable_mcp"] = True
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    cwd = str(session_dir(tmp_path))
    with trio.fail_after(CEILING_SECS):
        async with (
            serve_mcp_over_http("streamable-http") as server,
            run_gateway(config_dir) as gateway,
            ws_connect(gateway.ws_url()) as ws,
        ):
            rpc = WsRpc(ws)
            await rpc.call("initialize", {"protocolVersion": 1})
            servers = [client_server("web", server, "streamable-http")]
            guarded = await rpc.call(
                "session/new", {"cwd": cwd, "mcpServers": servers, "agentAlias": "echo"}
            )
            assert "result" in guarded, guarded
            refused, said = await run_tool(
                rpc, guarded["result"]["sessionId"], '/tool mcp__web__echo {"text": "x"}'
            )
            reached_before = (await server.stats())["requests"]
            trusted = await rpc.call(
                "session/new", {"cwd": cwd, "mcpServers": servers, "agentAlias": "trusting"}
            )
            allowed, _ = await run_tool(
                rpc, trusted["result"]["sessionId"], '/tool mcp__web__echo {"text": "x"}'
            )
    assert reached_before == 0  # refused before any connection was opened
    assert (
        "refusing to connect to 127.0.0.1: a loopback address; a gateway client may name "
        "public MCP servers only; set mcp_allow_private_hosts = true for the agent"
    ) in said
    assert refused.startswith("Error: Unknown tool: mcp__web__echo")
    assert allowed == "echo: x"


async def test_a_bad_url_or_header_from_the_client_is_refused_at_session_new(
    tmp_path: Path,
) -> None:
    config_dir = mcp_config(tmp_path)
    cwd = str(session_dir(tmp_path))
    bad_url = {"type": "http", "name": "files", "url": "file:///etc/passwd", "headers": []}
    bad_header = {
        "type": "sse",
        "name": "split",
        "url": "http://127.0.0.1:1/sse",
        "headers": [{"name": "X-Note", "value": "a\r\nInjected: yes"}],
    }
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            url_error = await client.error("session/new", {"cwd": cwd, "mcpServers": [bad_url]})
            header_error = await client.error(
                "session/new", {"cwd": cwd, "mcpServers": [bad_url, bad_header][1:]}
            )
            still = await client.call("session/new", {"cwd": cwd, "mcpServers": []})
    assert url_error["code"] == -32602
    assert url_error["message"] == (
        "Invalid parameter: mcpServers[0]: MCP server 'files': the URL must start "
        "with http:// or https://"
    )
    assert header_error["code"] == -32602
    assert "MCP server 'split': header 'X-Note' has control characters" in json.dumps(header_error)
    assert "result" in still


@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_a_restored_session_connects_the_mcp_servers_the_client_names_again(
    tmp_path: Path, method: str
) -> None:
    config_dir = mcp_config(tmp_path, level="full")
    cwd = session_dir(tmp_path)
    with trio.fail_after(CEILING_SECS):
        async with serve_mcp_over_http("streamable-http") as server:
            servers = [client_server("web", server, "streamable-http")]
            async with spawn_acp(config_dir) as first:
                session_id = await open_session(first, cwd, mcpServers=servers)
                before, _ = await run_tool(first, session_id, '/tool mcp__web__echo {"text": "1"}')
            async with spawn_acp(config_dir) as second:
                await second.call("initialize", {"protocolVersion": 1})
                restored = await second.call(
                    method, {"sessionId": session_id, "cwd": str(cwd), "mcpServers": servers}
                )
                assert "result" in restored, restored
                after, _ = await run_tool(second, session_id, '/tool mcp__web__echo {"text": "2"}')
    assert (before, after) == ("echo: 1", "echo: 2")
