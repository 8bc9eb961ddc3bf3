"""JSON-RPC 2.0 envelopes: parse one message, serialise one message.

No I/O here. ``parse_message`` classifies by keys (``method`` → request or notification,
``result``/``error`` → response), as the reference server and the official SDKs do, and
raises ``RemoteProtocolError`` whose ``reply_hint`` is the error response to send:

* not JSON, or not UTF-8 → -32700 with ``id: null``;
* JSON of the wrong shape (an array/batch, a scalar, a bad ``id``, no ``method``) → -32600;
* ``jsonrpc`` other than ``"2.0"`` → -32600 ``Invalid JSON-RPC version``.

Ids keep their JSON type: an integer id is answered with the same integer, a string with
the same string, a float with the same float.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import msgspec

from acp_core.errors import ErrorCode, RemoteProtocolError

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
RequestId: TypeAlias = int | float | str | None
"""A request id: any JSON number, a string, or null (answered with null)."""
Payload: TypeAlias = "JsonValue | msgspec.Struct"
"""Outbound params or result: builtins, or an acp-core Struct encoded directly (no copy)."""

JSONRPC_VERSION: Final = "2.0"


class Request(msgspec.Struct, frozen=True, gc=False):
    """A call that expects a response (it carries an ``id``, possibly null)."""

    id: RequestId
    method: str
    params: JsonValue = None


class Notification(msgspec.Struct, frozen=True, gc=False):
    """A call without an ``id``: never answered, not even with an error."""

    method: str
    params: JsonValue = None


class ErrorObject(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    code: int
    message: str
    data: JsonValue = None


class Response(msgspec.Struct, frozen=True, gc=False):
    """A successful reply."""

    id: RequestId
    result: JsonValue


class ErrorResponse(msgspec.Struct, frozen=True, gc=False):
    """A failed reply. ``id`` is null when the request's id could not be read."""

    id: RequestId
    error: ErrorObject


Message: TypeAlias = Request | Notification | Response | ErrorResponse

_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


def _error_reply(request_id: RequestId, code: ErrorCode, message: str) -> ErrorResponse:
    return ErrorResponse(id=request_id, error=ErrorObject(code=int(code), message=message))


_MIN_INT_ID: Final = -(2**63)
_MAX_INT_ID: Final = 2**64 - 1


def _valid_id(value: Any) -> bool:
    # bool is an int subclass in Python, but `true` is not a valid JSON-RPC id.
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        # An integer we could not write back in the reply would make the id useless.
        return _MIN_INT_ID <= value <= _MAX_INT_ID
    return value is None or isinstance(value, float | str)


def parse_message(data: bytes | str) -> Message:
    """Parse one JSON-RPC message.

    Raises:
        RemoteProtocolError: with ``reply_hint`` set to the error response to send, or
            None when the message was a malformed response or notification (never answered).
    """
    try:
        obj = _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        detail = str(exc)
    except RecursionError:
        # msgspec bounds nesting by the interpreter's recursion limit.
        detail = "JSON nested too deeply"
    else:
        return message_from_object(obj)
    raise RemoteProtocolError(
        f"Parse error: {detail}",
        reply_hint=_error_reply(None, ErrorCode.PARSE_ERROR, f"Parse error: {detail}"),
    )


def message_from_object(obj: Any) -> Message:
    """Classify an already-decoded JSON value as a JSON-RPC message (see ``parse_message``)."""
    if not isinstance(obj, dict):
        what = "a batch (JSON array)" if isinstance(obj, list) else f"a JSON {_json_type(obj)}"
        hint = (
            "Invalid Request: batches are not supported; send one JSON-RPC object per line"
            if isinstance(obj, list)
            else f"Invalid Request: expected a JSON-RPC object, got {what}"
        )
        raise RemoteProtocolError(
            hint, reply_hint=_error_reply(None, ErrorCode.INVALID_REQUEST, hint)
        )
    has_id = "id" in obj
    raw_id = obj.get("id")
    if has_id and not _valid_id(raw_id):
        got = (
            "an out-of-range integer"
            if isinstance(raw_id, int) and not isinstance(raw_id, bool)
            else _json_type(raw_id)
        )
        msg = f"Invalid Request: id must be a string, number or null, got {got}"
        raise RemoteProtocolError(
            msg, reply_hint=_error_reply(None, ErrorCode.INVALID_REQUEST, msg)
        )
    request_id: RequestId = raw_id

    method = obj.get("method")
    is_call = method is not None or ("result" not in obj and "error" not in obj)

    def invalid(message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> RemoteProtocolError:
        # Only requests are answered; a broken notification or response gets no reply.
        hint = _error_reply(request_id, code, message) if (has_id and is_call) else None
        return RemoteProtocolError(message, reply_hint=hint)

    if obj.get("jsonrpc") != JSONRPC_VERSION:
        raise invalid('Invalid JSON-RPC version: expected "jsonrpc": "2.0"')

    if not is_call:
        if not has_id:
            raise invalid("Invalid response: missing id")
        if "error" in obj:
            error = obj["error"]
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                raise invalid("Invalid response: error must be an object with an integer code")
            message = error.get("message")
            return ErrorResponse(
                id=request_id,
                error=ErrorObject(
                    code=error["code"],
                    message=message if isinstance(message, str) else "",
                    data=error.get("data"),
                ),
            )
        return Response(id=request_id, result=obj["result"])

    if not isinstance(method, str) or not method:
        raise invalid("Invalid Request: method must be a non-empty string")
    params = obj.get("params")
    if params is not None and not isinstance(params, dict | list):
        raise invalid(
            "Invalid params: params must be an object or an array", ErrorCode.INVALID_PARAMS
        )
    if has_id:
        return Request(id=request_id, method=method, params=params)
    return Notification(method=method, params=params)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def serialize_message(message: Message) -> bytes:
    """Serialise one message as compact JSON (no trailing newline, never a raw newline)."""
    if isinstance(message, Request):
        body: dict[str, Any] = {
            "jsonrpc": JSONRPC_VERSION,
            "id": message.id,
            "method": message.method,
        }
        if message.params is not None:
            body["params"] = message.params
    elif isinstance(message, Notification):
        body = {"jsonrpc": JSONRPC_VERSION, "method": message.method}
        if message.params is not None:
            body["params"] = message.params
    elif isinstance(message, Response):
        body = {"jsonrpc": JSONRPC_VERSION, "id": message.id, "result": message.result}
    else:
        body = {"jsonrpc": JSONRPC_VERSION, "id": message.id, "error": message.error}
    return _encoder.encode(body)


def encode_request(request_id: RequestId, method: str, params: Payload = None) -> bytes:
    """Serialise a request whose params may be a Struct (encoded in C, no to_builtins)."""
    body: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return _encoder.encode(body)


def encode_notification(method: str, params: Payload = None) -> bytes:
    """Serialise a notification whose params may be a Struct."""
    body: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    if params is not None:
        body["params"] = params
    return _encoder.encode(body)


def encode_result(request_id: RequestId, result: Payload) -> bytes:
    """Serialise a success response whose result may be a Struct."""
    return _encoder.encode({"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": result})


def encode_json(value: Any) -> bytes:
    """Compact JSON for any value acp-core can encode (dicts, lists, msgspec Structs)."""
    return _encoder.encode(value)
