"""Which MCP servers a session gets: config.toml entries (stdio and HTTP), the client's
``mcpServers``, the checks on an HTTP server's URL and headers, who may reach private
addresses, what ``initialize`` offers, and how HTTP failures are put in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from acp_core import schema
from acp_core.errors import InvalidParamsError
from acp_server.agent.tools.mcp_http import HttpStatusWatch, http_problem, shown_url
from acp_server.agent.tools.mcp_servers import offers_mcp_over_http, select_mcp_servers
from acp_server.config import (
    AgentConfig,
    ConfigError,
    McpHttpServerConfig,
    McpServerConfig,
    load_config,
)
from acp_server.config.mcp import MAX_MCP_HEADERS, headers_problem, url_problem
from tests.helpers import echo_config, write_config


def load_agent(tmp_path: Path, **agent: Any) -> AgentConfig:
    document = echo_config()
    document["agents"]["echo"].update(agent)
    write_config(tmp_path, document)
    return load_config(tmp_path, environ={}).agents["echo"]


def test_config_entries_name_stdio_and_http_servers(tmp_path: Path) -> None:
    agent = load_agent(
        tmp_path,
        acp_enable_mcp=True,
        mcp_allow_private_hosts=True,
        mcp_servers=[
            {"name": "local", "command": "docs-mcp", "args": ["--stdio"], "call_timeout_secs": 5},
            {
                "name": "remote",
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "Bearer abc"},
                "connect_timeout_secs": 3,
            },
            {"name": "events", "type": "sse", "url": "http://10.0.0.5:8080/sse"},
        ],
    )
    assert agent.mcp_allow_private_hosts
    assert agent.mcp_servers == (
        McpServerConfig(name="local", command="docs-mcp", args=("--stdio",), call_timeout_secs=5),
        McpHttpServerConfig(
            name="remote",
            url="https://mcp.example.com/mcp",
            headers=(("Authorization", "Bearer abc"),),
            connect_timeout_secs=3,
        ),
        McpHttpServerConfig(name="events", url="http://10.0.0.5:8080/sse", transport="sse"),
    )


@pytest.mark.parametrize(
    ("entry", "key", "problem"),
    [
        ({"name": "x", "command": "a", "url": "http://h/"}, "mcp_servers[0]", "not both"),
        ({"name": "x", "url": "ftp://h/mcp"}, "mcp_servers[0].url", "http:// or https://"),
        ({"name": "x", "url": "http://u:p@h/mcp"}, "mcp_servers[0].url", "credentials"),
        ({"name": "x", "type": "sse"}, "mcp_servers[0].url", "is required"),
        ({"name": "x", "type": "stdio", "url": "http://h/"}, "mcp_servers[0].command", "required"),
        ({"name": "x", "command": " "}, "mcp_servers[0].command", "must not be blank"),
        ({"name": "x", "type": "ws", "url": "http://h/"}, "mcp_servers[0].type", "one of"),
        (
            {"name": "x", "url": "http://h/", "headers": {"Host": "elsewhere"}},
            "mcp_servers[0].headers",
            "set by the MCP transport",
        ),
        (
            {"name": "x", "url": "http://h/", "headers": {"X-A": "1\nX-B: 2"}},
            "mcp_servers[0].headers",
            "control characters",
        ),
        (
            {"name": "x", "url": "http://h/", "call_timeout_secs": 0},
            "mcp_servers[0].call_timeout_secs",
            "greater than 0",
        ),
    ],
)
def test_bad_entries_are_refused_naming_the_key(
    tmp_path: Path, entry: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_agent(tmp_path, mcp_servers=[entry])
    assert f"agents.echo.{key}" in str(raised.value)
    assert problem in str(raised.value)


def http_entry(url: str = "http://127.0.0.1:8080/mcp", **headers: str) -> schema.McpServerHttp:
    return schema.McpServerHttp(
        type="http",
        name="remote",
        url=url,
        headers=[schema.HttpHeader(name=k, value=v) for k, v in headers.items()],
    )


@pytest.mark.parametrize(
    ("remote", "allow_private", "public_only"),
    [(False, False, False), (True, False, True), (True, True, False)],
)
def test_only_gateway_clients_are_held_to_public_addresses(
    remote: bool, allow_private: bool, public_only: bool
) -> None:
    agent = AgentConfig(alias="a", acp_enable_mcp=True, mcp_allow_private_hosts=allow_private)
    [server] = select_mcp_servers(agent, [http_entry(Authorization="Bearer t")], remote=remote)
    assert server == McpHttpServerConfig(
        name="remote",
        url="http://127.0.0.1:8080/mcp",
        headers=(("Authorization", "Bearer t"),),
        public_only=public_only,
    )


def test_config_servers_are_the_operators_and_never_held_to_public_addresses() -> None:
    configured = McpHttpServerConfig(name="docs", url="http://127.0.0.1:9000/mcp")
    agent = AgentConfig(alias="a", acp_enable_mcp=True, mcp_servers=(configured,))
    assert select_mcp_servers(agent, [], remote=True) == (configured,)


def test_client_servers_need_acp_enable_mcp_and_usable_urls() -> None:
    assert select_mcp_servers(AgentConfig(alias="a"), [http_entry()]) == ()
    enabled = AgentConfig(alias="a", acp_enable_mcp=True)
    stdio = schema.McpServerStdio(name="local", command="local-mcp")
    with pytest.raises(InvalidParamsError) as raised:
        select_mcp_servers(enabled, [stdio, http_entry("javascript:alert(1)")])
    assert str(raised.value) == (
        "Invalid parameter: mcpServers[1]: MCP server 'remote': the URL must start with "
        "http:// or https://"
    )


def _agents(**flags: bool) -> dict[str, Any]:
    return {alias: {"acp_enable_mcp": on} for alias, on in flags.items()}


@pytest.mark.parametrize(
    ("agents", "default_agent", "connection_default", "offered"),
    [
        (_agents(only=True), None, None, True),  # the sole agent
        (_agents(only=False), None, None, False),
        (_agents(a=True, b=False), "a", None, True),  # default_agent
        (_agents(a=True, b=False), "a", "b", False),  # the gateway's ?agent= first
        (_agents(a=True, b=True), None, None, True),  # any the client may name
        (_agents(a=True, b=False), None, None, False),
    ],
)
def test_initialize_offers_http_mcp_for_the_agent_a_session_gets(
    tmp_path: Path,
    agents: dict[str, Any],
    default_agent: str | None,
    connection_default: str | None,
    offered: bool,
) -> None:
    write_config(tmp_path, echo_config(agents=agents, default_agent=default_agent))
    config = load_config(tmp_path, environ={})
    assert offers_mcp_over_http(config, connection_default) is offered


_field_name = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,30}", fullmatch=True).filter(
    lambda name: headers_problem([(name, "")]) is None
)
_visible = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=100)


@given(name=_field_name, value=_visible)
def test_visible_header_values_pass(name: str, value: str) -> None:
    assert headers_problem([(name, value)]) is None


@given(
    name=_field_name,
    before=_visible,
    after=_visible,
    control=st.sampled_from(["\r", "\n", "\x00", "\x7f", "\x1b"]),
)
def test_control_characters_in_a_header_value_are_refused(
    name: str, before: str, after: str, control: str
) -> None:
    problem = headers_problem([(name, before + control + after)])
    assert problem == f"header {name!r} has control characters in its value"


def test_header_count_and_size_are_bounded() -> None:
    many = [(f"X-{index}", "v") for index in range(MAX_MCP_HEADERS + 1)]
    assert headers_problem(many) == f"{MAX_MCP_HEADERS + 1} headers; at most {MAX_MCP_HEADERS}"
    assert "bytes; at most" in (headers_problem([("X-Big", "v" * 9000)]) or "")


@given(st.text(max_size=300))
def test_any_text_is_judged_as_a_url_without_raising(text: str) -> None:
    problem = url_problem(text)
    assert problem is None or isinstance(problem, str)
    if problem is None:
        assert text.startswith(("http://", "https://"))


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/mcp", "https://mcp.example.com/v1/mcp?x=1", "http://[::1]:9/sse"],
)
def test_usable_urls_pass(url: str) -> None:
    assert url_problem(url) is None


def test_shown_urls_drop_the_query_that_may_hold_a_token() -> None:
    assert shown_url("https://h/mcp?token=secret#frag") == "https://h/mcp"


def _status_error(status: int) -> httpx2.HTTPStatusError:
    request = httpx2.Request("GET", "http://h/sse")
    response = httpx2.Response(status, request=request)
    return httpx2.HTTPStatusError("refused", request=request, response=response)


async def test_http_failures_are_put_in_words() -> None:
    watch = HttpStatusWatch()
    await watch(httpx2.Response(403, request=httpx2.Request("POST", "http://h/mcp")))
    stand_in = MCPError(-32603, "Server returned an error response")
    assert http_problem(stand_in, watch) == (
        "the server answered HTTP 403 Forbidden: check the token or headers it is given"
    )
    assert http_problem(_status_error(401), None) == (
        "the server answered HTTP 401 Unauthorized: check the token or headers it is given"
    )
    assert (http_problem(_status_error(405), None) or "").startswith(
        "the server answered HTTP 405 Method Not Allowed: is the URL its MCP endpoint"
    )
    assert http_problem(httpx2.ConnectError("refused"), None) == "cannot connect: refused"
    not_mcp = MCPError(-32600, "Unexpected content type: text/html")
    assert http_problem(not_mcp, None) == (
        "the server did not answer as an MCP server (Unexpected content type: text/html)"
    )
    assert http_problem(ValueError("other"), watch) is None
