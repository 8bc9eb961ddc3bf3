"""``POST /admin/tokens/revoke``: revoke one paired token, or all of them, without a new code.

``zeroclaw gateway revoke-token`` calls it (admin secret, loopback, no ``Origin``: the
admin guard in gateway/handlers.py). The query names what to revoke: ``?token=<selector>``
with a whole token (``zc_…``, hashed here) or at least ``MIN_DIGEST_PREFIX`` hex digits of a
digest as ``[gateway] paired_tokens`` lists it, matching exactly one paired token;
``?name=<principal>``, every live token of that principal (gateway/principals.py); or
``?all=1``. The connections that used a revoked token are closed with 1008 "token
revoked": on this gateway at once, and with a shared PostgreSQL store on every replica
(gateway/shared_tokens.py). The answer names the revoked digests by their first
``SHOWN_DIGEST_CHARS`` digits.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

from acp_core.gateway_contract import TOKEN_PREFIX
from acp_server.errors import ZeroclawError
from acp_server.gateway.auth import hash_token
from acp_server.gateway.http import send_json
from acp_server.gateway.routes import Exchange
from acp_server.gateway.state import GatewayState
from acp_server.storage import StoreError

logger = logging.getLogger(__name__)

ADMIN_TOKENS_REVOKE_PATH: Final = "/admin/tokens/revoke"
SELECTOR_PARAMETER: Final = "token"
NAME_PARAMETER: Final = "name"
ALL_PARAMETER: Final = "all"
MIN_DIGEST_PREFIX: Final = 8
SHOWN_DIGEST_CHARS: Final = 12

Persist = Callable[[GatewayState], Awaitable[tuple[bool, str]]]


class RevokeRefused(ZeroclawError):
    """Nothing was revoked; ``status`` is the HTTP answer (400, 404 or 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def digests_of_principal(paired: Mapping[str, str], name: str) -> list[str]:
    """The live digests of principal ``name`` (``paired``: digest -> principal).

    Raises:
        RevokeRefused: no live token belongs to that name.
    """
    matches = [digest for digest, principal in paired.items() if principal == name]
    if not matches:
        raise RevokeRefused(404, f"no live token belongs to {name!r} (zeroclaw gateway tokens)")
    return matches


def digests_to_revoke(paired: Sequence[str], selector: str) -> list[str]:
    """The one digest of ``paired`` that ``selector`` (a token, or a digest prefix) names.

    Raises:
        RevokeRefused: the selector is malformed, matches nothing, or matches several.
    """
    wanted = selector.strip()
    if wanted.startswith(TOKEN_PREFIX):
        digest = hash_token(wanted)
        if digest not in paired:
            raise RevokeRefused(404, "that token is not paired (revoked already?)")
        return [digest]
    prefix = wanted.lower()
    if len(prefix) < MIN_DIGEST_PREFIX or any(c not in string.hexdigits for c in prefix):
        raise RevokeRefused(
            400,
            f"give a token (zc_…) or at least {MIN_DIGEST_PREFIX} hex digits of its digest"
            " as [gateway] paired_tokens lists it",
        )
    matches = [digest for digest in paired if digest.startswith(prefix)]
    if not matches:
        raise RevokeRefused(404, f"no paired token's digest starts with {prefix}")
    if len(matches) > 1:
        raise RevokeRefused(409, f"{len(matches)} paired tokens start with {prefix}; give more")
    return matches


async def revoke_tokens(state: GatewayState, exchange: Exchange, persist: Persist) -> None:
    """Answer ``POST /admin/tokens/revoke`` (see the module docstring)."""
    query = exchange.request.query
    everything = query.get(ALL_PARAMETER, "") == "1"
    selector = query.get(SELECTOR_PARAMETER, "").strip()
    name = query.get(NAME_PARAMETER, "").strip()

    def choose(paired: Mapping[str, str]) -> list[str]:
        if everything:
            return list(paired)
        if name:
            return digests_of_principal(paired, name)
        return digests_to_revoke(list(paired), selector)

    try:
        if not state.settings.require_pairing:
            raise RevokeRefused(409, "Pairing is off ([gateway] require_pairing = false)")
        if not everything and not selector and not name:
            raise RevokeRefused(
                400,
                f"name a token (?{SELECTOR_PARAMETER}=), a principal (?{NAME_PARAMETER}=)"
                f" or ?{ALL_PARAMETER}=1",
            )
        if state.shared_tokens is not None:
            revoked = await state.shared_tokens.revoke(choose)
            persisted, message = True, f"revoked in the shared store {state.shared_tokens.location}"
        else:
            revoked = choose(state.tokens.principals)
            if state.app.store is not None:
                await state.app.store.revoke_tokens(revoked)
            state.tokens.remove(revoked)
            state.connections.shut_revoked(set(revoked).__contains__)
            persisted, message = await persist(state)
    except RevokeRefused as exc:
        await send_json(exchange.stream, exc.status, {"error": str(exc)})
        return
    except StoreError as exc:
        await send_json(exchange.stream, 503, {"error": f"nothing revoked: {exc}"})
        return
    logger.warning("revoked %d token(s) at the operator's request", len(revoked))
    state.app.metrics.tokens_revoked(len(revoked))
    await send_json(
        exchange.stream,
        200,
        {
            "success": True,
            "revoked_tokens": len(revoked),
            "revoked": [digest[:SHOWN_DIGEST_CHARS] for digest in revoked],
            "persisted": persisted,
            "message": message,
        },
    )
