"""JSON-RPC 2.0 envelopes: parse one message, serialise one message.

No I/O here. ``parse_message`` classifies by keys (``method`` → request or notification,
``result``/``error`` → response), as ZeroClaw's implementation and the official SDKs do, and
raises ``RemoteProtocolError`` whose ``reply_hint`` is the error response to send:

* not JSON, or not UTF-8 → -32700 with ``id: null``;
* JSON of the wrong shape (an array/batch, a scalar, a bad ``id``, no ``method``) → -32600;
* ``jsonrpc`` other than ``"2.0"`` → -32600 ``Invalid JSON-RPC version``.

Ids keep their JSON type: an integer id is answered with the same integer, a string with
the same string, a float with the same float.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET

from acp_core.errors import ErrorCode, InvalidParamsError, RemoteProtocolError

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
RequestId: TypeAlias = int | float | str | None
"""A request id: any JSON number, a string, or null (answered with null)."""
Payload: TypeAlias = "JsonValue | msgspec.Struct"
"""Outbound params or result: builtins, or an acp-core Struct encoded directly (no copy)."""

JSONRPC_VERSION: Final = "2.0"
T = TypeVar("T")


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


def error_object(code: int, message: str, data: JsonValue = None) -> ErrorObject:
    """An error object to send, its ``data`` carrying ``details``: the human-readable
    text (the message, unless ``data`` has its own). ACP clients such as Toad show only
    ``data.details``; JSON-RPC 2.0 leaves ``data`` to the server. ``data`` that is not an
    object is kept as it is."""
    if data is None:
        data = {"details": message}
    elif isinstance(data, dict) and "details" not in data:
        data = {**data, "details": message}
    return ErrorObject(code=code, message=message, data=data)


def _error_reply(request_id: RequestId, code: ErrorCode, message: str) -> ErrorResponse:
    return ErrorResponse(id=request_id, error=error_object(int(code), message))


def _valid_id(value: Any) -> bool:
    # bool is an int subclass in Python, but `true` is not a valid JSON-RPC id. Integers of
    # any size are fine: msgspec reads and writes them exactly, so the reply echoes the id.
    if isinstance(value, bool):
        return False
    return value is None or isinstance(value, int | float | str)


FrameKind: TypeAlias = Literal["request", "notification", "response", "error"]
_ABSENT: Final = msgspec.Raw(b"")


class _Envelope(msgspec.Struct):
    """The top level of a message, with params/result left as raw JSON bytes."""

    jsonrpc: Any = None
    id: Any = UNSET
    method: Any = None
    params: msgspec.Raw = _ABSENT
    result: msgspec.Raw = _ABSENT
    error: Any = UNSET


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)
_typed_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
"""One cached decoder per payload type (a handful of schema types)."""


def decode_typed(type_: type[T], data: bytes | str | msgspec.Raw) -> T:
    """Strictly decode JSON straight into ``type_`` (msgspec's C decoder, cached per type).

    Raises:
        msgspec.DecodeError: malformed JSON, or ``msgspec.ValidationError`` (a subclass)
            when the shape is wrong.
    """
    decoder = _typed_decoders.get(type_)
    if decoder is None:
        decoder = _typed_decoders[type_] = msgspec.json.Decoder(type_)
    result: T = decoder.decode(data)
    return result


class Frame(msgspec.Struct, frozen=True, gc=False):
    """A validated JSON-RPC message whose params (or result) are still raw JSON.

    ``decode_payload`` validates them straight into a typed acp-core Struct in one C
    pass, without building dicts first: the fast path for typed consumers. ``to_message``
    gives the builtins form ``parse_message`` returns.
    """

    kind: FrameKind
    id: RequestId
    method: str
    """The method of a request/notification; ``""`` for responses."""
    payload: msgspec.Raw
    """Raw ``params`` (calls) or ``result`` (responses); empty when absent."""
    error: ErrorObject | None = None

    def decode_payload(self, type_: type[T]) -> T:
        """Validate the params/result into ``type_``; absent counts as ``null``.

        Raises:
            InvalidParamsError: the payload does not have the shape of ``type_`` (the
                message carries msgspec's path, e.g. ``at `$.update.content```).
        """
        what = "result" if self.kind == "response" else "params"
        try:
            return decode_typed(type_, self.payload if self.payload else b"null")
        except msgspec.DecodeError as exc:
            raise InvalidParamsError(f"Invalid {what}: {exc}") from None
        except RecursionError:
            raise InvalidParamsError(f"Invalid {what}: JSON nested too deeply") from None

    def payload_value(self) -> JsonValue:
        """The params/result as builtins (None when absent).

        Raises:
            RemoteProtocolError: the payload holds a value JSON allows but a double cannot
                hold (``1e400``); a request's carries the -32602 reply for its id.
        """
        if not self.payload:
            return None
        try:
            value: JsonValue = _decoder.decode(self.payload)
        except msgspec.DecodeError as exc:
            raise _unreadable_payload(self, exc) from None
        return value

    def to_message(self) -> Message:
        if self.kind == "request":
            return Request(id=self.id, method=self.method, params=self.payload_value())
        if self.kind == "notification":
            return Notification(method=self.method, params=self.payload_value())
        if self.kind == "response":
            return Response(id=self.id, result=self.payload_value())
        assert self.error is not None
        return ErrorResponse(id=self.id, error=self.error)


def _parse_error(detail: str) -> RemoteProtocolError:
    return RemoteProtocolError(
        f"Parse error: {detail}",
        reply_hint=_error_reply(None, ErrorCode.PARSE_ERROR, f"Parse error: {detail}"),
    )


def _not_an_object(obj: Any) -> RemoteProtocolError:
    if isinstance(obj, list):
        hint = "Invalid Request: batches are not supported; send one JSON-RPC object per line"
    else:
        hint = f"Invalid Request: expected a JSON-RPC object, got a JSON {_json_type(obj)}"
    return RemoteProtocolError(hint, reply_hint=_error_reply(None, ErrorCode.INVALID_REQUEST, hint))


def parse_frame(data: bytes | str) -> Frame:
    """Parse and validate one JSON-RPC message, leaving params/result raw.

    Same rules and errors as ``parse_message``.
    """
    try:
        envelope = _envelope_decoder.decode(data)
    except msgspec.ValidationError:
        # Not an object at the top. msgspec stops at the first token, so the rest may
        # still be malformed: decode it all to tell a parse error from a batch or scalar.
        raise _not_an_object(_decode_any(data)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise _parse_error(str(exc)) from None
    except RecursionError:
        # msgspec bounds nesting by the interpreter's recursion limit.
        raise _parse_error("JSON nested too deeply") from None
    fast = _fast_frame(envelope)
    if fast is not None:
        if fast.kind != "response":
            _refuse_huge_numbers(data, fast)
        return fast
    params = envelope.params
    params_kind = _raw_kind(params) if params else None
    kind, request_id, method, error = _classify(
        jsonrpc=envelope.jsonrpc,
        has_id=envelope.id is not UNSET,
        raw_id=None if envelope.id is UNSET else envelope.id,
        method=envelope.method,
        has_result=bool(envelope.result),
        error=envelope.error,
        params_kind=None if params_kind == "null" else params_kind,
    )
    payload = envelope.result if kind == "response" else params
    if kind in ("request", "notification") and params_kind == "null":
        payload = _ABSENT
    frame = Frame(kind=kind, id=request_id, method=method, payload=payload, error=error)
    if kind in ("request", "notification"):
        _refuse_huge_numbers(data, frame)
    return frame


def _refuse_huge_numbers(data: bytes | str, frame: Frame) -> None:
    """A call holding a number beyond the double range anywhere (``-2.5E+310`` in a
    ``_meta`` a typed decoder would skip) is refused, a request with -32602 and its id, as
    such a number in its params is: never read as infinity, never silently dropped.

    The whole message is read once more, untyped: msgspec refuses such a number while
    reading. That costs less than any pattern search for number-like text measured in
    bench/core_codec.py (a 240-byte update: 2.7 µs read vs 15 µs searched; a 1 MiB base64
    image: 0.65 ms vs 6 ms, where digits and ``e`` abound)."""
    try:
        _decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise _unreadable_payload(frame, exc) from None
    except RecursionError:
        # Nesting is bounded where the params are read (decode_inbound), as before.
        return


def _unreadable_payload(frame: Frame, exc: msgspec.DecodeError) -> RemoteProtocolError:
    """A payload JSON allows but no reader can hold (``1e400``): a request's error carries
    the -32602 reply for its id; a notification's or a response's gets none."""
    what = "result" if frame.kind == "response" else "params"
    message = f"Invalid {what}: {exc}"
    hint = (
        _error_reply(frame.id, ErrorCode.INVALID_PARAMS, message)
        if frame.kind == "request"
        else None
    )
    return RemoteProtocolError(message, reply_hint=hint)


_OPEN_BRACE: Final = ord("{")
_OPEN_BRACKET: Final = ord("[")


def _fast_frame(envelope: _Envelope) -> Frame | None:
    """The well-formed common cases, without the general rule engine (hot path: one call
    per line on the wire). Returns None to defer to ``_classify`` for anything unusual."""
    if envelope.jsonrpc != JSONRPC_VERSION:
        return None
    request_id = envelope.id
    if request_id is not UNSET and not (
        type(request_id) is str or (type(request_id) is int and _valid_id(request_id))
    ):
        return None
    method = envelope.method
    if method is None:
        if request_id is UNSET or not envelope.result or envelope.error is not UNSET:
            return None
        return Frame(kind="response", id=request_id, method="", payload=envelope.result)
    if type(method) is not str or not method:
        return None
    params = envelope.params
    if params and memoryview(params)[0] not in (_OPEN_BRACE, _OPEN_BRACKET):
        return None
    if request_id is UNSET:
        return Frame(kind="notification", id=None, method=method, payload=params)
    return Frame(kind="request", id=request_id, method=method, payload=params)


def _decode_any(data: bytes | str) -> Any:
    try:
        return _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise _parse_error(str(exc)) from None
    except RecursionError:
        raise _parse_error("JSON nested too deeply") from None


def parse_message(data: bytes | str) -> Message:
    """Parse one JSON-RPC message.

    Raises:
        RemoteProtocolError: with ``reply_hint`` set to the error response to send, or
            None when the message was a malformed response or notification (never answered).
    """
    return parse_frame(data).to_message()


def message_from_object(obj: Any) -> Message:
    """Classify an already-decoded JSON value as a JSON-RPC message (see ``parse_message``)."""
    if not isinstance(obj, dict):
        raise _not_an_object(obj)
    params = obj.get("params")
    kind, request_id, method, error = _classify(
        jsonrpc=obj.get("jsonrpc"),
        has_id="id" in obj,
        raw_id=obj.get("id"),
        method=obj.get("method"),
        has_result="result" in obj,
        error=obj.get("error", UNSET),
        params_kind=None if params is None else _json_type(params),
    )
    if kind == "request":
        return Request(id=request_id, method=method, params=params)
    if kind == "notification":
        return Notification(method=method, params=params)
    if kind == "response":
        return Response(id=request_id, result=obj["result"])
    assert error is not None
    return ErrorResponse(id=request_id, error=error)


_KIND_BY_FIRST_BYTE: Final = {
    ord("{"): "object",
    ord("["): "array",
    ord("n"): "null",
    ord('"'): "string",
    ord("t"): "boolean",
    ord("f"): "boolean",
}


def _raw_kind(raw: msgspec.Raw) -> str:
    """The JSON type of a raw value from its first byte (msgspec strips leading space)."""
    return _KIND_BY_FIRST_BYTE.get(memoryview(raw)[0], "number")


def _classify(
    *,
    jsonrpc: Any,
    has_id: bool,
    raw_id: Any,
    method: Any,
    has_result: bool,
    error: Any,
    params_kind: str | None,
) -> tuple[FrameKind, RequestId, str, ErrorObject | None]:
    """The JSON-RPC rules, shared by the bytes and the builtins paths.

    Classifies by keys as ZeroClaw's implementation and the official SDKs do: ``method`` → a call,
    ``result`` / ``error`` → a response. ``params_kind`` is the JSON type of ``params``
    (None when absent or null).
    """
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
    has_error = error is not UNSET
    is_call = method is not None or (not has_result and not has_error)

    # A call without a method string cannot be a notification, so it is an invalid Request
    # and is answered, with a null id when it has none (JSON-RPC 2.0, section 5: `{}`).
    answerable = is_call and (has_id or not isinstance(method, str))

    def invalid(message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> RemoteProtocolError:
        # Requests are answered; a broken notification or response gets no reply.
        hint = _error_reply(request_id, code, message) if answerable else None
        return RemoteProtocolError(message, reply_hint=hint)

    if jsonrpc != JSONRPC_VERSION:
        raise invalid('Invalid JSON-RPC version: expected "jsonrpc": "2.0"')

    if not is_call:
        if not has_id:
            raise invalid("Invalid response: missing id")
        if has_error:
            if not isinstance(error, dict) or not _is_int(error.get("code")):
                raise invalid("Invalid response: error must be an object with an integer code")
            message = error.get("message")
            return (
                "error",
                request_id,
                "",
                ErrorObject(
                    code=error["code"],
                    message=message if isinstance(message, str) else "",
                    data=error.get("data"),
                ),
            )
        return "response", request_id, "", None

    if not isinstance(method, str) or not method:
        raise invalid("Invalid Request: method must be a non-empty string")
    if params_kind is not None and params_kind not in ("object", "array"):
        raise invalid(
            "Invalid params: params must be an object or an array", ErrorCode.INVALID_PARAMS
        )
    return ("request" if has_id else "notification"), request_id, method, None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
