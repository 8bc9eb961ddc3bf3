"""The process's long-lived HTTP clients: one ``httpx.AsyncClient`` per pool, kept alive.

Building an ``httpx.AsyncClient`` with certificate checks loads the CA bundle into a new
TLS context: 50-250 ms of CPU on a small machine, which a client per model call paid on
every tool round. Instead every user of HTTP (each model provider, the web tools) names a
``PoolSpec`` and gets that pool's one client from ``shared_client``, built on first use; its
connections are kept alive between calls. An HTTP MCP server is the exception: the MCP
SDK's transports take an ``httpx2`` client carrying the server's headers, so each server
connection keeps one of its own for the session (agent/tools/mcp_http.py), with the TLS
context below.

- **Bounded.** A pool opens at most ``max_connections`` connections at once and keeps at
  most ``max_idle_connections`` idle ones, for ``idle_secs``; a call that finds every
  connection busy waits for one as long as its own timeout allows.
- **TLS once, and only for https.** ``tls_context`` is built once per process, the first
  time a pool needs it: a pool for an ``http://`` address (a local Ollama, a test server)
  never loads certificates. A pool that honours the environment's proxy variables gets it
  too, as its proxy may be an ``https://`` one.
- **Per call stays per call.** Timeouts, headers and keys are passed with each request, so
  pools are shared by every session of a provider.
- **Lifetime.** Clients belong to one trio run (httpcore's connections and locks do):
  ``http_clients()`` opens the run's set and closes every client on the way out, which is
  what ``acp_server.app.open_app`` does for the server's lifetime. Used outside such a
  block (a test driving a provider directly), the set is made on first use and closed
  when the trio run ends.
- **One seam for tests.** ``http_clients(transport=...)`` builds every client of the block
  on that ``httpx`` transport (an ``httpx.MockTransport`` answering like a model API), so
  provider tests run without sockets; nothing else changes on the way to it.
- **Cheap to import.** httpx is imported when the first client is built, so the server's
  start-up (which opens the set) does not load the HTTP stack.

A trio cancel scope still aborts a request at once: httpcore closes a connection whose
response was not read to the end instead of returning it to the pool, so a cancelled turn
never leaves a half-read connection for the next call. ``release_stream`` finishes a
response the caller has stopped reading so that its connection can be reused.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

if TYPE_CHECKING:
    import ssl

    import httpx

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONNECTIONS: Final = 64
"""Connections one pool opens at most at once (concurrent calls beyond wait for one)."""
DEFAULT_MAX_IDLE_CONNECTIONS: Final = 8
"""Idle connections one pool keeps open for the next call: the memory a pool holds between
calls is these sockets' buffers."""
DEFAULT_IDLE_CONNECTION_SECS: Final = 30.0
"""How long an idle connection is kept (servers close theirs after 60 s or more)."""
DEFAULT_DRAIN_SECS: Final = 0.1
"""How long ``release_stream`` waits for the end of a response whose caller has what it
needs (an SSE stream after its last event); a server slower than that loses the connection."""
DEFAULT_MAX_DRAIN_ITEMS: Final = 64
"""Most items ``release_stream`` reads past the caller's last before giving up on reuse."""


class PoolSpec(msgspec.Struct, frozen=True):
    """A named connection pool: who uses it and how big it may grow."""

    name: str
    trust_env: bool = True
    """Honour HTTP(S)_PROXY, NO_PROXY and SSL_CERT_FILE (the web tools do not: the address
    they checked must be the one they connect to)."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_idle_connections: int = DEFAULT_MAX_IDLE_CONNECTIONS
    idle_secs: float = DEFAULT_IDLE_CONNECTION_SECS

    def limits(self) -> httpx.Limits:
        import httpx

        return httpx.Limits(
            max_connections=self.max_connections,
            max_keepalive_connections=self.max_idle_connections,
            keepalive_expiry=self.idle_secs,
        )


_tls_context: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """The process's TLS client context (certificate checks on; ``SSL_CERT_FILE`` or
    ``SSL_CERT_DIR`` when set, else the certifi bundle), built on first use."""
    global _tls_context
    if _tls_context is None:
        import httpx

        _tls_context = httpx.create_ssl_context(trust_env=True)
    return _tls_context


def _needs_tls(spec: PoolSpec, scheme: str) -> bool:
    if scheme == "https":
        return True
    import urllib.request  # loaded by httpx already

    # A proxy from the environment may itself be reached over https.
    return spec.trust_env and bool(urllib.request.getproxies())


class HttpClients:
    """One trio run's clients, by pool name and URL scheme; ``transport``, when given,
    carries every request instead of the network (tests)."""

    def __init__(self, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._transport = transport
        self._clients: dict[tuple[str, str], httpx.AsyncClient] = {}
        self.built = 0
        """Clients built so far (each one is a pool; tests check none is built per call)."""

    def client(self, spec: PoolSpec, url: str) -> httpx.AsyncClient:
        # Called for every request: no URL parsing and no look at the environment here.
        scheme = url.partition(":")[0].lower()
        key = (spec.name, scheme)
        client = self._clients.get(key)
        if client is None or client.is_closed:
            import httpx

            tls = _needs_tls(spec, scheme)

            client = httpx.AsyncClient(
                verify=tls_context() if tls else False,
                trust_env=spec.trust_env,
                follow_redirects=False,
                limits=spec.limits(),
                transport=self._transport,
            )
            self._clients[key] = client
            self.built += 1
            logger.debug("HTTP pool %r opened (%s)", spec.name, "TLS" if tls else "plain")
        return client

    async def aclose(self) -> None:
        """Close every client (their idle connections with them); a later call reopens."""
        clients, self._clients = list(self._clients.values()), {}
        with trio.CancelScope(shield=True):
            for client in clients:
                await client.aclose()


_RUN_CLIENTS: trio.lowlevel.RunVar[HttpClients] = trio.lowlevel.RunVar("zeroclaw_http_clients")


@asynccontextmanager
async def http_clients(
    *, transport: httpx.AsyncBaseTransport | None = None
) -> AsyncIterator[HttpClients]:
    """The current trio run's clients for the block; all are closed when it ends.
    ``transport``: what carries their requests instead of the network (tests)."""
    clients = HttpClients(transport)
    token = _RUN_CLIENTS.set(clients)
    try:
        yield clients
    finally:
        _RUN_CLIENTS.reset(token)
        await clients.aclose()


def current_http_clients() -> HttpClients:
    """The run's clients: those of the enclosing ``http_clients()`` block, else a set made
    now and closed when the trio run ends."""
    try:
        return _RUN_CLIENTS.get()
    except LookupError:
        clients = HttpClients()
        _RUN_CLIENTS.set(clients)
        trio.lowlevel.spawn_system_task(_close_when_run_ends, clients)
        return clients


async def _close_when_run_ends(clients: HttpClients) -> None:
    try:
        await trio.sleep_forever()
    finally:
        try:
            await clients.aclose()
        except Exception as error:  # a system task must not fail the run on its way out
            logger.debug("closing the HTTP clients at the end of the run: %r", error)


def shared_client(spec: PoolSpec, url: str | httpx.URL) -> httpx.AsyncClient:
    """The long-lived client of pool ``spec`` for requests to ``url``."""
    return current_http_clients().client(spec, str(url))


class ConnectionWatch:
    """A request's ``trace`` extension that notes whether it opened a new connection: a
    request that failed before any answer on a reused (pooled) connection met a
    connection the server had already closed, and is worth one more try."""

    def __init__(self) -> None:
        self.opened_connection = False

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        # httpcore's "connection.connect_tcp.started" (or connect_unix_socket)
        if event.startswith("connection.connect_") and event.endswith(".started"):
            self.opened_connection = True


async def finish_stream(stream: AsyncIterator[Any]) -> None:
    """Abandon a partly read httpx stream so that none of its layers is left suspended.

    httpx and httpcore read a body through several nested async generators and do not
    close the inner ones when the outer one is closed; trio then finalizes each at garbage
    collection with a ResourceWarning. Resuming the stream inside an already cancelled
    scope makes the next socket read raise ``Cancelled`` at its first checkpoint, which
    unwinds (and so finishes) every layer and closes the connection; data h11 had already
    buffered is read and dropped on the way. A finished stream returns at once.
    """
    with trio.CancelScope() as scope:
        scope.cancel()
        await _exhaust(stream, limit=None)


async def release_stream(stream: AsyncIterator[Any]) -> None:
    """Read what is left of a stream whose caller has what it needs, so that its
    connection goes back to the pool: the rest of a response usually is the end of the
    body, already received. A stream that does not end within ``DEFAULT_DRAIN_SECS`` or
    ``DEFAULT_MAX_DRAIN_ITEMS`` is abandoned (its connection closed) like ``finish_stream``.
    """
    with trio.move_on_after(DEFAULT_DRAIN_SECS):
        if await _exhaust(stream, limit=DEFAULT_MAX_DRAIN_ITEMS):
            return
    await finish_stream(stream)


async def _exhaust(stream: AsyncIterator[Any], *, limit: int | None) -> bool:
    """Read ``stream`` to its end (True), or ``limit`` items without reaching it (False)."""
    read = 0
    try:
        while limit is None or read < limit:
            await stream.__anext__()
            read += 1
    except StopAsyncIteration:
        return True
    except Exception as error:  # abandoned on purpose: a late error must not mask the first
        logger.debug("ignored while finishing a response stream: %r", error)
        return True
    return False
