"""The gateway daemon: one port, plain HTTP routes and ACP over WebSocket at ``/acp``.

Routes (all under ``[gateway] path_prefix``):

* ``GET /health``: 200 with a small JSON status, no auth.
* ``GET /pair/code``: the one-time pairing code while unpaired.
* ``POST /pair`` (``X-Pairing-Code``): a new bearer token, its digest persisted.
* ``GET /admin/paircode``, ``POST /admin/paircode/new``, ``POST /admin/paircode/rotate``:
  used by ``zeroclaw gateway get-paircode``; loopback peers only, never from a browser.
* ``GET /acp`` with ``Upgrade: websocket``: authenticated *before* the upgrade, then one
  ``serve_connection`` per WebSocket over the process-wide ``AcpApp`` (one store), so a
  session created over one connection can be loaded over another or over stdio.

Why a hand-rolled front (h11 + wsproto) rather than trio-websocket's ``serve_websocket``:
the same port must answer plain HTTP (``/health``, ``/pair``), which trio-websocket cannot,
and the 401 must be sent before any upgrade. See docs/gateway.md.

Shutdown (SIGINT/SIGTERM): stop accepting; every connection keeps running until its
in-flight requests are answered or the drain deadline passes; then its input ends, so the
ACP layer cancels what is still running and answers it; then it is closed with 1012
"restarting" (issue 8: bridges reconnect on 1012 and stop on 1008). A second signal
cancels everything at once.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import signal
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

import trio
from wsproto.utilities import generate_accept_token

from acp_server.app import AcpApp
from acp_server.config import GatewayConfig
from acp_server.gateway.admin import ADMIN_HEADER, ADMIN_SECRET_FILE, AdminSecret
from acp_server.gateway.auth import (
    UNAUTHORIZED_BODY,
    TokenRegistry,
    hash_token,
    host_header_allowed,
    is_loopback_host,
    offered_subprotocols,
    origin_allowed,
    presented_token,
    select_subprotocol,
)
from acp_server.gateway.http import (
    BadRequest,
    HttpRequest,
    is_websocket_upgrade,
    read_body,
    read_request,
    send_json,
    send_response,
)
from acp_server.gateway.pairing import (
    ConfigRewriteError,
    PairAccepted,
    PairingGuard,
    generate_token,
    persist_paired_tokens,
)
from acp_server.gateway.websocket import (
    DEFAULT_MAX_MESSAGE_BYTES,
    CloseCode,
    WebSocketTransport,
)
from acp_server.protocol.connection import serve_connection

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_SECS: Final = 30.0
"""How long running turns may take to finish after SIGTERM before they are cancelled."""
DEFAULT_CLOSE_GRACE_SECS: Final = 15.0
"""After the drain deadline: time for cancelled turns to answer (the ACP layer allows them
10 s) and for close frames to go out, before everything left is cancelled."""
DEFAULT_HANDSHAKE_TIMEOUT_SECS: Final = 10.0
"""A client must send its whole request head within this (slow-loris guard)."""
DEFAULT_MAX_CONNECTIONS: Final = 1000
"""Concurrent WebSocket connections; beyond it an upgrade gets 503."""
WEBSOCKET_VERSION: Final = "13"
RESTART_REASON: Final = "gateway restarting, retry"
REVOKED_REASON: Final = "token revoked"
DRAIN_REFUSAL: Final = "Gateway restarting: request not started; reconnect and retry"

Announce = Callable[[str], None]


class GatewayError(Exception):
    """The gateway cannot start; the message says what to change.

    ``config_problem`` is true when the configuration must change (exit 2), false when
    the environment is at fault (port taken: exit 1).
    """

    def __init__(self, message: str, *, config_problem: bool = True) -> None:
        super().__init__(message)
        self.config_problem = config_problem


def normalize_prefix(prefix: str) -> str:
    """``""`` or ``/something`` without a trailing slash."""
    stripped = prefix.strip().strip("/")
    return f"/{stripped}" if stripped else ""


def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _peer_address(stream: trio.abc.Stream) -> str:
    inner: object = stream
    while isinstance(inner, trio.SSLStream):
        inner = inner.transport_stream
    if isinstance(inner, trio.SocketStream):
        try:
            address = inner.socket.getpeername()
        except OSError:
            return "?"
        if isinstance(address, tuple) and address:
            return str(address[0])
    return "?"


def _is_loopback_address(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@dataclass(eq=False, slots=True)
class _Connection:
    transport: WebSocketTransport
    token_digest: str | None
    peer: str
    close_code: int = CloseCode.NORMAL
    close_reason: str = ""

    def shut(self, code: int, reason: str) -> None:
        """End input; the handler then closes the socket with ``code``."""
        self.close_code, self.close_reason = code, reason
        self.transport.end_input()


class Gateway:
    """One gateway daemon over a shared ``AcpApp``.

    Args:
        app: the process-wide config and store.
        host, port: override ``[gateway] host``/``port`` (``port=0``: the OS chooses).
        announce: where operator-facing lines go (listening URL, pairing code); stderr in
            the CLI.
    """

    def __init__(
        self,
        app: AcpApp,
        *,
        host: str | None = None,
        port: int | None = None,
        drain_timeout_secs: float = DEFAULT_DRAIN_TIMEOUT_SECS,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        handshake_timeout_secs: float = DEFAULT_HANDSHAKE_TIMEOUT_SECS,
        announce: Announce | None = None,
    ) -> None:
        self.app = app
        self.settings: GatewayConfig = app.config.gateway
        self.host = (host or self.settings.host).strip() or "127.0.0.1"
        self.port = self.settings.port if port is None else port
        self.prefix = normalize_prefix(self.settings.path_prefix)
        self.drain_timeout_secs = drain_timeout_secs
        self.max_message_bytes = max_message_bytes
        self.max_connections = max_connections
        self.handshake_timeout_secs = handshake_timeout_secs
        self._announce = announce or (lambda line: logger.warning("%s", line))
        self.tokens = TokenRegistry(self.settings.paired_tokens)
        self.pairing = PairingGuard(
            clock=time.monotonic, rate_limit_per_minute=self.settings.pair_rate_limit_per_minute
        )
        self._connections: set[_Connection] = set()
        self._all_closed = trio.Event()
        self._all_closed.set()
        self._drain_requested = trio.Event()
        self._draining = False
        self._persist_lock = trio.Lock()
        self.bound_port: int | None = None
        self._started_at = time.monotonic()
        self._admin_secret: AdminSecret | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def loopback_only(self) -> bool:
        return is_loopback_host(self.host)

    @property
    def scheme(self) -> str:
        return "https" if self.settings.tls.enabled else "http"

    def url(self, path: str, *, websocket: bool = False) -> str:
        scheme = ("wss" if self.settings.tls.enabled else "ws") if websocket else self.scheme
        return f"{scheme}://{_format_host(self.host)}:{self.bound_port}{self.prefix}{path}"

    def request_drain(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._drain_requested.set()

    def _check_bind(self) -> None:
        if not self.loopback_only and not self.settings.allow_public_bind:
            raise GatewayError(
                f"refusing to bind {self.host}: it is not a loopback address. Anyone who can "
                "reach it could pair with this agent. Set `allow_public_bind = true` under "
                "[gateway] in config.toml to allow it (and keep require_pairing on, ideally with TLS)."
            )

    def _ssl_context(self) -> ssl.SSLContext | None:
        tls = self.settings.tls
        if not tls.enabled:
            return None
        if tls.cert_path is None or tls.key_path is None:
            raise GatewayError(
                "[gateway.tls] enabled = true needs both cert_path and key_path (PEM files)"
            )
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(str(tls.cert_path), str(tls.key_path))
        except (OSError, ssl.SSLError) as exc:
            raise GatewayError(
                f"cannot load the TLS certificate {tls.cert_path} / key {tls.key_path}: {exc}"
            ) from None
        return context

    async def serve(
        self,
        *,
        handle_signals: bool = True,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Listen until drained; ``task_status.started`` gets the bound port.

        Raises:
            GatewayError: bad bind address or TLS settings, or the port is unavailable.
        """
        self._check_bind()
        ssl_context = self._ssl_context()
        try:
            tcp_listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        except OSError as exc:
            raise GatewayError(
                f"cannot listen on {_format_host(self.host)}:{self.port}: {exc.strerror or exc}",
                config_problem=False,
            ) from None
        self.bound_port = int(tcp_listeners[0].socket.getsockname()[1])
        listeners: list[trio.abc.Listener[trio.abc.Stream]] = []
        for tcp_listener in tcp_listeners:
            if ssl_context is not None:
                listeners.append(trio.SSLListener(tcp_listener, ssl_context))
            else:
                listeners.append(tcp_listener)
        # Signals are caught from here on: a supervisor may send SIGTERM as soon as it has
        # read the "listening" line, and that must drain, not kill.
        signal_context = (
            trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
            if handle_signals
            else contextlib.nullcontext(None)
        )
        config_dir = self.app.config.config_dir
        try:
            self._admin_secret = await trio.to_thread.run_sync(AdminSecret.create, config_dir)
        except OSError as exc:
            logger.warning(
                "cannot write %s in %s (%s); `zeroclaw gateway get-paircode` will not work",
                ADMIN_SECRET_FILE,
                config_dir,
                exc.strerror or exc,
            )
        try:
            with signal_context as signals:
                self._announce_start()
                async with trio.open_nursery() as outer:
                    if signals is not None:
                        outer.start_soon(self._watch_signals, signals, outer.cancel_scope)
                    task_status.started(self.bound_port)
                    await self._serve_until_drained(listeners)
                    outer.cancel_scope.cancel()
        finally:
            if self._admin_secret is not None:
                self._admin_secret.remove()

    def _announce_start(self) -> None:
        if self.settings.require_pairing and not len(self.tokens):
            code = self.pairing.issue_code()
            self._announce(
                f"pairing code: {code} (one-time; exchange it with POST {self.url('/pair')} "
                f"and header X-Pairing-Code, or run `zeroclaw-acp-bridge --pair-code {code}`)"
            )
        elif not self.settings.require_pairing:
            self._announce("pairing is off ([gateway] require_pairing = false): no token needed")
            if not self.loopback_only:
                logger.warning(
                    "listening on %s with pairing off: anyone who can reach this port can "
                    "drive the agent, shell tool included",
                    self.host,
                )
        # Last, so a supervisor that waits for this line has seen the pairing code already.
        self._announce(
            f"gateway listening on {self.url('')} "
            f"(ACP WebSocket: {self.url('/acp', websocket=True)})"
        )

    async def _watch_signals(
        self, signals: AsyncIterator[int], force_scope: trio.CancelScope
    ) -> None:
        async for signum in signals:
            name = signal.Signals(signum).name
            if not self._drain_requested.is_set():
                logger.warning(
                    "%s: draining (up to %.0f s for running turns; send again to stop now)",
                    name,
                    self.drain_timeout_secs,
                )
                self.request_drain()
            else:
                logger.warning("%s again: cancelling everything now", name)
                force_scope.cancel()
                return

    async def _serve_until_drained(
        self, listeners: list[trio.abc.Listener[trio.abc.Stream]]
    ) -> None:
        async with trio.open_nursery() as connections:
            async with trio.open_nursery() as accepting:
                for listener in listeners:
                    accepting.start_soon(self._accept_loop, listener, connections)
                await self._drain_requested.wait()
                accepting.cancel_scope.cancel()
            self._draining = True
            count = len(self._connections)
            logger.info("stopped accepting; draining %d connection(s)", count)
            deadline = trio.current_time() + self.drain_timeout_secs
            async with trio.open_nursery() as waiters:
                for connection in list(self._connections):
                    waiters.start_soon(self._drain_connection, connection, deadline)
            with trio.move_on_after(DEFAULT_CLOSE_GRACE_SECS):
                await self._all_closed.wait()
            if self._connections:
                logger.warning(
                    "%d connection(s) did not close in time; cancelling", len(self._connections)
                )
            connections.cancel_scope.cancel()
        logger.info("gateway stopped")

    async def _drain_connection(self, connection: _Connection, deadline: float) -> None:
        connection.transport.refuse_new_requests(DRAIN_REFUSAL)
        with trio.move_on_at(deadline):
            await connection.transport.in_flight.wait_idle()
        if connection.transport.in_flight:
            logger.info(
                "drain deadline: cancelling %d unanswered request(s) from %s",
                len(connection.transport.in_flight),
                connection.peer,
            )
        connection.shut(CloseCode.SERVICE_RESTART, RESTART_REASON)

    async def _accept_loop(
        self, listener: trio.abc.Listener[trio.abc.Stream], connections: trio.Nursery
    ) -> None:
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    # EMFILE and friends: back off instead of spinning (trio.serve_listeners does the same).
                    logger.error("accept failed: %s; retrying shortly", exc)
                    await trio.sleep(0.1)
                    continue
                connections.start_soon(self._handle_stream, stream)

    # ------------------------------------------------------------------ per connection

    async def _handle_stream(self, stream: trio.abc.Stream) -> None:
        peer = _peer_address(stream)
        try:
            request: HttpRequest | None = None
            with trio.move_on_after(self.handshake_timeout_secs):
                try:
                    request = await read_request(stream)
                except BadRequest as exc:
                    await send_response(stream, exc.status, f"Bad request: {exc}\n")
                    return
            if request is None:
                return
            try:
                await self._route(stream, request, peer)
            except BadRequest as exc:  # a request body that could not be read
                await send_response(stream, exc.status, f"Bad request: {exc}\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away (or the TLS handshake failed)
        except Exception:
            # One broken exchange must never take the daemon (and every other client) down.
            logger.exception("unexpected error while serving %s", peer)
        finally:
            await trio.aclose_forcefully(stream)

    async def _route(self, stream: trio.abc.Stream, request: HttpRequest, peer: str) -> None:
        allowed = self.settings.allowed_origins
        if self.loopback_only and not host_header_allowed(request.header("host"), allowed):
            # DNS rebinding: a web page whose name resolves to 127.0.0.1 sends its own Host.
            await send_response(
                stream, 403, "Forbidden - Host header must name this machine (loopback)\n"
            )
            return
        origin = request.header("origin")
        if origin is not None and not origin_allowed(origin, allowed):
            logger.info(
                "refused %s %s from %s: origin %s", request.method, request.path, peer, origin
            )
            await send_response(
                stream,
                403,
                f"Forbidden - origin {origin} is not allowed; add it to [gateway] allowed_origins\n",
            )
            return
        prefix = self.prefix
        path = request.path
        if prefix and not (path == prefix or path.startswith(prefix + "/")):
            await send_response(stream, 404, "Not found\n")
            return
        route = path[len(prefix) :] or "/"
        if route == "/acp":
            await self._serve_websocket(stream, request, peer)
        elif route == "/health":
            if await self._only(stream, request, {"GET", "HEAD"}):
                await self._health(stream)
        elif route == "/pair/code":
            if await self._only(stream, request, {"GET"}):
                await self._pair_code(stream, peer)
        elif route == "/pair":
            if await self._only(stream, request, {"POST"}):
                await self._read_body(stream, request)
                await self._pair(stream, request, peer)
        elif route.startswith("/admin/"):
            await self._admin(stream, request, route, peer)
        else:
            await send_response(stream, 404, "Not found\n")

    async def _read_body(self, stream: trio.abc.Stream, request: HttpRequest) -> bytes:
        with trio.move_on_after(self.handshake_timeout_secs):
            return await read_body(stream, request)
        raise BadRequest(408, "the request body did not arrive in time")

    @staticmethod
    async def _only(stream: trio.abc.Stream, request: HttpRequest, methods: set[str]) -> bool:
        if request.method in methods:
            return True
        await send_response(
            stream, 405, "Method not allowed\n", headers=[("Allow", ", ".join(sorted(methods)))]
        )
        return False

    async def _health(self, stream: trio.abc.Stream) -> None:
        await send_json(
            stream,
            200,
            {
                "status": "draining" if self._draining else "ok",
                "connections": len(self._connections),
                "pairing_required": self.settings.require_pairing,
                "paired": bool(len(self.tokens)),
                "uptime_secs": int(time.monotonic() - self._started_at),
            },
        )

    async def _pair_code(self, stream: trio.abc.Stream, peer: str) -> None:
        unpaired = self.settings.require_pairing and not len(self.tokens)
        body: dict[str, object] = {
            "success": True,
            "pairing_required": self.settings.require_pairing,
            "pairing_code": None,
        }
        # The reference hands the code to anyone until the first pairing; on a public bind
        # that lets whoever reaches the port first pair. Only this machine's own clients (a
        # same-host bridge) read it here; a remote client gets it from the operator, who
        # sees it on the gateway's stderr or from `zeroclaw gateway get-paircode`.
        if unpaired and _is_loopback_address(peer):
            body["pairing_code"] = self.pairing.code
        elif unpaired:
            body["message"] = (
                "the pairing code is only given to clients on the gateway host; ask its "
                "operator for the code (`zeroclaw gateway get-paircode`)"
            )
        await send_json(stream, 200, body)

    async def _pair(self, stream: trio.abc.Stream, request: HttpRequest, peer: str) -> None:
        if not self.settings.require_pairing:
            await send_json(
                stream, 400, {"error": "Pairing is off ([gateway] require_pairing = false)"}
            )
            return
        outcome = self.pairing.attempt(request.header("x-pairing-code"))
        if not isinstance(outcome, PairAccepted):
            logger.warning("pairing attempt from %s refused: %s", peer, outcome.error)
            body: dict[str, object] = {"error": outcome.error}
            headers: list[tuple[str, str]] = []
            if outcome.retry_after is not None:
                body["retry_after"] = outcome.retry_after
                headers.append(("Retry-After", str(outcome.retry_after)))
            await send_json(stream, outcome.status, body, headers=headers)
            return
        token = generate_token()
        self.tokens.add(hash_token(token))
        persisted, message = await self._persist_tokens()
        logger.warning("paired a new client from %s (%s)", peer, message)
        await send_json(
            stream,
            200,
            {"paired": True, "persisted": persisted, "token": token, "message": message},
        )

    async def _persist_tokens(self) -> tuple[bool, str]:
        config_file = self.app.config.config_file
        if config_file is None:
            return False, (
                f"paired for this run only: there is no config.toml in {self.app.config.config_dir} "
                "(run `zeroclaw init` to create one)"
            )
        async with self._persist_lock:
            digests = self.tokens.digests
            try:
                await trio.to_thread.run_sync(persist_paired_tokens, config_file, digests)
            except ConfigRewriteError as exc:
                logger.error("could not save paired tokens: %s", exc)
                return False, f"paired for this run only: {exc}"
        return True, f"token digest saved in {config_file}"

    async def _admin(
        self, stream: trio.abc.Stream, request: HttpRequest, route: str, peer: str
    ) -> None:
        # Only the operator's own machine, never a browser (a page could otherwise revoke
        # every token with a form POST; the CLI sends no Origin header), and only someone
        # who can read the config directory (the admin secret; see gateway/admin.py).
        secret = self._admin_secret
        if (
            not _is_loopback_address(peer)
            or request.header("origin") is not None
            or secret is None
            or not secret.matches(request.header(ADMIN_HEADER))
        ):
            logger.warning("refused admin request %s from %s", route, peer)
            await send_response(
                stream,
                403,
                "Forbidden - the admin endpoint only answers `zeroclaw gateway get-paircode` "
                "run on the gateway host by a user who can read its config directory\n",
            )
            return
        if request.method == "POST":
            await self._read_body(stream, request)
        if route == "/admin/paircode" and request.method == "GET":
            code = self.pairing.code
            await send_json(
                stream,
                200,
                {
                    "success": True,
                    "pairing_required": self.settings.require_pairing,
                    "pairing_code": code if self.settings.require_pairing else None,
                    "paired_tokens": len(self.tokens),
                },
            )
            return
        if route not in {"/admin/paircode/new", "/admin/paircode/rotate"}:
            await send_response(stream, 404, "Not found\n")
            return
        if request.method != "POST":
            await send_response(stream, 405, "Method not allowed\n", headers=[("Allow", "POST")])
            return
        if not self.settings.require_pairing:
            await send_json(
                stream, 409, {"error": "Pairing is off ([gateway] require_pairing = false)"}
            )
            return
        revoked = 0
        persisted = True
        message = ""
        if route == "/admin/paircode/rotate":
            revoked = len(self.tokens)
            self.tokens.clear()
            persisted, message = await self._persist_tokens()
            for connection in list(self._connections):
                if connection.token_digest is not None:
                    connection.shut(CloseCode.POLICY_VIOLATION, REVOKED_REASON)
            logger.warning("revoked %d token(s) at the operator's request", revoked)
        code = self.pairing.issue_code()
        logger.warning("new pairing code issued at the operator's request")
        await send_json(
            stream,
            200,
            {
                "success": True,
                "pairing_code": code,
                "revoked_tokens": revoked,
                "persisted": persisted,
                "message": message,
            },
        )

    # ------------------------------------------------------------------ WebSocket

    async def _serve_websocket(
        self, stream: trio.abc.Stream, request: HttpRequest, peer: str
    ) -> None:
        acp_url = self.url("/acp", websocket=True)
        if request.method != "GET" or not is_websocket_upgrade(request):
            await send_response(
                stream,
                426,
                f"Upgrade required - {self.prefix}/acp speaks ACP over WebSocket; connect to {acp_url}\n",
                headers=[("Upgrade", "websocket"), ("Connection", "Upgrade")],
            )
            return
        if (request.header("sec-websocket-version") or "").strip() != WEBSOCKET_VERSION:
            await send_response(
                stream,
                426,
                "Unsupported WebSocket version; this gateway speaks version 13\n",
                headers=[("Sec-WebSocket-Version", WEBSOCKET_VERSION)],
            )
            return
        key = (request.header("sec-websocket-key") or "").strip()
        if not key:
            await send_response(stream, 400, "Bad request - missing Sec-WebSocket-Key\n")
            return
        token_digest: str | None = None
        if self.settings.require_pairing:
            presented = presented_token(request.headers, request.query)
            token_digest = self.tokens.verify(presented.token) if presented else None
            if token_digest is None:
                why = "no token" if presented is None else f"unknown token ({presented.source})"
                logger.warning("refused /acp upgrade from %s: %s", peer, why)
                await send_response(
                    stream, 401, UNAUTHORIZED_BODY + "\n", headers=[("WWW-Authenticate", "Bearer")]
                )
                return
        if self._draining:
            await send_response(
                stream, 503, "Service unavailable - gateway restarting, retry\n",
                headers=[("Retry-After", "1")],
            )  # fmt: skip
            return
        if len(self._connections) >= self.max_connections:
            await send_response(
                stream,
                503,
                f"Service unavailable - {self.max_connections} connections are open already\n",
                headers=[("Retry-After", "5")],
            )
            return
        agent = request.query.get("agent", "").strip() or None
        subprotocol = select_subprotocol(offered_subprotocols(request.headers))
        response = [
            "HTTP/1.1 101 Switching Protocols",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Accept: {generate_accept_token(key.encode('latin-1')).decode('ascii')}",
        ]
        if subprotocol is not None:
            response.append(f"Sec-WebSocket-Protocol: {subprotocol}")
        await stream.send_all(("\r\n".join(response) + "\r\n\r\n").encode("latin-1"))
        transport = WebSocketTransport(
            stream,
            trailing_data=request.trailing_data,
            peer=peer,
            max_message_bytes=self.max_message_bytes,
            ping_interval_secs=float(self.settings.websocket_ping_interval_secs),
        )
        connection = _Connection(transport, token_digest, peer)
        self._connections.add(connection)
        if self._all_closed.is_set():
            self._all_closed = trio.Event()
        if self._draining:  # the drain began while the 101 was being written
            connection.shut(CloseCode.SERVICE_RESTART, RESTART_REASON)
        logger.info(
            "ACP connection from %s%s (%d open)",
            peer,
            f" with default agent {agent!r}" if agent else "",
            len(self._connections),
        )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(transport.run_reader)
                nursery.start_soon(transport.run_keepalive)
                try:
                    await serve_connection(transport, self.app, connection_default_agent=agent)
                except Exception:
                    logger.exception("ACP connection from %s failed", peer)
                    connection.close_code, connection.close_reason = (
                        CloseCode.INTERNAL_ERROR,
                        "internal error",
                    )
                await transport.close(connection.close_code, connection.close_reason)
                nursery.cancel_scope.cancel()
        finally:
            self._connections.discard(connection)
            if not self._connections:
                self._all_closed.set()
            logger.info("ACP connection from %s closed (code %s)", peer, transport.close_code)
