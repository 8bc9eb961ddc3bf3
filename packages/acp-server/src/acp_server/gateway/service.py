"""The gateway daemon: one port, plain HTTP routes and ACP at ``/acp`` (WebSocket and
ACP's Streamable HTTP).

This module is the lifecycle: bind (with TLS if configured), accept, hand each connection
to the route table, and drain on shutdown. The parts live beside it: gateway/state.py (what
is shared), gateway/routes.py (the route table), gateway/handlers.py (health, pairing,
admin), gateway/upgrade.py (the WebSocket upgrade), gateway/websocket.py (its transport),
gateway/streamable_http.py (Streamable HTTP) and gateway/http_transport.py (its transport).

Why an h11 front and a wsproto connection rather than trio-websocket: the same port must
answer plain HTTP (``/health``, ``/pair``) and send the 401 before any upgrade, and on the
upgraded socket trio-websocket counts a message's size in characters and keeps one object per
fragment, and writes each frame on its own. Measured in docs/decisions.md ("gateway: the
WebSocket on wsproto").

Shutdown (SIGINT/SIGTERM): stop accepting (unless Streamable HTTP connections are open:
their clients' POSTs need new TCP connections, so the listeners stay open for them and
everything new is refused); every connection's ACP layer refuses new requests and the
gateway waits until the ones already running are answered or the drain deadline passes;
then its input ends, so the ACP layer cancels what is still running and answers it; then
it is closed (a WebSocket with 1012 "restarting": bridges reconnect on 1012 and stop on
1008). A second signal cancels everything at once.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import signal
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Final

import msgspec
import trio
from wsproto.frame_protocol import CloseReason

from acp_core.gateway_contract import ACP_PATH, PAIR_PATH, PAIRING_CODE_HEADER
from acp_server.config import GatewayConfig
from acp_server.errors import ZeroclawError
from acp_server.gateway.admin import ADMIN_SECRET_FILE, AdminSecret
from acp_server.gateway.client_address import (
    ClientAddress,
    ProxyHeaderRefused,
    TrustedProxies,
    forwarded_client,
    normalized_ip,
    read_proxy_prelude,
)
from acp_server.gateway.handlers import build_routes, screen_request
from acp_server.gateway.http import BadRequest, HttpRequest, read_request_or_refuse, send_response
from acp_server.gateway.metrics_routes import METRICS_PATH, serve_metrics_listener
from acp_server.gateway.pairing import PairingGuard
from acp_server.gateway.pending import (
    DEFAULT_MAX_PENDING_PER_PEER,
    bytes_waiting,
    pending_cap_for_file_limit,
)
from acp_server.gateway.principals import (
    DEFAULT_TOKEN_USE_FLUSH_SECS,
    adopt_local_tokens,
    keep_token_uses,
)
from acp_server.gateway.routes import Exchange, RouteTable
from acp_server.gateway.state import RESTART_REASON, GatewayState, LiveConnection
from acp_server.gateway.streamable_http import StreamableHttp, wants_streamable_http
from acp_server.gateway.upgrade import serve_websocket
from acp_server.gateway.websocket import DEFAULT_MAX_MESSAGE_BYTES
from acp_server.observability.prometheus import PrometheusMetrics
from acp_server.protocol.services.context import AcpApp
from acp_server.storage import StoreError, StoreUnavailable

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_SECS: Final = 30.0
"""How long running turns may take to finish after SIGTERM before they are cancelled."""
DEFAULT_CLOSE_GRACE_SECS: Final = 15.0
"""After the drain deadline: time for cancelled turns to answer (the ACP layer allows them
10 s) and for close frames to go out, before everything left is cancelled."""
DEFAULT_HANDSHAKE_TIMEOUT_SECS: Final = 5.0
"""A client must send its whole request head within this (slow-loris guard); the socket is
closed otherwise. Unauthenticated sockets are also capped (gateway/pending.py)."""
DEFAULT_MAX_CONNECTIONS: Final = 1000
"""Concurrent ACP connections (WebSocket and Streamable HTTP); beyond it a new one gets 503."""
DRAIN_REFUSAL: Final = "Gateway restarting: request not started; reconnect and retry"
ACCEPT_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
"""Accept failures that mean "out of resources for now": retried after a pause, as
trio.serve_listeners does; any other accept error ends the gateway."""
ACCEPT_RETRY_SECS: Final = 0.1
REFUSAL_LINGER_SECS: Final = 1.0
REFUSAL_LINGER_BYTES: Final = 64 * 1024

Announce = Callable[[str], None]


class GatewayError(ZeroclawError):
    """The gateway cannot start; the message says what to change.

    ``config_problem`` is true when the configuration must change (exit 2), false when
    the environment is at fault (port taken: exit 1).
    """

    def __init__(self, message: str, *, config_problem: bool = True) -> None:
        super().__init__(message)
        self.config_problem = config_problem


def _peer_address(stream: trio.abc.Stream) -> str:
    if isinstance(stream, trio.SocketStream):
        try:
            address = stream.socket.getpeername()
        except OSError:
            return "?"
        if isinstance(address, tuple) and address:
            ip = normalized_ip(str(address[0]))
            return str(address[0]) if ip is None else str(ip)
    return "?"


async def _first_byte(socket: trio.socket.SocketType | None, deadline: float) -> bool:
    """Wait until ``socket`` has something to read (or was closed by its client); False
    when the request-head deadline passed first (an idle socket, closed as such)."""
    if socket is None or bytes_waiting(socket.fileno()):
        return True
    with trio.move_on_at(deadline):
        await trio.lowlevel.wait_readable(socket)
        return True
    return False


async def _linger(stream: trio.abc.Stream) -> None:
    """Half-close, then read briefly what the client still sends: closing over unread bytes
    would reset the connection and could lose the answer just sent."""
    if not isinstance(stream, trio.abc.HalfCloseableStream):
        return
    await stream.send_eof()
    received = 0
    with trio.move_on_after(REFUSAL_LINGER_SECS):
        while received < REFUSAL_LINGER_BYTES:
            chunk = await stream.receive_some(REFUSAL_LINGER_BYTES)
            if not chunk:
                return
            received += len(chunk)


class Gateway:
    """One gateway daemon over a shared ``AcpApp``.

    Args:
        app: the process-wide config and store.
        host, port: override ``[gateway] host``/``port`` (``port=0``: the OS chooses).
        announce: where operator-facing lines go (listening URL, pairing code); stderr in
            the CLI.
        show_pairing_code: whether ``announce`` may carry the start-up pairing code. The CLI
            shows it only on a terminal: a log file or journal may be readable by others
            (by commands the agent runs, too), and the code pairs whoever reads it first.
        max_pending_connections, max_pending_per_peer: caps on unauthenticated sockets
            (gateway/pending.py); the total defaults to a share of the open-file limit.
        metrics_listen: (host, port) of the metrics listener, overriding ``[gateway]
            metrics_listen`` (gateway/metrics_routes.py).
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
        max_pending_connections: int | None = None,
        max_pending_per_peer: int = DEFAULT_MAX_PENDING_PER_PEER,
        announce: Announce | None = None,
        show_pairing_code: bool = True,
        metrics_listen: tuple[str, int] | None = None,
    ) -> None:
        self.app = app
        if not isinstance(app.metrics, PrometheusMetrics):
            # This process's own registry: two gateways in one process (tests) never share
            # a series. Every layer records through app.metrics (observability/metrics.py).
            live_sessions = app.live_sessions
            app.metrics = PrometheusMetrics(live_sessions=lambda: len(live_sessions))
        self.metrics: PrometheusMetrics = app.metrics
        self.metrics_listen = metrics_listen or app.config.gateway.metrics_listen
        self.metrics_port: int | None = None
        self.show_pairing_code = show_pairing_code
        self.state = GatewayState(
            app,
            host=host,
            port=port,
            max_message_bytes=max_message_bytes,
            max_connections=max_connections,
            handshake_timeout_secs=handshake_timeout_secs,
            max_pending_connections=(
                pending_cap_for_file_limit()
                if max_pending_connections is None
                else max_pending_connections
            ),
            max_pending_per_peer=max_pending_per_peer,
        )
        self.drain_timeout_secs = drain_timeout_secs
        self.handshake_timeout_secs = handshake_timeout_secs
        self.token_use_flush_secs = DEFAULT_TOKEN_USE_FLUSH_SECS
        self._announce = announce or (lambda line: logger.warning("%s", line))
        self._drain_requested = trio.Event()
        self.bound_port: int | None = None
        self._tls: ssl.SSLContext | None = None
        self.trusted_proxies = TrustedProxies(self.settings.trusted_proxies)

        self.http = StreamableHttp(self.state)

        async def acp_endpoint(exchange: Exchange) -> None:
            if wants_streamable_http(exchange.request):
                await self.http.serve(exchange)
            else:
                await serve_websocket(self.state, exchange)

        self.routes: RouteTable = build_routes(self.state, upgrade=acp_endpoint)

    # ------------------------------------------------------------------ lifecycle

    @property
    def settings(self) -> GatewayConfig:
        return self.state.settings

    @property
    def pairing(self) -> PairingGuard:
        return self.state.pairing

    def url(self, path: str, *, websocket: bool = False) -> str:
        return self.state.url(path, websocket=websocket)

    def request_drain(self) -> None:
        """Begin a graceful shutdown (what SIGTERM does)."""
        self._drain_requested.set()

    def _check_bind(self) -> None:
        if not self.state.loopback_only and not self.settings.allow_public_bind:
            raise GatewayError(
                f"refusing to bind {self.state.host}: it is not a loopback address. Anyone who can "
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
            tcp_listeners = await trio.open_tcp_listeners(
                self.state.address.port, host=self.state.host
            )
        except OSError as exc:
            raise GatewayError(
                f"cannot listen on {self.state.address.authority}: {exc.strerror or exc}",
                config_problem=False,
            ) from None
        self.bound_port = int(tcp_listeners[0].socket.getsockname()[1])
        self.state.address = msgspec.structs.replace(self.state.address, port=self.bound_port)
        # TLS starts per connection (_handle_stream): a PROXY protocol header comes first.
        self._tls = ssl_context
        listeners: list[trio.abc.Listener[trio.abc.Stream]] = list(tcp_listeners)
        # Signals are caught from here on: a supervisor may send SIGTERM as soon as it has
        # read the "listening" line, and that must drain, not kill.
        signal_context = (
            trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
            if handle_signals
            else contextlib.nullcontext(None)
        )
        config_dir = self.app.config.config_dir
        try:
            self.state.admin_secret = await trio.to_thread.run_sync(AdminSecret.create, config_dir)
        except OSError as exc:
            logger.warning(
                "cannot write %s in %s (%s); `zeroclaw gateway get-paircode` will not work",
                ADMIN_SECRET_FILE,
                config_dir,
                exc.strerror or exc,
            )
        try:
            with signal_context as signals:
                self._announce_start(await self._startup_code())
                async with trio.open_nursery() as outer:
                    if signals is not None:
                        outer.start_soon(self._watch_signals, signals, outer.cancel_scope)
                    if self.state.shared_tokens is not None:
                        await outer.start(self.state.shared_tokens.watch)
                    outer.start_soon(keep_token_uses, self.state, self.token_use_flush_secs)
                    await outer.start(self.http.run)
                    if self.metrics_listen is not None:
                        await self._start_metrics_listener(outer, *self.metrics_listen)
                    task_status.started(self.bound_port)
                    await self._serve_until_drained(listeners)
                    outer.cancel_scope.cancel()
        finally:
            if self.state.admin_secret is not None:
                self.state.admin_secret.remove()

    async def _start_metrics_listener(self, nursery: trio.Nursery, host: str, port: int) -> None:
        try:
            self.metrics_port = await nursery.start(
                serve_metrics_listener, self.metrics, host, port
            )
        except OSError as exc:
            raise GatewayError(
                f"cannot listen for metrics on {host}:{port}: {exc.strerror or exc}",
                config_problem=False,
            ) from None
        shown = f"[{host}]" if ":" in host else host
        self._announce(f"metrics on http://{shown}:{self.metrics_port}{METRICS_PATH}")

    async def _startup_code(self) -> str | None:
        """The pairing code to print at start: with a shared store (config.toml's tokens
        imported first) the one every replica shows, else a fresh one while unpaired."""
        shared = self.state.shared_tokens
        if shared is None:
            await adopt_local_tokens(self.state)
            return self.pairing.issue_code() if self.state.unpaired else None
        try:
            imported = await shared.import_digests(self.settings.paired_tokens)
            if imported:
                logger.warning(
                    "imported %d paired token(s) from config.toml into %s",
                    imported,
                    shared.location,
                )
            return await shared.startup_code()
        except StoreError as exc:
            raise StoreUnavailable(f"Cannot read the shared paired tokens: {exc}") from exc

    def _announce_start(self, code: str | None) -> None:
        if code is not None and not self.show_pairing_code:
            self._announce(
                "a one-time pairing code is active; it is not written here (a log others may "
                "read): run `zeroclaw gateway get-paircode` on this machine to see it, or start "
                "`zeroclaw-acp-bridge` with this config directory, which pairs by itself"
            )
        elif code is not None:
            self._announce(
                f"pairing code: {code} (one-time; exchange it with POST {self.url(PAIR_PATH)} "
                f"and header {PAIRING_CODE_HEADER}, or run `zeroclaw-acp-bridge --pair-code {code}`)"
            )
        elif not self.settings.require_pairing:
            self._announce("pairing is off ([gateway] require_pairing = false): no token needed")
            if not self.state.loopback_only:
                logger.warning(
                    "listening on %s with pairing off: anyone who can reach this port can "
                    "drive the agent, shell tool included",
                    self.state.host,
                )
        # Last, so a supervisor that waits for this line has seen the pairing code already.
        self._announce(
            f"gateway listening on {self.url('')} "
            f"(ACP WebSocket: {self.url(ACP_PATH, websocket=True)}, "
            f"Streamable HTTP: {self.url(ACP_PATH)})"
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
            accepting = trio.CancelScope()
            connections.start_soon(self._accept_all, listeners, connections, accepting)
            await self._drain_requested.wait()
            self.state.draining = True
            connections_open = self.state.connections
            count = len(connections_open)
            if len(self.http):
                # Every POST of a Streamable HTTP client (a permission answer, a cancel)
                # comes on a new TCP connection: the listeners stay open until those
                # connections end, and anything new is refused "restarting" meanwhile.
                logger.info(
                    "draining %d connection(s); still accepting for %d Streamable HTTP "
                    "connection(s)",
                    count,
                    len(self.http),
                )
            else:
                accepting.cancel()
                logger.info("stopped accepting; draining %d connection(s)", count)
            deadline = trio.current_time() + self.drain_timeout_secs
            async with trio.open_nursery() as waiters:
                for connection in connections_open:
                    waiters.start_soon(self._drain_connection, connection, deadline)
            with trio.move_on_after(DEFAULT_CLOSE_GRACE_SECS):
                await connections_open.wait_all_closed()
            if len(connections_open):
                logger.warning(
                    "%d connection(s) did not close in time; cancelling", len(connections_open)
                )
            accepting.cancel()
            connections.cancel_scope.cancel()
        logger.info("gateway stopped")

    async def _accept_all(
        self,
        listeners: list[trio.abc.Listener[trio.abc.Stream]],
        connections: trio.Nursery,
        scope: trio.CancelScope,
    ) -> None:
        """Accept on every listener until ``scope`` is cancelled, then close them."""
        with scope:
            async with trio.open_nursery() as accepting:
                for listener in listeners:
                    accepting.start_soon(self._accept_loop, listener, connections)

    async def _drain_connection(self, connection: LiveConnection, deadline: float) -> None:
        connection.acp.refuse_new_requests(DRAIN_REFUSAL)
        with trio.move_on_at(deadline):
            await connection.acp.wait_idle()
        if connection.acp.active_requests:
            logger.info(
                "drain deadline: cancelling %d unanswered request(s) from %s",
                connection.acp.active_requests,
                connection.peer,
            )
        connection.shut(CloseReason.SERVICE_RESTART, RESTART_REASON)

    async def _accept_loop(
        self, listener: trio.abc.Listener[trio.abc.Stream], connections: trio.Nursery
    ) -> None:
        pending = self.state.pending
        async with listener:
            while True:
                # At the cap on unauthenticated sockets with none idle, new connections wait
                # in the kernel's listen backlog (gateway/pending.py), not cut.
                await pending.wait_for_room()
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                        raise
                    # Out of file descriptors or memory: pause instead of spinning, and try
                    # again once some connection has ended.
                    logger.error("accept failed: %s; retrying shortly", exc)
                    await trio.sleep(ACCEPT_RETRY_SECS)
                    continue
                connections.start_soon(self._handle_stream, stream)

    # ------------------------------------------------------------------ per connection

    async def _handle_stream(self, stream: trio.abc.Stream) -> None:
        peer = _peer_address(stream)
        socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        # A trusted proxy's address is shared by all its clients (with X-Forwarded-For as
        # well as with PROXY protocol): it never counts as one client (gateway/pending.py).
        proxy = self.trusted_proxies.trusts(peer)
        expects_header = self.settings.proxy_protocol and proxy
        pending_connections = self.state.pending
        pending = pending_connections.enter(
            peer, fd=-1 if socket is None else socket.fileno(), cap_per_peer=not proxy
        )
        outermost = stream
        try:
            with pending.scope:  # cancelled if it is cut while still pending
                deadline = trio.current_time() + self.handshake_timeout_secs
                client = ClientAddress(peer)
                # The client's first byte (after a proxy's PROXY header, which is not the
                # client's) makes the socket "speaking": from then on it is never cut.
                if not expects_header and not await _first_byte(socket, deadline):
                    return
                if self.settings.proxy_protocol:
                    opened = await self._read_proxy_prelude(stream, peer, deadline)
                    if opened is None:
                        return
                    client, stream = opened
                    pending_connections.rekey(pending, client.address)
                if expects_header and not await _first_byte(socket, deadline):
                    return
                pending_connections.spoke(pending)
                if self._tls is not None:
                    stream = outermost = trio.SSLStream(stream, self._tls, server_side=True)
                await self._serve_stream(
                    stream,
                    client,
                    deadline,
                    authenticated=lambda: pending_connections.leave(pending),
                )
        finally:
            pending_connections.leave(pending)
            await trio.aclose_forcefully(outermost)

    async def _read_proxy_prelude(
        self, stream: trio.abc.Stream, peer: str, deadline: float
    ) -> tuple[ClientAddress, trio.abc.Stream] | None:
        """The client a PROXY header names; None when the connection was refused."""
        try:
            with trio.move_on_at(deadline):
                return await read_proxy_prelude(stream, peer, self.trusted_proxies)
            if self.trusted_proxies.trusts(peer):
                logger.warning(
                    "refused a connection from %s: no PROXY protocol header in time", peer
                )
            # else: an idle direct client, closed as it would be without proxy_protocol
        except ProxyHeaderRefused as exc:
            logger.warning("refused a connection from %s: %s", peer, exc)
            if self._tls is None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await send_response(stream, 400, f"Bad request - {exc}\n")
                    await _linger(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        return None

    async def _serve_stream(
        self,
        stream: trio.abc.Stream,
        client: ClientAddress,
        deadline: float,
        *,
        authenticated: Callable[[], None],
    ) -> None:
        try:
            request: HttpRequest | None = None
            with trio.move_on_at(deadline):
                request = await read_request_or_refuse(stream)
            if request is None:
                return
            client = forwarded_client(client, request.headers, self.trusted_proxies)
            peer = client.address
            try:
                if await screen_request(self.state, stream, request, peer):
                    await self.routes.dispatch(
                        stream, request, peer, authenticated=authenticated, proxy=client.proxy
                    )
            except BadRequest as exc:  # a request body that could not be read
                await send_response(stream, exc.status, f"Bad request: {exc}\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away (or the TLS handshake failed)
        except Exception:
            # One broken exchange must never take the daemon (and every other client) down.
            logger.exception("unexpected error while serving %s", client)
