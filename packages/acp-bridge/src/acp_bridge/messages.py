"""What the relay does with each line and each frame, without I/O.

The bridge does not interpret JSON-RPC beyond what it must:

* every stdin line has to be UTF-8, fit the line limit and be a JSON object; anything else is
  answered locally (the gateway never sees it) with a JSON-RPC error carrying the request's id
  whenever it can be read, even from the head of a line too long to keep;
* the ids of requests it relays are remembered, so replies still owed can be waited for at
  stdin EOF and answered with an error when the connection is lost;
* frames go to stdout byte for byte unless they hold a raw newline (legal JSON whitespace,
  fatal on a line-delimited stream), in which case they are re-serialised compactly.

Binary frames are treated exactly like text frames: their payload must be UTF-8 JSON.
`zeroclaw gateway` decodes binary frames the same way, and an IDE can
only receive text, so there is nothing else useful to do with them.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Final, NamedTuple

import msgspec

from acp_core import methods
from acp_core.errors import ErrorCode, RemoteProtocolError
from acp_core.framing import DEFAULT_MAX_LINE_BYTES, LineDecoder
from acp_core.jsonrpc import (
    ErrorResponse,
    JsonValue,
    RequestId,
    error_object,
    message_from_object,
    serialize_message,
)

DEFAULT_MAX_HEAD_BYTES: Final = 4096
"""How much of each line is kept to read its id if the whole line has to be refused."""


class _Envelope(msgspec.Struct):
    """The keys the relay looks at; everything else (params, result bodies) is skipped
    by the decoder without being materialised."""

    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)
_any_decoder: Final = msgspec.json.Decoder()
_encoder: Final = msgspec.json.Encoder()


def _trackable_id(value: Any) -> bool:
    # JSON-RPC ids are strings or numbers; `true` is not one (bool subclasses int).
    return isinstance(value, int | float | str) and not isinstance(value, bool)


class Forward(msgspec.Struct, frozen=True):
    """Send ``text`` to the gateway as one text frame.

    For a request, ``request_id`` and ``method`` are set (the relay tracks the reply); for a
    client response to a gateway request, ``response_to`` is its id.
    """

    text: str
    request_id: RequestId = None
    method: str | None = None
    response_to: RequestId = None


class ReplyToClient(msgspec.Struct, frozen=True):
    """Write ``line`` (already newline-terminated) to stdout."""

    line: bytes


class ReplyToGateway(msgspec.Struct, frozen=True):
    """Send ``text`` to the gateway: an error in place of the client response to request
    ``response_to`` that could not be relayed."""

    text: str
    response_to: RequestId = None


StdinAction = Forward | ReplyToClient | ReplyToGateway


def error_line(request_id: RequestId, code: int, message: str, data: JsonValue = None) -> bytes:
    """One JSON-RPC error response, newline-terminated, for stdout."""
    reply = ErrorResponse(id=request_id, error=error_object(code, message, data))
    return serialize_message(reply) + b"\n"


def agent_message_line(session_id: str, text: str, meta: dict[str, JsonValue]) -> bytes:
    """A ``session/update`` notification (ACP ``agent_message_chunk``) for stdout: ``text``
    shown as part of the agent's reply in ``session_id``, with ``_meta.zeroclaw = meta``
    telling a client that cares that the bridge wrote it, not the agent."""
    notification = {
        "jsonrpc": "2.0",
        "method": methods.SESSION_UPDATE,
        "params": {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
            "_meta": {"zeroclaw": meta},
        },
    }
    return _encoder.encode(notification) + b"\n"


class EnvelopeHead(msgspec.Struct, frozen=True):
    """What could be read from the start of a line whose body was refused."""

    has_id: bool = False
    id: RequestId = None
    is_request: bool = False
    is_response: bool = False


def sniff_envelope(head: str) -> EnvelopeHead:
    """Read the top-level ``id`` and message kind from the first bytes of a JSON object.

    The line may be truncated, invalid or not UTF-8 (the caller decodes with replacement):
    this reads keys in order and stops at the first value it cannot parse, which is normally
    the large ``params`` or ``result`` that made the line too long, after ``id`` and ``method``.
    """
    decoder = json.JSONDecoder()
    has_id = is_request = is_response = False
    found_id: RequestId = None
    length = len(head)

    def skip_ws(index: int) -> int:
        while index < length and head[index] in " \t\r\n":
            index += 1
        return index

    index = skip_ws(0)
    if index >= length or head[index] != "{":
        return EnvelopeHead()
    index += 1
    try:
        while True:
            index = skip_ws(index)
            key, index = decoder.raw_decode(head, index)
            index = skip_ws(index)
            if not isinstance(key, str) or head[index] != ":":
                break
            index = skip_ws(index + 1)
            if key == "method":
                is_request = True
            elif key in ("result", "error"):
                is_response = True
            value, index = decoder.raw_decode(head, index)
            # A number at the very end of the head may have been cut short (12 of 123).
            complete = index < length
            if key == "id" and complete and (_trackable_id(value) or value is None):
                has_id, found_id = True, value
            index = skip_ws(index)
            if head[index] != ",":
                break
            index += 1
    except (ValueError, IndexError):
        pass
    return EnvelopeHead(has_id=has_id, id=found_id, is_request=is_request, is_response=is_response)


class StdinFramer:
    """Turns stdin bytes into relay actions.

    Wraps ``acp_core.framing.LineDecoder`` (limits, UTF-8, CRLF, blank lines) and keeps the
    first ``DEFAULT_MAX_HEAD_BYTES`` of the current line so that a refused line can still be
    answered with its own id: an IDE waiting on a request would otherwise wait forever.
    """

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._decoder = LineDecoder(max_line_bytes=max_line_bytes)
        self._head = bytearray()

    def feed(self, data: bytes) -> list[StdinAction]:
        """Process a chunk of stdin (``b""`` at end of stream) and return what to do."""
        actions: list[StdinAction] = []
        if not data:
            self._decoder.feed(b"")
            self._drain(actions)
            return actions
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                piece = data[start:] if start else data
                if piece:
                    self._remember_head(piece)
                    self._decoder.feed(piece)
                    # Lets the decoder notice an over-long partial line and drop it now.
                    self._drain(actions)
                return actions
            # Feed one line at a time, so that an error the decoder raises is about the line
            # whose head we hold.
            self._remember_head(data[start : min(newline, start + DEFAULT_MAX_HEAD_BYTES)])
            self._decoder.feed(data[start : newline + 1])
            self._drain(actions)
            self._head.clear()
            start = newline + 1

    def _remember_head(self, piece: bytes) -> None:
        room = DEFAULT_MAX_HEAD_BYTES - len(self._head)
        if room > 0:
            self._head += piece[:room]

    def _drain(self, actions: list[StdinAction]) -> None:
        while True:
            try:
                line = self._decoder.next_line()
            except RemoteProtocolError as exc:
                hint = exc.reply_hint
                code = hint.error.code if hint else int(ErrorCode.INVALID_REQUEST)
                head = bytes(self._head).decode("utf-8", errors="replace")
                actions.extend(_refuse(head, code, str(exc)))
                continue
            if line is None:
                return
            actions.extend(classify_line(line))


def _refuse(head: str, code: int, reason: str) -> list[StdinAction]:
    """Answer a line the bridge will not relay: to the client for a request (with its id if
    readable), to the gateway for a client response (so a server call does not hang)."""
    envelope = sniff_envelope(head)
    message = f"zeroclaw-acp-bridge: {reason}"
    if envelope.is_response and not envelope.is_request:
        if not envelope.has_id or envelope.id is None:
            return []  # a response without a usable id: JSON-RPC never answers it
        reply = ErrorResponse(
            id=envelope.id,
            error=error_object(
                int(ErrorCode.INTERNAL_ERROR),
                f"the client's response was dropped by the bridge: {reason}",
            ),
        )
        return [ReplyToGateway(serialize_message(reply).decode(), envelope.id)]
    return [ReplyToClient(error_line(envelope.id if envelope.has_id else None, code, message))]


def classify_line(line: str) -> list[StdinAction]:
    """Decide what to do with one decoded stdin line."""
    try:
        envelope = _envelope_decoder.decode(line)
    except msgspec.ValidationError:
        # Valid JSON but not an object: let acp-core word the error (batch, scalar, ...).
        try:
            message_from_object(_any_decoder.decode(line))
        except RemoteProtocolError as exc:
            return _refuse("", int(ErrorCode.INVALID_REQUEST), str(exc))
        return _refuse("", int(ErrorCode.INVALID_REQUEST), "expected a JSON object")
    except msgspec.DecodeError as exc:
        return _refuse(
            line[:DEFAULT_MAX_HEAD_BYTES], int(ErrorCode.PARSE_ERROR), f"Parse error: {exc}"
        )
    method = envelope.method
    if isinstance(method, str) and _trackable_id(envelope.id):
        return [Forward(line, envelope.id, method)]
    if method is msgspec.UNSET and _trackable_id(envelope.id):
        return [Forward(line, response_to=envelope.id)]
    return [Forward(line)]


class Kind(enum.Enum):
    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    OTHER = "other"


class Peek(NamedTuple):
    """What kind of JSON-RPC message a gateway frame is, read without decoding its body.

    A NamedTuple rather than a frozen dataclass: one is built per relayed frame, and a
    frozen dataclass takes ~1.2 µs to build, three times the JSON peek itself.
    """

    kind: Kind
    id: RequestId = None
    method: str | None = None
    is_error: bool = False


_OTHER: Final = Peek(Kind.OTHER)


def peek(frame: bytes | str) -> Peek:
    """Classify a message by its envelope.

    Requests and responses need a string or number id (a response may have ``null`` only
    with an error), and a response exactly one of ``result`` and ``error``; anything else,
    a frame that is not a JSON object included, is ``Kind.OTHER``.
    """
    try:
        envelope = _envelope_decoder.decode(frame)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return _OTHER
    method = envelope.method
    if isinstance(method, str):
        if envelope.id is msgspec.UNSET:
            return Peek(Kind.NOTIFICATION, method=method)
        if _trackable_id(envelope.id):
            return Peek(Kind.REQUEST, envelope.id, method)
        return _OTHER
    if method is not msgspec.UNSET:
        return _OTHER
    has_result = envelope.result is not msgspec.UNSET
    is_error = envelope.error is not msgspec.UNSET
    if has_result == is_error:
        return _OTHER  # a response has exactly one of result and error (JSON-RPC 2.0 §5)
    if _trackable_id(envelope.id):
        return Peek(Kind.RESPONSE, envelope.id, is_error=is_error)
    if envelope.id is None and is_error:
        # The error for a request whose id could not be read (JSON-RPC 2.0 §5: id null).
        return Peek(Kind.RESPONSE, None, is_error=True)
    return _OTHER


def response_id(frame: bytes) -> tuple[bool, RequestId]:
    """``(True, id)`` when the frame is a JSON-RPC response (no ``method``, an ``id``)."""
    peeked = peek(frame)
    return (True, peeked.id) if peeked.kind is Kind.RESPONSE else (False, None)


class _SessionParams(msgspec.Struct, rename="camel"):
    session_id: Any = msgspec.UNSET


class _SessionRequest(msgspec.Struct):
    params: _SessionParams | msgspec.UnsetType = msgspec.UNSET


_session_decoder: Final = msgspec.json.Decoder(_SessionRequest)


def session_id_of(message: bytes | str) -> str | None:
    """``params.sessionId`` of a request, skipping everything else without building it."""
    try:
        params = _session_decoder.decode(message).params
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if isinstance(params, _SessionParams) and isinstance(params.session_id, str):
        return params.session_id
    return None


def decode_object(message: bytes | str) -> dict[str, Any] | None:
    """The whole message as a dict (for the few messages the relay must read in full)."""
    try:
        value = _any_decoder.decode(message)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def with_id(message: bytes | str, new_id: RequestId) -> bytes:
    """The same message with another ``id``, compactly re-encoded (no trailing newline).

    Raises:
        FrameError: the message is not a JSON object.
    """
    body = decode_object(message)
    if body is None:
        raise FrameError("not a JSON object")
    body["id"] = new_id
    return _encoder.encode(body)


def with_shared_filesystem(message: str) -> str:
    """An ``initialize`` request with ``params._meta.zeroclaw.sharedFilesystem: true`` added
    (the gateway then uses the client's ``fs/*`` methods, ``docs/acp.md``), every other
    field kept; a message whose ``params`` is not an object is returned as it is, for the
    gateway to judge. ``_meta`` and ``_meta.zeroclaw`` are created when absent (or not
    objects)."""
    body = decode_object(message)
    params = body.get("params") if body is not None else None
    if body is None or not isinstance(params, dict):
        return message
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    zeroclaw = meta.get("zeroclaw")
    zeroclaw = dict(zeroclaw) if isinstance(zeroclaw, dict) else {}
    zeroclaw["sharedFilesystem"] = True
    meta["zeroclaw"] = zeroclaw
    body["params"] = {**params, "_meta": meta}
    return _encoder.encode(body).decode()


def encode_message(body: dict[str, Any]) -> bytes:
    return _encoder.encode(body)


class FrameError(Exception):
    """A gateway frame that cannot be put on stdout; the message says why."""


def frame_to_line(frame: bytes) -> bytes:
    """The stdout line (newline-terminated) for one gateway frame.

    Raises:
        FrameError: not UTF-8, or holds a raw newline but is not JSON.
    """
    if not frame.isascii():
        try:
            frame.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError(f"frame is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if b"\n" in frame or b"\r" in frame:
        # Raw newlines can only be whitespace between JSON tokens (inside strings they must
        # be escaped), so a compact re-encoding carries exactly the same message.
        try:
            frame = _encoder.encode(_any_decoder.decode(frame))
        except msgspec.DecodeError as exc:
            raise FrameError(f"frame contains a raw newline and is not JSON ({exc})") from None
    return frame + b"\n"
