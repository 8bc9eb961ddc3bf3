"""ACP ``session/list``: the store's sessions, newest first, one page at a time.

A gateway connection lists its principal's sessions only; the local operator lists every
session of the store (services/visibility.py). Imported by the first ``session/list``, not
at start-up (tests/e2e/test_startup_imports.py).
"""

from __future__ import annotations

from pathlib import Path

from acp_core import schema
from acp_core.errors import InvalidParamsError
from acp_server.errors import OperationFailed
from acp_server.protocol.services import visibility
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.storage import AsyncSessionStore, BadCursor, StoredSessionInfo


async def list_sessions(
    state: ConnectionState, params: schema.ListSessionsParams
) -> schema.ListSessionsResult:
    """ACP ``session/list``: the store's sessions, newest first, one page at a time
    (storage/session_list.py); without a store there is nothing to list."""
    principal = visibility.listed_principal(state.outbound.principal)
    return await list_stored_sessions(state.app.store, params, principal=principal)


async def list_stored_sessions(
    store: AsyncSessionStore | None,
    params: schema.ListSessionsParams,
    *,
    principal: str | None = None,
) -> schema.ListSessionsResult:
    """One page (storage/session_list.py), filtered to ``cwd`` when given and to
    ``principal``'s sessions unless None; without a store there is nothing to list.

    Raises:
        InvalidParamsError: ``cursor`` is not one a previous page handed out.
    """
    if store is None:
        return schema.ListSessionsResult(sessions=[])
    workspace = None if params.cwd is None else listed_workspace(params.cwd)
    try:
        page = await store.list_page(
            workspace_dir=workspace, cursor=params.cursor, principal=principal
        )
    except BadCursor:
        raise InvalidParamsError("Invalid parameter: cursor is not a session/list cursor") from None
    except Exception as exc:
        raise OperationFailed("Failed to list sessions") from exc
    return schema.ListSessionsResult(
        sessions=[session_info(info) for info in page.sessions],
        next_cursor=page.next_cursor,
    )


def listed_workspace(raw: str) -> str:
    """``cwd`` as sessions store theirs (canonical, as ``session/new`` made it); a path that
    cannot be resolved is compared as given."""
    try:
        return str(Path(raw).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):
        return raw


def session_info(info: StoredSessionInfo) -> schema.SessionInfo:
    return schema.SessionInfo(
        session_id=info.session_id,
        cwd=info.workspace_dir,
        title=info.title,
        updated_at=info.last_activity.isoformat(),
    )
