"""acp-core: the ZeroClaw Agent Client Protocol, sans I/O.

Framing (``framing``), JSON-RPC envelopes (``jsonrpc``), peer state (``connection``),
errors (``errors``), typed ACP messages (``schema``), agent alias resolution
(``aliases``), blob materialisation planning (``blobs``) and tool kinds (``tools``).
Nothing here performs I/O, reads a clock or logs.
"""

from __future__ import annotations

from acp_core.connection import (
    Event,
    NotificationReceived,
    RequestReceived,
    ResponseReceived,
    RpcConnection,
    UnmatchedResponse,
)
from acp_core.errors import (
    AcpError,
    ErrorCode,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    LocalProtocolError,
    MethodNotFoundError,
    ProtocolError,
    RemoteProtocolError,
    RpcError,
    SessionBusyError,
    SessionLimitError,
    SessionNotFoundError,
)
from acp_core.framing import DEFAULT_MAX_LINE_BYTES, LineDecoder, encode_line
from acp_core.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    JsonObject,
    JsonValue,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    parse_message,
    serialize_message,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "AcpError",
    "ErrorCode",
    "ErrorObject",
    "ErrorResponse",
    "Event",
    "InternalError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JsonObject",
    "JsonValue",
    "LineDecoder",
    "LocalProtocolError",
    "Message",
    "MethodNotFoundError",
    "Notification",
    "NotificationReceived",
    "ProtocolError",
    "RemoteProtocolError",
    "Request",
    "RequestId",
    "RequestReceived",
    "Response",
    "ResponseReceived",
    "RpcConnection",
    "RpcError",
    "SessionBusyError",
    "SessionLimitError",
    "SessionNotFoundError",
    "UnmatchedResponse",
    "encode_line",
    "parse_message",
    "serialize_message",
]
