"""The acp-core error tree and the JSON-RPC error codes.

    AcpError                      root of everything acp-core raises
    +-- ProtocolError             the peer or we broke the wire rules
    |   +-- RemoteProtocolError   bad bytes/JSON/envelope from the peer; carries ``reply_hint``
    |   +-- LocalProtocolError    we were asked to emit something the protocol forbids
    +-- RpcError                  a request failed with a JSON-RPC error the peer should see
        +-- InvalidParamsError, MethodNotFoundError, InternalError,
            SessionNotFoundError, SessionLimitError, SessionBusyError

Like h11's ``error_status_hint`` and wsproto's ``event_hint``, a ``RemoteProtocolError``
carries the exact error response to send (``reply_hint``), so the I/O layer never needs
to know JSON-RPC rules: it serialises the hint and keeps serving.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acp_core.jsonrpc import ErrorResponse, RequestId


class ErrorCode(IntEnum):
    """JSON-RPC 2.0 standard codes plus the ZeroClaw ACP documentation's server codes."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # The ZeroClaw ACP documentation: "SESSION_NOT_FOUND (-32000)"; ZeroClaw's implementation adds -32001 and -32002.
    SESSION_NOT_FOUND = -32000
    SESSION_LIMIT_REACHED = -32001
    SESSION_BUSY = -32002
    # ACP's "resource not found" (sessions included); the same number as SESSION_BUSY.
    RESOURCE_NOT_FOUND = -32002


class AcpError(Exception):
    """Root of every exception acp-core raises."""


class ProtocolError(AcpError):
    """The wire rules were broken."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something we cannot accept.

    Args:
        message: what was wrong, for logs.
        reply_hint: the error response to send back, or None when nothing may be sent
            (for example a malformed notification or response: JSON-RPC never answers those).
    """

    def __init__(self, message: str, *, reply_hint: ErrorResponse | None) -> None:
        super().__init__(message)
        self.reply_hint = reply_hint


class LocalProtocolError(ProtocolError):
    """We were asked to emit something the protocol forbids (a bug in the caller)."""


class RpcError(AcpError):
    """A JSON-RPC error object to send in reply to a request.

    The message is what the client sees: make it something a person can act on.
    """

    code: ErrorCode = ErrorCode.INTERNAL_ERROR

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_response(self, request_id: RequestId | None) -> ErrorResponse:
        from acp_core.jsonrpc import ErrorResponse, error_object

        return ErrorResponse(id=request_id, error=error_object(int(self.code), self.message))


class InvalidRequestError(RpcError):
    code = ErrorCode.INVALID_REQUEST


class InvalidParamsError(RpcError):
    code = ErrorCode.INVALID_PARAMS


class MethodNotFoundError(RpcError):
    code = ErrorCode.METHOD_NOT_FOUND

    def __init__(self, method: str) -> None:
        super().__init__(f"Method not found: {method}")
        self.method = method


class InternalError(RpcError):
    code = ErrorCode.INTERNAL_ERROR


class SessionNotFoundError(RpcError):
    code = ErrorCode.SESSION_NOT_FOUND

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id}")
        self.session_id = session_id

    def with_acp_code(self) -> RpcError:
        """The same error with ACP's code for a missing resource (-32002) instead of the
        ZeroClaw ACP documentation's -32000, which ACP clients read as "authentication required"."""
        return RpcError(self.message, code=ErrorCode.RESOURCE_NOT_FOUND)


class SessionLimitError(RpcError):
    code = ErrorCode.SESSION_LIMIT_REACHED

    def __init__(self, limit: int) -> None:
        super().__init__(f"Maximum session limit reached ({limit})")
        self.limit = limit


class SessionBusyError(RpcError):
    code = ErrorCode.SESSION_BUSY

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session already has an active prompt turn: {session_id}")
        self.session_id = session_id
