"""MCP servers over HTTP: streamable HTTP (``http``) and the older HTTP+SSE (``sse``),
through the official ``mcp`` SDK's clients (``mcp.client.streamable_http``,
``mcp.client.sse``) running on trio through anyio, as the stdio client does.

- **One HTTP client per server connection**, for the session's lifetime. The SDK takes an
  ``httpx2`` client (not the ``httpx`` pools of agent/io/http_clients.py) and sends the same
  headers with every request, so a server's headers live on its own client; its TLS
  context is the process's one (``http_clients.tls_context``), built once.
- **Headers** are the server's ``headers`` (config.toml or ACP's ``McpServerHttp``),
  checked by acp_server/config/mcp.py; the transport sets the framing and MCP ones.
- **Timeouts.** ``connect_timeout_secs`` bounds each TCP and TLS connect; reading a
  response may pause a little longer than a call may run, so a silent server is reported
  by the call's own timeout (agent/tools/mcp.py) first.
- **Public addresses only** for a server a gateway client named (``public_only``): every
  connection the client opens resolves the host itself, refuses it if any address is
  private, loopback, link-local or otherwise not public (``web_guard.address_problem``)
  and connects to the address it checked, so neither a redirect nor a second DNS answer
  can reach elsewhere; proxies from the environment are not used for it. TLS still checks
  the certificate against the URL's host name.
- **Errors** say what failed: no connection (refused, unresolvable, not a public
  address), the HTTP status the server answered (401 and 403 point at the headers), or an
  answer that is not MCP. The SDK reports some statuses only as "Server returned an error
  response"; ``HttpStatusWatch`` keeps the last one so the message can name it.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

# Imported only when a session starts an HTTP MCP server (agent/tools/mcp.py).
import httpcore2
import httpx2
from mcp.shared.exceptions import MCPError

from acp_server.agent.io.http_clients import tls_context
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.web_guard import address_problem, resolve_host
from acp_server.config import McpHttpServerConfig

if TYPE_CHECKING:
    from httpcore2 import SOCKET_OPTION as SocketOption
    from mcp.client._transport import TransportStreams

DEFAULT_MAX_MCP_MESSAGE_BYTES: Final = 16 << 20
"""Largest message a streamable HTTP server may send as one SSE event: a tool result
carrying a 10 MiB blob (base64) fits. The SDK's HTTP+SSE client keeps its own 1 MiB."""
DEFAULT_MCP_HTTP_CONNECTIONS: Final = 8
"""Connections one server's client opens at most (concurrent calls beyond wait)."""
DEFAULT_MCP_IDLE_CONNECTIONS: Final = 2
DEFAULT_READ_MARGIN_SECS: Final = 30.0
"""How much longer than a call may run a response may stay silent before the connection
is given up: the call's own timeout is reported first."""
DEFAULT_MCP_CLOSE_SECS: Final = 5.0
"""How long ending an MCP session may take (streamable HTTP sends a DELETE)."""
PRIVATE_MCP_HINT: Final = (
    "a gateway client may name public MCP servers only; set mcp_allow_private_hosts = true "
    "for the agent in config.toml to allow it"
)
_STAND_IN_MESSAGES: Final = frozenset(
    {"Server returned an error response", "Not Found", "Session terminated"}
)
"""What the SDK's streamable HTTP client reports instead of an HTTP status."""


def shown_url(url: str) -> str:
    """``url`` without its query and fragment, which may carry a token."""
    return url.split("?", 1)[0].split("#", 1)[0]


class HttpStatusWatch:
    """A response hook keeping the last HTTP error status a server answered."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.reason = ""

    async def __call__(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.status, self.reason = response.status_code, response.reason_phrase


def _status_problem(status: int, reason: str) -> str:
    text = f"the server answered HTTP {status} {reason}".rstrip()
    if status in (401, 403):
        return f"{text}: check the token or headers it is given"
    if status in (400, 404, 405, 406, 415):
        return f"{text}: is the URL its MCP endpoint, and is its transport {_TRANSPORT_WORDS}?"
    return text


_TRANSPORT_WORDS: Final = "the one configured (type http: streamable HTTP, type sse: HTTP+SSE)"


def http_problem(error: BaseException, watch: HttpStatusWatch | None) -> str | None:
    """What ``error`` says went wrong with an HTTP MCP server, in words (None: it is not an
    HTTP failure)."""
    if isinstance(error, httpx2.HTTPStatusError):
        return _status_problem(error.response.status_code, error.response.reason_phrase)
    if isinstance(error, httpx2.ConnectTimeout):
        return "no connection could be opened in time"
    if isinstance(error, httpx2.ConnectError):
        return f"cannot connect: {str(error) or 'connection failed'}"
    if isinstance(error, httpx2.TimeoutException):
        return "the server stopped answering"
    if isinstance(error, httpx2.SSEError):
        return f"the server's event stream broke: {error}"
    if isinstance(error, httpx2.HTTPError):
        return f"HTTP failure: {error}"
    if isinstance(error, MCPError):
        if watch is not None and watch.status is not None and error.message in _STAND_IN_MESSAGES:
            return _status_problem(watch.status, watch.reason)
        if error.message.startswith(("Unexpected content type", "Failed to parse JSON")):
            return f"the server did not answer as an MCP server ({error.message})"
    return None


class PublicAddressBackend(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend, connecting only to public addresses it resolved."""

    def __init__(self) -> None:
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await resolve_host(host, port)
        except ToolError as exc:
            raise httpcore2.ConnectError(str(exc)) from None
        for address in addresses:
            problem = address_problem(address)
            if problem is not None:
                shown = host if host == str(address) else f"{host} ({address})"
                raise httpcore2.ConnectError(
                    f"refusing to connect to {shown}: {problem}; {PRIVATE_MCP_HINT}"
                )
        return await self._inner.connect_tcp(
            str(addresses[0]),
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("MCP servers are reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PublicOnlyTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over ``PublicAddressBackend``, never through a proxy."""

    def __init__(self, verify: ssl.SSLContext | bool, limits: httpx2.Limits) -> None:
        super().__init__(verify=verify, trust_env=False, limits=limits)
        # httpx2's transport takes no network backend: its pool is rebuilt with one
        # (tests/e2e/test_mcp_http.py proves the check is on the path).
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(verify=verify, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=PublicAddressBackend(),
        )


def _client(
    config: McpHttpServerConfig, read_timeout_secs: float, watch: HttpStatusWatch
) -> httpx2.AsyncClient:
    scheme = config.url.partition(":")[0].lower()
    trust_env = not config.public_only
    # Certificates are loaded only where TLS can happen: the URL, or a proxy from the
    # environment that may itself be https.
    needs_tls = scheme == "https" or (trust_env and bool(urllib.request.getproxies()))
    verify: ssl.SSLContext | bool = tls_context() if needs_tls else False
    limits = httpx2.Limits(
        max_connections=DEFAULT_MCP_HTTP_CONNECTIONS,
        max_keepalive_connections=DEFAULT_MCP_IDLE_CONNECTIONS,
    )
    return httpx2.AsyncClient(
        headers=list(config.headers),
        timeout=httpx2.Timeout(config.connect_timeout_secs, read=read_timeout_secs),
        verify=verify,
        trust_env=trust_env,
        limits=limits,
        transport=PublicOnlyTransport(verify, limits) if config.public_only else None,
        event_hooks={"response": [watch]},
    )


@asynccontextmanager
async def open_http_transport(
    config: McpHttpServerConfig, *, call_timeout_secs: float, watch: HttpStatusWatch
) -> AsyncIterator[TransportStreams]:
    """The SDK's read and write streams for ``config``'s server, until the block ends."""
    read_timeout = call_timeout_secs + DEFAULT_READ_MARGIN_SECS
    if config.transport == "sse":
        from mcp.client.sse import sse_client

        def make_client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            return _client(config, read_timeout, watch)

        async with sse_client(config.url, httpx_client_factory=make_client) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client

    async with (
        _client(config, read_timeout, watch) as client,
        streamable_http_client(
            config.url, http_client=client, max_sse_event_size=DEFAULT_MAX_MCP_MESSAGE_BYTES
        ) as streams,
    ):
        yield streams
