"""``[agents.<alias>] mcp_servers``: the MCP servers config.toml gives an agent, and the
checks an HTTP MCP server's URL and headers must pass wherever it comes from (config.toml
or a client's ``session/new``).

An entry is a stdio server (``command``, ``args``, ``env``) or an HTTP one (``url``,
``headers``; ``type = "sse"`` for MCP's older HTTP+SSE transport, else streamable HTTP).
``call_timeout_secs`` bounds one tool call of either; ``connect_timeout_secs`` bounds
opening a connection to an HTTP server.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from acp_server.config import checks
from acp_server.config.values import (
    DEFAULT_MCP_CONNECT_TIMEOUT_SECS,
    AnyMcpServerConfig,
    McpHttpServerConfig,
    McpServerConfig,
)
from acp_server.patterns import LazyPattern

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

MCP_TRANSPORTS: Final = ("stdio", "http", "sse")
MAX_MCP_URL_CHARS: Final = 2048
"""Longest server URL accepted (longer ones are a mistake or an attack on a log)."""
MAX_MCP_HEADERS: Final = 32
"""Headers one HTTP MCP server may be given."""
MAX_MCP_HEADER_BYTES: Final = 8192
"""Bytes of names and values together one HTTP MCP server may be given."""
FRAMING_HEADERS: Final = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    }
)
"""Headers the HTTP client or the MCP transport sets itself: given ones are refused."""
_TOKEN: Final = LazyPattern(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP field name (RFC 9110, section 5.1: a token)."""
_FIELD_VALUE_REFUSED: Final = LazyPattern(r"[\x00-\x08\x0a-\x1f\x7f]")
"""Control characters a field value must not hold (RFC 9110, section 5.5; tab is allowed)."""

_STDIO_KEYS: Final = frozenset({"name", "type", "command", "args", "env", "call_timeout_secs"})
_HTTP_KEYS: Final = frozenset(
    {"name", "type", "url", "headers", "connect_timeout_secs", "call_timeout_secs"}
)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name an HTTP MCP server (None: it can)."""
    if len(url) > MAX_MCP_URL_CHARS:
        return f"the URL is longer than {MAX_MCP_URL_CHARS} characters"
    if url != url.strip() or any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        return "the URL holds spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        return f"the URL cannot be read ({exc})"
    if parts.scheme not in ("http", "https"):
        return "the URL must start with http:// or https://"
    if not parts.hostname:
        return "the URL names no host"
    if parts.username is not None or parts.password is not None:
        return "credentials in the URL are not accepted (send them in a header)"
    return None


def headers_problem(headers: Iterable[tuple[str, str]]) -> str | None:
    """Why ``headers`` cannot be sent to an HTTP MCP server (None: they can)."""
    count = 0
    size = 0
    for name, value in headers:
        count += 1
        size += len(name.encode()) + len(value.encode())
        if not _TOKEN.fullmatch(name):
            return f"header name {name!r} is not a valid HTTP field name"
        if name.lower() in FRAMING_HEADERS:
            return f"header {name!r} is set by the MCP transport itself"
        if _FIELD_VALUE_REFUSED.search(value):
            return f"header {name!r} has control characters in its value"
    if count > MAX_MCP_HEADERS:
        return f"{count} headers; at most {MAX_MCP_HEADERS}"
    if size > MAX_MCP_HEADER_BYTES:
        return f"the headers take {size} bytes; at most {MAX_MCP_HEADER_BYTES}"
    return None


def parse_mcp_servers(
    parser: ConfigParser, body: Mapping[str, Any], prefix: str
) -> tuple[AnyMcpServerConfig, ...]:
    """``[agents.<prefix>] mcp_servers``: an array of tables, one per server."""
    raw = body.get("mcp_servers", [])
    key = f"{prefix}.mcp_servers"
    if not isinstance(raw, list):
        raise parser.error(key, f"expected an array of tables, got {checks.type_name(raw)}")
    servers: list[AnyMcpServerConfig] = []
    for index, item in enumerate(raw):
        item_key = f"{key}[{index}]"
        if not isinstance(item, dict):
            raise parser.error(item_key, f"expected a table, got {checks.type_name(item)}")
        servers.append(_parse_server(parser, item, item_key))
    return tuple(servers)


def _required(parser: ConfigParser, item: Mapping[str, Any], name: str, key: str, what: str) -> str:
    if name not in item:
        raise parser.error(f"{key}.{name}", f"is required: {what}")
    return parser.get(item, name, f"{key}.{name}", str, "", checks.non_blank)


def _parse_server(parser: ConfigParser, item: dict[str, Any], key: str) -> AnyMcpServerConfig:
    if "command" in item and "url" in item:
        raise parser.error(key, "give either command (a stdio server) or url (HTTP), not both")
    default_type = "http" if "url" in item else "stdio"
    transport = parser.get(
        item, "type", f"{key}.type", str, default_type, checks.one_of(MCP_TRANSPORTS)
    )
    name = parser.get(item, "name", f"{key}.name", str, "", checks.non_blank)
    call_timeout: float | None = None
    if "call_timeout_secs" in item:
        call_timeout = parser.get(
            item, "call_timeout_secs", f"{key}.call_timeout_secs", float, 0.0, checks.positive
        )
    if transport == "stdio":
        parser.warn_unknown(item, _STDIO_KEYS, key)
        env = parser.table(item, "env", f"{key}.env")
        if not all(isinstance(v, str) for v in env.values()):
            raise parser.error(f"{key}.env", "values must be strings")
        return McpServerConfig(
            name=name,
            command=_required(parser, item, "command", key, "the program that runs the server"),
            args=parser.strings(item, "args", f"{key}.args", ()),
            env=dict(env),
            call_timeout_secs=call_timeout,
        )
    parser.warn_unknown(item, _HTTP_KEYS, key)
    url = _required(parser, item, "url", key, "the server's http:// or https:// address")
    problem = url_problem(url)
    if problem is not None:
        raise parser.error(f"{key}.url", problem)
    table = parser.table(item, "headers", f"{key}.headers")
    if not all(isinstance(v, str) for v in table.values()):
        raise parser.error(f"{key}.headers", "values must be strings")
    headers = tuple((str(k), str(v)) for k, v in table.items())
    problem = headers_problem(headers)
    if problem is not None:
        raise parser.error(f"{key}.headers", problem)
    return McpHttpServerConfig(
        name=name,
        url=url,
        transport="sse" if transport == "sse" else "http",
        headers=headers,
        connect_timeout_secs=parser.get(
            item,
            "connect_timeout_secs",
            f"{key}.connect_timeout_secs",
            float,
            DEFAULT_MCP_CONNECT_TIMEOUT_SECS,
            checks.positive,
        ),
        call_timeout_secs=call_timeout,
    )
