"""Which stored sessions a connection may see: the one check every session method consults.

A session belongs to the principal whose connection created it (docs/gateway.md,
"Principals"): a gateway connection carries its token's principal
(``Outbound.principal``, protocol/outbound.py), the local operator (stdio ``zeroclaw acp``, and
``zeroclaw sessions`` on the host) carries None and sees every session, and sessions
stored before sessions had owners are the operator's.

Another principal's session must be indistinguishable from one that does not exist, so
the refusal is the very ``SessionNotFoundError`` a missing id gets (same code, same
message), raised before anything else looks at the session: a load or resume never
detaches the owner's live copy, a delete never closes it. The live sessions a connection
can close, stop or prompt are in its own table (services/session_table.py), which only this
check's restores and its own session/new fill, so those methods need no second check.
"""

from __future__ import annotations

from acp_core.errors import SessionNotFoundError
from acp_server.errors import OperationFailed
from acp_server.storage import AsyncSessionStore


def listed_principal(principal: str | None) -> str | None:
    """The owner ``session/list`` filters on: the caller's own sessions, or every session
    (None) for the operator."""
    return principal


async def require_visible(store: AsyncSessionStore, principal: str | None, session_id: str) -> None:
    """Raise ``SessionNotFoundError`` unless ``principal`` may see the stored session (the
    operator always may: a session that is not stored is then reported where it is read).

    Raises:
        SessionNotFoundError: not stored, or another principal's.
        OperationFailed: the store could not be read.
    """
    if principal is None:
        return
    try:
        owned = await store.session_owned_by(session_id, principal)
    except Exception as exc:
        raise OperationFailed("Failed to read session") from exc
    if not owned:
        raise SessionNotFoundError(session_id)
