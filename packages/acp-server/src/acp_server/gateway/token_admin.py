"""``GET /admin/tokens`` and ``POST /admin/tokens/create``: the operator's view of the
principals and their tokens (gateway/principals.py).

``zeroclaw gateway tokens`` and ``zeroclaw gateway token create --name NAME`` call them
(admin secret, loopback, no ``Origin``: the admin guard in gateway/handlers.py). A token
created here is shown once, in the answer, and stored only as its digest.
"""

from __future__ import annotations

import logging
from typing import Final

from acp_core.gateway_contract import principal_problem
from acp_server.gateway.auth import hash_token
from acp_server.gateway.http import send_json
from acp_server.gateway.pairing import generate_token
from acp_server.gateway.principals import SHOWN_DIGEST_CHARS, add_local_token, list_tokens
from acp_server.gateway.revoke import NAME_PARAMETER, Persist
from acp_server.gateway.routes import Exchange
from acp_server.gateway.state import GatewayState
from acp_server.storage import PrincipalTaken, StoreError

logger = logging.getLogger(__name__)

PAIRING_OFF: Final = "Pairing is off ([gateway] require_pairing = false): no tokens"


async def show_tokens(state: GatewayState, exchange: Exchange) -> None:
    """Answer ``GET /admin/tokens`` with every token, live ones first."""
    try:
        listed = await list_tokens(state)
    except StoreError as exc:
        await send_json(exchange.stream, 503, {"error": f"the token store does not answer: {exc}"})
        return
    await send_json(
        exchange.stream,
        200,
        {"success": True, "tokens": [token.as_json() for token in listed]},
    )


async def create_token(state: GatewayState, exchange: Exchange, persist: Persist) -> None:
    """Answer ``POST /admin/tokens/create?name=NAME``: a new token for principal NAME."""
    stream = exchange.stream
    if not state.settings.require_pairing:
        await send_json(stream, 409, {"error": PAIRING_OFF})
        return
    name = exchange.request.query.get(NAME_PARAMETER, "").strip()
    problem = principal_problem(name)
    if problem is not None:
        await send_json(stream, 400, {"error": problem})
        return
    token = generate_token()
    digest = hash_token(token)
    try:
        if state.shared_tokens is not None:
            await state.shared_tokens.add(digest, name, "admin")
            persisted, message = True, f"saved in the shared store {state.shared_tokens.location}"
        else:
            async with state.persist_lock:
                await add_local_token(state, digest, name, "admin")
            persisted, message = await persist(state)
    except PrincipalTaken:
        await send_json(
            stream,
            409,
            {"error": f"{name!r} already has a live token; revoke it first or pick another name"},
        )
        return
    except StoreError as exc:
        await send_json(stream, 503, {"error": f"no token created: {exc}"})
        return
    logger.warning("created a token for %s at the operator's request", name)
    await send_json(
        stream,
        200,
        {
            "success": True,
            "principal": name,
            "token": token,
            "prefix": digest[:SHOWN_DIGEST_CHARS],
            "persisted": persisted,
            "message": message,
        },
    )
