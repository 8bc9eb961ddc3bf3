"""The server's error tree, and the one place an exception becomes a JSON-RPC error.

    Exception
    +-- acp_core.AcpError                     protocol errors (acp_core/errors.py)
    |   +-- RpcError                          sent as it is: its code, its message
    |       +-- InvalidParamsError (-32602), MethodNotFoundError (-32601),
    |           InternalError (-32603), SessionNotFoundError (-32000),
    |           SessionLimitError (-32001), SessionBusyError (-32002)
    +-- ZeroclawError                         raised on purpose by acp_server
        +-- ClientFacingError                 its text was written for the client: -32603
        |   +-- AgentUnavailable              "Failed to create agent: ..." (config, keys)
        |   +-- TurnFailed                    the model could not finish the turn
        |   |                                 (agent/runtime/turn.py)
        |   +-- BudgetExceeded                a [cost] or per-agent spending cap is
        |   |                                 reached (agent/limits/spend.py)
        |   +-- SessionTakenOver              the session is live elsewhere now:
        |                                     -32000 (ACP codes: -32002)
        +-- OperationFailed                   a step failed for a reason only the log
        |                                     should tell: -32603 "<step>: see the server
        |                                     log (ref <id>)"
        |   these never reach a client as such: the layer that calls them turns them
        |   into one of the above, a tool result, or an exit status
        +-- ConfigError                       config.toml unusable: exit 2 (config/values.py)
        +-- ProviderError                     a model call failed (agent/providers/base.py)
        +-- ToolError                         a tool refused its arguments: a tool result
        +-- PolicyViolation                   the security policy refused: a tool result
        +-- StoreError                        a store operation failed
        |   +-- SessionFenced                 a turn commit of a copy that no longer
        |                                     holds the session (here)
        |   +-- StoreUnavailable, UnknownSession, DuplicateSession, TurnUnsaved
        |                                     (storage/records.py)
        +-- UploadError                       uploads/ unusable (agent/io/uploads.py)
        +-- GatewayError, ConfigRewriteError  the gateway cannot start or persist a
        |                                     token (gateway/)
        +-- AgentError                        the CLI's agent client (cli/agent_client.py)

Everything else that escapes a handler (a bug, an ``OSError``, a store's ``sqlite3``
error) is foreign: the client gets "Internal error: see the server log (ref <id>)" and
never the exception's text, which may hold paths, SQL or a key. The same ``ref`` is on
the log line that carries the traceback, so a user's report leads to it.

``rpc_error_for`` is that mapping. ``acp_server.protocol`` calls it for every request
that fails; nothing else in the server builds a JSON-RPC error (the error objects
themselves are made by acp_core's ``RpcError.to_response``).
"""

from __future__ import annotations

import logging
import secrets
from typing import Final

from acp_core.errors import ErrorCode, InternalError, RpcError, SessionNotFoundError

logger = logging.getLogger(__name__)

INTERNAL_ERROR_STEP: Final = "Internal error"
REF_BYTES: Final = 4
"""A correlation id of 8 hex digits: unique enough to find one line in a day's log."""


class ZeroclawError(Exception):
    """Root of the errors acp_server raises on purpose."""


class ClientFacingError(ZeroclawError):
    """``str()`` is a message written for the client (no secrets, something to act on)."""


class AgentUnavailable(ClientFacingError):
    """A session's agent cannot be built (provider not configured, a key missing)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Failed to create agent: {reason}")


class BudgetExceeded(ClientFacingError):
    """A spending cap is reached: the turn fails before its next model call (-32603). The
    message names the cap and when it resets."""


class SessionTakenOver(ClientFacingError):
    """A ``session/load`` or ``session/resume`` on another connection (of this process or
    another one on the same store) took the session: this copy was detached, with close
    semantics, and answers every request for it with this error until the client loads it
    again (docs/persistence.md, "One live copy per session").

    Args:
        turn_unsaved: the request was a prompt whose turn ran but was refused by the store,
            since the session had been opened elsewhere meanwhile.
    """

    def __init__(self, session_id: str, *, turn_unsaved: bool = False) -> None:
        self.session_id = session_id
        self.turn_unsaved = turn_unsaved
        where = (
            "a session/load or session/resume of it on another connection, in this process"
            " or another one on the same session store"
        )
        if turn_unsaved:
            message = (
                f"The turn was not saved: session {session_id} is now open elsewhere"
                f" ({where}); load it again to continue here"
            )
        else:
            message = (
                f"Session {session_id} was taken over by another connection ({where});"
                " load it again to continue here"
            )
        super().__init__(message)


class StoreError(ZeroclawError):
    """A store operation failed (SQLite error, I/O error)."""


class SessionFenced(StoreError):
    """A turn commit carried a fencing epoch the session row no longer has: another copy
    claimed the session since (``SessionStore.claim_session``), and nothing was written."""

    def __init__(self, session_id: str, *, epoch: int, current: int) -> None:
        super().__init__(
            f"Session {session_id} is held by epoch {current}; a commit of epoch {epoch}"
            " was refused"
        )
        self.session_id = session_id
        self.epoch = epoch
        self.current = current


class OperationFailed(ZeroclawError):
    """``step`` failed; the cause (``__cause__``) is logged, never sent.

    Args:
        step: what failed, as the client should read it ("Failed to load session").
    """

    def __init__(self, step: str) -> None:
        super().__init__(step)
        self.step = step


def new_ref() -> str:
    return secrets.token_hex(REF_BYTES)


def rpc_error_for(exc: BaseException, *, method: str, acp_codes: bool = False) -> RpcError:
    """The JSON-RPC error a client sees for ``exc``, which failed a ``method`` call.

    ``acp_codes`` (``[acp] error_codes = "acp"``): an unknown session is ACP's -32002, not
    the ZeroClaw ACP documentation's -32000.

    Logs what the client does not see: the cause and its traceback, under the same
    ``ref`` the error message gives.
    """
    if isinstance(exc, SessionNotFoundError) and acp_codes:
        return exc.with_acp_code()
    if isinstance(exc, SessionTakenOver):
        # Not live here any more, as after a close: the session-not-found code, with a
        # message that says why and what to do.
        logger.info("%s failed: %s", method, exc)
        code = ErrorCode.RESOURCE_NOT_FOUND if acp_codes else ErrorCode.SESSION_NOT_FOUND
        return RpcError(str(exc), code=code)
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, ClientFacingError):
        logger.info("%s failed: %s", method, exc)
        return InternalError(str(exc))
    ref = new_ref()
    if isinstance(exc, OperationFailed):
        step = exc.step
        cause: BaseException = exc.__cause__ if exc.__cause__ is not None else exc
    else:
        step = INTERNAL_ERROR_STEP
        cause = exc
    logger.error(
        "%s: %s [ref %s]: %s",
        method,
        step,
        ref,
        cause,
        exc_info=(type(cause), cause, cause.__traceback__),
    )
    return InternalError(f"{step}: see the server log (ref {ref})")
