"""``GET /acp``: the WebSocket upgrade, authenticated before it happens, then ACP over it.

The checks, in order: a WebSocket upgrade request (else 426), version 13 (else 426), a
``Sec-WebSocket-Key`` (else 400), a paired token when pairing is required (else 401 with the
ZeroClaw's text; 503 while a shared token store does not answer), not draining and under
``max_connections`` (else 503 with ``Retry-After``). Then the 101 (written by the h11
connection that read the request), and one ``AcpConnection`` per WebSocket over the
process-wide ``AcpApp`` (one store), so a session created over one connection can be
loaded over another or over stdio.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

import h11
import trio
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import generate_accept_token

from acp_core.gateway_contract import ACP_PATH, AGENT_QUERY_PARAMETER
from acp_server.gateway.auth import (
    UNAUTHORIZED_BODY,
    offered_subprotocols,
    presented_token,
    select_subprotocol,
)
from acp_server.gateway.http import HttpRequest, is_websocket_upgrade, send_response
from acp_server.gateway.routes import Exchange
from acp_server.gateway.state import RESTART_REASON, GatewayState, LiveConnection
from acp_server.gateway.websocket import WebSocketTransport
from acp_server.observability.logs import new_correlation_id, tag_this_task
from acp_server.observability.metrics import TRANSPORT_WEBSOCKET
from acp_server.protocol.connection import AcpConnection
from acp_server.storage import StoreError

logger = logging.getLogger(__name__)

WEBSOCKET_VERSION: Final = "13"


@dataclass(frozen=True, slots=True)
class Admission:
    """An upgrade that passed every check; ``token_digest`` and ``principal`` (the name the
    token was paired under) are None when pairing is off."""

    token_digest: str | None
    principal: str | None = None


async def serve_websocket(state: GatewayState, exchange: Exchange) -> None:
    """Answer ``/acp``: refuse with an HTTP status, or upgrade and serve ACP until it ends."""
    stream, request, peer = exchange.stream, exchange.request, exchange.peer
    if exchange.proxy is not None:
        peer = f"{peer} via {exchange.proxy}"
    admission = await _admit(state, stream, request, peer)
    if admission is None:
        return
    exchange.authenticated()
    agent = request.query.get(AGENT_QUERY_PARAMETER, "").strip() or None
    await _send_switching_protocols(stream, request)
    transport = WebSocketTransport(
        stream,
        trailing_data=request.trailing_data,
        peer=peer,
        max_message_bytes=state.max_message_bytes,
        ping_interval_secs=float(state.settings.websocket_ping_interval_secs),
    )
    acp = AcpConnection(
        state.app,
        transport,
        connection_default_agent=agent,
        remote=True,
        principal=admission.principal,
    )
    connection = LiveConnection(
        transport, acp, admission.token_digest, peer, principal=admission.principal
    )
    state.connections.add(connection)
    if state.draining:  # the drain began while the 101 was being written
        connection.shut(CloseReason.SERVICE_RESTART, RESTART_REASON)
    # This task serves this connection only.
    tag_this_task(correlation=new_correlation_id(), principal=admission.principal)
    state.app.metrics.connection_opened(TRANSPORT_WEBSOCKET)
    logger.info(
        "ACP connection from %s%s%s (%d open)",
        peer,
        f" as {admission.principal}" if admission.principal else "",
        f" with default agent {agent!r}" if agent else "",
        len(state.connections),
    )
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(transport.run_reader)
            nursery.start_soon(transport.run_keepalive)
            try:
                await acp.run()
            except Exception:
                logger.exception("ACP connection from %s failed", peer)
                connection.close_code, connection.close_reason = (
                    CloseReason.INTERNAL_ERROR,
                    "internal error",
                )
            await transport.close(connection.close_code, connection.close_reason)
            nursery.cancel_scope.cancel()
    finally:
        state.connections.discard(connection)
        state.app.metrics.connection_closed(TRANSPORT_WEBSOCKET)
        logger.info("ACP connection from %s closed (code %s)", peer, transport.close_code)


async def _admit(
    state: GatewayState, stream: trio.abc.Stream, request: HttpRequest, peer: str
) -> Admission | None:
    """The upgrade may go ahead, or (None) a refusal has been sent."""
    if request.method != "GET" or not is_websocket_upgrade(request):
        acp_url = state.url(ACP_PATH, websocket=True)
        await send_response(
            stream,
            426,
            f"Upgrade required - {state.prefix}{ACP_PATH} speaks ACP over WebSocket (connect to "
            f"{acp_url}) or ACP's Streamable HTTP (POST JSON-RPC; GET with Accept: "
            "text/event-stream and Acp-Connection-Id)\n",
            headers=[("Upgrade", "websocket"), ("Connection", "Upgrade")],
        )
        return None
    if (request.header("sec-websocket-version") or "").strip() != WEBSOCKET_VERSION:
        await send_response(
            stream,
            426,
            "Unsupported WebSocket version; this gateway speaks version 13\n",
            headers=[("Sec-WebSocket-Version", WEBSOCKET_VERSION)],
        )
        return None
    if not (request.header("sec-websocket-key") or "").strip():
        await send_response(stream, 400, "Bad request - missing Sec-WebSocket-Key\n")
        return None
    admission = await admit_token(state, stream, request, peer)
    if admission is None:
        return None
    if await refused_new_connection(state, stream):
        return None
    return admission


async def refused_new_connection(state: GatewayState, stream: trio.abc.Stream) -> bool:
    """Refuse (503 with ``Retry-After``) a new ACP connection, of either transport, while
    draining or at ``max_connections``; whether it was refused."""
    if state.draining:
        await send_response(
            stream, 503, "Service unavailable - gateway restarting, retry\n",
            headers=[("Retry-After", "1")],
        )  # fmt: skip
        return True
    if len(state.connections) >= state.max_connections:
        await send_response(
            stream,
            503,
            f"Service unavailable - {state.max_connections} connections are open already\n",
            headers=[("Retry-After", "5")],
        )
        return True
    return False


async def admit_token(
    state: GatewayState, stream: trio.abc.Stream, request: HttpRequest, peer: str
) -> Admission | None:
    """The paired token the request carries (any token when pairing is off), or None once
    a refusal has been sent: 401 without a paired token, 503 while a shared token store
    does not answer. Both ACP transports at ``/acp`` (the WebSocket upgrade and every
    Streamable HTTP request) pass here before anything else of theirs is read."""
    if not state.settings.require_pairing:
        return Admission(None)
    presented = presented_token(request.headers, request.query)
    try:
        paired = await paired_principal(state, presented.token) if presented else None
    except StoreError as exc:
        logger.warning("refused %s %s from %s: %s", request.method, request.path, peer, exc)
        await send_response(
            stream, 503, "Service unavailable - the token store does not answer, retry\n",
            headers=[("Retry-After", "1")],
        )  # fmt: skip
        return None
    if paired is None:
        why = "no token" if presented is None else f"unknown token ({presented.source})"
        logger.warning("refused %s %s from %s: %s", request.method, request.path, peer, why)
        await send_response(
            stream, 401, UNAUTHORIZED_BODY + "\n", headers=[("WWW-Authenticate", "Bearer")]
        )
        return None
    digest, principal = paired
    state.token_uses.note(digest)
    return Admission(digest, principal)


async def paired_principal(state: GatewayState, token: str) -> tuple[str, str] | None:
    """(digest, principal) of ``token`` when it is paired: in the shared store when there
    is one (gateway/shared_tokens.py, raising ``StoreError`` when it does not answer), else
    in config.toml's ``[gateway] paired_tokens`` with the names gateway/principals.py gave
    them. Every transport's authentication asks this, so each connection learns its
    principal in the same step that admits it."""
    if state.shared_tokens is not None:
        return await state.shared_tokens.verify(token)
    digest = state.tokens.verify(token)
    if digest is None:
        return None
    principal = state.tokens.principal_of(digest)
    return None if principal is None else (digest, principal)


async def _send_switching_protocols(stream: trio.abc.Stream, request: HttpRequest) -> None:
    """The 101 (RFC 6455 §4.2.2), written by the h11 connection that read the request."""
    key = (request.header("sec-websocket-key") or "").strip()
    headers = [
        (b"Upgrade", b"websocket"),
        (b"Connection", b"Upgrade"),
        (b"Sec-WebSocket-Accept", generate_accept_token(key.encode("latin-1"))),
    ]
    subprotocol = select_subprotocol(offered_subprotocols(request.headers))
    if subprotocol is not None:
        headers.append((b"Sec-WebSocket-Protocol", subprotocol.encode("ascii")))
    switching = h11.InformationalResponse(
        status_code=101, headers=headers, reason=b"Switching Protocols"
    )
    await stream.send_all(request.connection.send(switching) or b"")
