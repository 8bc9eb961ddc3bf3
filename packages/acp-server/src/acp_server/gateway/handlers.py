"""The gateway's plain HTTP answers: the Host/Origin screen, health, pairing and admin.

Routes (all under ``[gateway] path_prefix``; the table is ``build_routes``):

* ``GET /health``: 200 with a small JSON status, no auth; 503 while the shared session
  store ([storage] url) does not answer.
* ``GET /pair/code``: the start-up pairing code while unpaired, to the operator only: a
  loopback peer (never through a trusted proxy) carrying the admin secret.
* ``POST /pair`` (``X-Pairing-Code``): a new bearer token, its digest persisted.
* ``GET /admin/paircode``, ``POST /admin/paircode/new``, ``POST /admin/paircode/rotate``:
  used by ``zeroclaw gateway get-paircode``; loopback peers with the admin secret only,
  never from a browser or through a proxy. ``POST /admin/tokens/revoke`` (gateway/revoke.py)
  likewise.
* ``GET /metrics``: the Prometheus metrics, to the operator only, as ``/pair/code``
  (gateway/metrics_routes.py); ``[gateway] metrics_listen`` serves them elsewhere.
* ``/acp``: the WebSocket upgrade (gateway/upgrade.py).

With a PostgreSQL store the tokens and the pairing code are the database's, shared by every
replica (gateway/shared_tokens.py); otherwise they are this process's, the digests saved in
config.toml.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass

import trio

from acp_core.gateway_contract import (
    ACP_PATH,
    ADMIN_PAIRCODE_NEW_PATH,
    ADMIN_PAIRCODE_PATH,
    ADMIN_PAIRCODE_ROTATE_PATH,
    ADMIN_TOKENS_CREATE_PATH,
    ADMIN_TOKENS_PATH,
    HEALTH_PATH,
    PAIR_CODE_PATH,
    PAIR_PATH,
    PAIRING_CODE_HEADER,
    PRINCIPAL_HEADER,
    principal_problem,
)
from acp_server.gateway.admin import ADMIN_HEADER
from acp_server.gateway.auth import hash_token, host_header_allowed, origin_allowed
from acp_server.gateway.http import HttpRequest, send_json, send_response
from acp_server.gateway.metrics_routes import METRICS_PATH, serve_metrics
from acp_server.gateway.pairing import ConfigRewriteError, generate_token, persist_paired_tokens
from acp_server.gateway.principals import add_local_token
from acp_server.gateway.revoke import ADMIN_TOKENS_REVOKE_PATH, revoke_tokens
from acp_server.gateway.routes import Exchange, Handler, RouteTable
from acp_server.gateway.state import GatewayState
from acp_server.gateway.token_admin import create_token, show_tokens
from acp_server.security.pairing import PairAccepted, PairOutcome
from acp_server.storage import PrincipalTaken, StoreError

logger = logging.getLogger(__name__)

ADMIN_ROUTES_PREFIX = "/admin/"
PAIRING_OFF = "Pairing is off ([gateway] require_pairing = false)"


def is_loopback_address(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


async def screen_request(
    state: GatewayState, stream: trio.abc.Stream, request: HttpRequest, peer: str
) -> bool:
    """Refuse (403) a Host a loopback gateway does not answer to, or a foreign Origin."""
    allowed = state.settings.allowed_origins
    if state.loopback_only and not host_header_allowed(request.header("host"), allowed):
        # DNS rebinding: a web page whose name resolves to 127.0.0.1 sends its own Host.
        await send_response(
            stream, 403, "Forbidden - Host header must name this machine (loopback)\n"
        )
        return False
    origin = request.header("origin")
    if origin is not None and not origin_allowed(origin, allowed):
        logger.info("refused %s %s from %s: origin %s", request.method, request.path, peer, origin)
        await send_response(
            stream,
            403,
            f"Forbidden - origin {origin} is not allowed; add it to [gateway] allowed_origins\n",
        )
        return False
    return True


@dataclass(frozen=True, slots=True)
class PairingView:
    """The pairing code and the paired-token count, from this process or the shared store."""

    code: str | None
    discoverable_code: str | None
    paired_tokens: int

    def unpaired(self, state: GatewayState) -> bool:
        return state.settings.require_pairing and not self.paired_tokens


async def pairing_view(state: GatewayState) -> PairingView:
    """Raises ``StoreError`` when the shared store does not answer."""
    shared = state.shared_tokens
    if shared is None:
        pairing = state.pairing
        return PairingView(pairing.code, pairing.discoverable_code, len(state.tokens))
    status = await shared.status()
    code = status.state.code
    return PairingView(code, code if status.state.discoverable else None, status.paired_tokens)


async def _store_unavailable(exchange: Exchange, exc: StoreError) -> None:
    logger.warning("%s %s: %s", exchange.request.method, exchange.route, exc)
    await send_json(
        exchange.stream, 503, {"error": f"the shared token store does not answer: {exc}"}
    )


def build_routes(state: GatewayState, *, upgrade: Handler) -> RouteTable:
    """The gateway's route table; ``upgrade`` serves ``/acp``."""
    routes = RouteTable(prefix=state.prefix, body_timeout_secs=state.handshake_timeout_secs)

    async def admin_guard(exchange: Exchange) -> bool:
        return await _operator_only(state, exchange, ADMIN_REFUSAL)

    async def paircode_new(exchange: Exchange) -> None:
        await _new_paircode(state, exchange, rotate=False)

    async def paircode_rotate(exchange: Exchange) -> None:
        await _new_paircode(state, exchange, rotate=True)

    routes.add(ACP_PATH, upgrade, None)
    routes.add(HEALTH_PATH, lambda exchange: _health(state, exchange), {"GET", "HEAD"})
    routes.add(PAIR_CODE_PATH, lambda exchange: _pair_code(state, exchange), {"GET"})
    routes.add(PAIR_PATH, lambda exchange: _pair(state, exchange), {"POST"})
    routes.guard(METRICS_PATH, lambda exchange: _operator_only(state, exchange, METRICS_REFUSAL))
    routes.add(METRICS_PATH, lambda exchange: serve_metrics(state.app.metrics, exchange), {"GET"})
    routes.guard(ADMIN_ROUTES_PREFIX, admin_guard)
    routes.add(ADMIN_PAIRCODE_PATH, lambda exchange: _admin_paircode(state, exchange), {"GET"})
    routes.add(ADMIN_PAIRCODE_NEW_PATH, paircode_new, {"POST"})
    routes.add(ADMIN_PAIRCODE_ROTATE_PATH, paircode_rotate, {"POST"})
    routes.add(
        ADMIN_TOKENS_REVOKE_PATH,
        lambda exchange: revoke_tokens(state, exchange, persist_tokens),
        {"POST"},
    )
    routes.add(ADMIN_TOKENS_PATH, lambda exchange: show_tokens(state, exchange), {"GET"})
    routes.add(
        ADMIN_TOKENS_CREATE_PATH,
        lambda exchange: create_token(state, exchange, persist_tokens),
        {"POST"},
    )
    return routes


async def _health(state: GatewayState, exchange: Exchange) -> None:
    # A shared store that stops answering makes the replica not ready (503), so a load
    # balancer's health check sends new connections elsewhere until it is back. So does a
    # drain: the gateway still listens while Streamable HTTP connections finish (their
    # POSTs need new TCP connections), and new clients belong elsewhere.
    store = state.app.store
    store_ready = store is None or await store.ready()
    status = "draining" if state.draining else "ok" if store_ready else "store_unavailable"
    try:
        paired = bool((await pairing_view(state)).paired_tokens) if store_ready else False
    except StoreError:
        paired = False
    await send_json(
        exchange.stream,
        200 if store_ready and not state.draining else 503,
        {
            "status": status,
            "connections": len(state.connections),
            "pairing_required": state.settings.require_pairing,
            "paired": paired,
            "uptime_secs": int(time.monotonic() - state.started_at),
        },
    )


async def _pair_code(state: GatewayState, exchange: Exchange) -> None:
    body: dict[str, object] = {
        "success": True,
        "pairing_required": state.settings.require_pairing,
        "pairing_code": None,
    }
    # Whoever uses the code first is paired, and being on loopback proves nothing (another
    # local user, or a command the agent's shell runs, is a loopback peer too), so the
    # code goes only to the operator: a local request carrying the admin secret from the
    # config directory (gateway/admin.py), which is what `zeroclaw gateway get-paircode`
    # and a bridge sharing this gateway's config directory send. Only the code issued at
    # start-up is shown here: one the operator issued with `get-paircode --new`/`--rotate`
    # is meant for another client.
    try:
        view = await pairing_view(state)
    except StoreError as exc:
        await _store_unavailable(exchange, exc)
        return
    # Behind a load balancer every client may look local: a request that came through a
    # trusted proxy (gateway/client_address.py) never gets the code.
    code, unpaired = view.discoverable_code, view.unpaired(state)
    on_this_host = is_loopback_address(exchange.peer) and not exchange.proxied
    operator = on_this_host and _carries_admin_secret(state, exchange)
    if unpaired and operator and code is not None:
        body["pairing_code"] = code
    elif unpaired and operator:
        body["message"] = (
            "no pairing code is shown here: the operator issued it with "
            "`zeroclaw gateway get-paircode`, which prints it"
        )
    elif unpaired:
        if on_this_host:
            logger.warning(
                "refused the pairing code to %s: no admin secret (%s)", exchange.peer, ADMIN_HEADER
            )
        body["message"] = (
            "the pairing code is only given to the gateway's operator; run "
            "`zeroclaw gateway get-paircode` on the gateway host (a bridge there that uses "
            "the gateway's config directory pairs by itself)"
        )
    await send_json(exchange.stream, 200, body)


def _carries_admin_secret(state: GatewayState, exchange: Exchange) -> bool:
    secret = state.admin_secret
    return secret is not None and secret.matches(exchange.request.header(ADMIN_HEADER))


async def _pair(state: GatewayState, exchange: Exchange) -> None:
    stream, peer = exchange.stream, exchange.peer
    if not state.settings.require_pairing:
        await send_json(stream, 400, {"error": PAIRING_OFF})
        return
    token = generate_token()
    digest = hash_token(token)
    principal = _requested_principal(exchange, digest)
    if principal is None:
        problem = principal_problem(exchange.request.header(PRINCIPAL_HEADER) or "")
        await send_json(stream, 400, {"error": f"{PRINCIPAL_HEADER}: {problem}"})
        return
    presented = exchange.request.header(PAIRING_CODE_HEADER)
    shared = state.shared_tokens
    outcome: PairOutcome
    try:
        if shared is not None:  # the code, its limits and the new token: one transaction
            outcome = await shared.attempt(presented, state.pairing.limits, digest, principal)
        else:
            before = state.pairing.snapshot()
            outcome = state.pairing.attempt(presented)
            if isinstance(outcome, PairAccepted):
                try:
                    await add_local_token(state, digest, principal, "pair")
                except (PrincipalTaken, StoreError):
                    state.pairing.restore(before)  # the code stays usable
                    raise
    except PrincipalTaken as exc:
        await send_json(stream, 409, {"error": _name_in_use(exc, principal)})
        return
    except StoreError as exc:
        await _store_unavailable(exchange, exc)
        return
    if not isinstance(outcome, PairAccepted):
        logger.warning("pairing attempt from %s refused: %s", peer, outcome.error)
        state.app.metrics.pairing_failed(outcome.status)
        body: dict[str, object] = {"error": outcome.error}
        headers: list[tuple[str, str]] = []
        if outcome.retry_after is not None:
            body["retry_after"] = outcome.retry_after
            headers.append(("Retry-After", str(outcome.retry_after)))
        await send_json(stream, outcome.status, body, headers=headers)
        return
    if shared is not None:
        persisted, message = True, f"token digest saved in the shared store {shared.location}"
    else:
        persisted, message = await persist_tokens(state)
    logger.warning("paired a new client from %s as %s (%s)", peer, principal, message)
    await send_json(
        stream,
        200,
        {
            "paired": True,
            "persisted": persisted,
            "token": token,
            "principal": principal,
            "message": message,
        },
    )


def _requested_principal(exchange: Exchange, digest: str) -> str | None:
    """The name ``POST /pair`` asks for (``X-ZeroClaw-Principal``), else one made from the
    new token's digest; None when the name given is not a valid one."""
    requested = (exchange.request.header(PRINCIPAL_HEADER) or "").strip()
    if not requested:
        return f"client-{digest[:8]}"
    return None if principal_problem(requested) else requested


def _name_in_use(exc: PrincipalTaken, principal: str) -> str:
    logger.warning("refused to pair a second token as %s: %s", principal, exc)
    return (
        f"the name {principal!r} already has a live token: pair under another name "
        "(zeroclaw-acp-bridge --name ...), or ask the operator to revoke it "
        f"(zeroclaw gateway revoke-token --name {principal})"
    )


async def persist_tokens(state: GatewayState) -> tuple[bool, str]:
    """Save the token digests in config.toml; returns (saved, what to tell the client)."""
    config = state.app.config
    if config.config_file is None:
        return False, (
            f"paired for this run only: there is no config.toml in {config.config_dir} "
            "(run `zeroclaw init` to create one)"
        )
    async with state.persist_lock:
        digests = state.tokens.digests
        try:
            await trio.to_thread.run_sync(persist_paired_tokens, config.config_file, digests)
        except ConfigRewriteError as exc:
            logger.error("could not save paired tokens: %s", exc)
            return False, f"paired for this run only: {exc}"
    return True, f"token digest saved in {config.config_file}"


async def _revoke_stored(state: GatewayState, digests: tuple[str, ...]) -> None:
    """Mark ``digests`` revoked in the store that keeps their names (config.toml, rewritten
    next, is what decides: a failure here is only logged)."""
    store = state.app.store
    if store is None or not digests:
        return
    try:
        await store.revoke_tokens(digests)
    except StoreError as exc:
        logger.warning("could not mark the revoked tokens in the store: %s", exc)


def _from_operator(state: GatewayState, exchange: Exchange) -> bool:
    # Only the operator's own machine, never a browser (a page could otherwise revoke
    # every token with a form POST; the CLI sends no Origin header), and only someone
    # who can read the config directory (the admin secret; see gateway/admin.py).
    return (
        is_loopback_address(exchange.peer)
        and not exchange.proxied
        and exchange.request.header("origin") is None
        and _carries_admin_secret(state, exchange)
    )


ADMIN_REFUSAL = (
    "Forbidden - the admin endpoint only answers `zeroclaw gateway get-paircode` "
    "run on the gateway host by a user who can read its config directory\n"
)
METRICS_REFUSAL = (
    f"Forbidden - {METRICS_PATH} on this port needs the admin secret ({ADMIN_HEADER}) "
    "from the gateway host; set [gateway] metrics_listen to serve it to a scraper\n"
)


async def _operator_only(state: GatewayState, exchange: Exchange, refusal: str) -> bool:
    """A route guard: the operator goes on; anyone else gets 403 with ``refusal``. The
    metrics say who is busy and what it costs, so they are the operator's too; a
    Prometheus elsewhere scrapes [gateway] metrics_listen (gateway/metrics_routes.py)."""
    if _from_operator(state, exchange):
        return True
    logger.warning("refused %s %s from %s", exchange.request.method, exchange.route, exchange.peer)
    await send_response(exchange.stream, 403, refusal)
    return False


async def _admin_paircode(state: GatewayState, exchange: Exchange) -> None:
    required = state.settings.require_pairing
    try:
        view = await pairing_view(state)
    except StoreError as exc:
        await _store_unavailable(exchange, exc)
        return
    await send_json(
        exchange.stream,
        200,
        {
            "success": True,
            "pairing_required": required,
            "pairing_code": view.code if required else None,
            "paired_tokens": view.paired_tokens,
        },
    )


async def _new_paircode(state: GatewayState, exchange: Exchange, *, rotate: bool) -> None:
    if not state.settings.require_pairing:
        await send_json(exchange.stream, 409, {"error": PAIRING_OFF})
        return
    revoked = 0
    persisted = True
    message = ""
    shared = state.shared_tokens
    # Shown here only: GET /pair/code keeps it from whoever asks without the admin secret.
    if shared is not None:
        try:
            revoked, code = await shared.rotate() if rotate else (0, await shared.issue_code())
        except StoreError as exc:
            await _store_unavailable(exchange, exc)
            return
        message = f"for every replica of the shared store {shared.location}"
    else:
        if rotate:
            await _revoke_stored(state, state.tokens.digests)
            revoked = state.revoke_all_tokens()
            persisted, message = await persist_tokens(state)
        code = state.pairing.issue_code(discoverable=False)
    if rotate:
        logger.warning("revoked %d token(s) at the operator's request", revoked)
        state.app.metrics.tokens_revoked(revoked)
    logger.warning("new pairing code issued at the operator's request")
    await send_json(
        exchange.stream,
        200,
        {
            "success": True,
            "pairing_code": code,
            "revoked_tokens": revoked,
            "persisted": persisted,
            "message": message,
        },
    )
