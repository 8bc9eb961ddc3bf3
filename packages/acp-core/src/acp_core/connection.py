"""A sans-IO JSON-RPC peer: id allocation, pending outbound requests, typed events.

``RpcConnection`` turns received text into events and our intentions into bytes; the
caller moves the bytes. It keeps the one piece of state JSON-RPC needs: which of our
own requests are still waiting for an answer.

Outbound request ids are strings ``zc-out-0``, ``zc-out-1``, … per connection (the ZeroClaw ACP documentation:
"The server-issued id ("zc-out-N") is always a string prefixed zc-out-, disjoint from
any integer or string ids the client uses"). A response is matched by the text of its id,
so a peer that echoes ``"zc-out-3"`` or one that mangles it to a number with the same
text both match, as in ZeroClaw's implementation. Responses to unknown ids are reported as
``UnmatchedResponse`` and otherwise ignored.
"""

from __future__ import annotations

from typing import Final

import msgspec

from acp_core.errors import ErrorCode, LocalProtocolError, RemoteProtocolError, RpcError
from acp_core.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    Frame,
    Message,
    Notification,
    Payload,
    Request,
    RequestId,
    Response,
    encode_notification,
    encode_request,
    encode_result,
    parse_frame,
    parse_message,
    serialize_message,
)

DEFAULT_OUTBOUND_ID_PREFIX: Final = "zc-out-"


class RequestReceived(msgspec.Struct, frozen=True):
    request: Request


class NotificationReceived(msgspec.Struct, frozen=True):
    notification: Notification


class CallReceived(msgspec.Struct, frozen=True):
    """A request (``frame.kind == "request"``) or notification whose params are still raw
    JSON: a typed consumer decodes them once, straight into the method's params type
    (``schema.decode_inbound``)."""

    frame: Frame


class ResponseReceived(msgspec.Struct, frozen=True):
    """The answer to one of our requests. ``method`` is the method we called."""

    request_id: str
    method: str
    response: Response | ErrorResponse


class UnmatchedResponse(msgspec.Struct, frozen=True):
    """A response whose id matches nothing we sent (late, duplicated or bogus): drop it."""

    response: Response | ErrorResponse


Event = RequestReceived | NotificationReceived | ResponseReceived | UnmatchedResponse
FrameEvent = CallReceived | ResponseReceived | UnmatchedResponse


class RpcConnection:
    """One JSON-RPC peer's protocol state.

    Args:
        outbound_id_prefix: prefix of the ids of requests we send.
    """

    def __init__(self, *, outbound_id_prefix: str = DEFAULT_OUTBOUND_ID_PREFIX) -> None:
        self._prefix = outbound_id_prefix
        self._next_id = 0
        self._pending: dict[str, str] = {}

    @property
    def pending_requests(self) -> dict[str, str]:
        """Our requests still awaiting a response: id → method (a copy)."""
        return dict(self._pending)

    def receive(self, data: bytes | str) -> Event:
        """Parse one message from the peer.

        Raises:
            RemoteProtocolError: malformed; send its ``reply_hint`` if it has one.
        """
        return self.receive_message(parse_message(data))

    def receive_frame(self, data: bytes | str) -> FrameEvent:
        """Parse one message from the peer, leaving a call's params raw (the fast path).

        Raises:
            RemoteProtocolError: malformed; send its ``reply_hint`` if it has one.
        """
        frame = parse_frame(data)
        if frame.kind == "request" or frame.kind == "notification":
            return CallReceived(frame)
        try:
            message = frame.to_message()
        except RemoteProtocolError as exc:
            # The answer to one of our requests came back unreadable (a number no double
            # holds): the request failed; whoever waits for it is told so, not left waiting.
            message = ErrorResponse(
                id=frame.id,
                error=ErrorObject(code=int(ErrorCode.PARSE_ERROR), message=str(exc)),
            )
        assert isinstance(message, Response | ErrorResponse)
        return self._match_response(message)

    def receive_message(self, message: Message) -> Event:
        """Classify an already-parsed message."""
        if isinstance(message, Request):
            return RequestReceived(message)
        if isinstance(message, Notification):
            return NotificationReceived(message)
        return self._match_response(message)

    def _match_response(
        self, message: Response | ErrorResponse
    ) -> ResponseReceived | UnmatchedResponse:
        key = _id_text(message.id)
        method = self._pending.pop(key, None) if key is not None else None
        if method is None:
            return UnmatchedResponse(message)
        return ResponseReceived(request_id=key or "", method=method, response=message)

    def send_request(self, method: str, params: Payload = None) -> tuple[str, bytes]:
        """Allocate an id and serialise a request; the id stays pending until answered.

        ``params`` may be builtins or an acp-core Struct (encoded directly).
        """
        request_id = self.allocate_request_id(method)
        return request_id, encode_request(request_id, method, params)

    def allocate_request_id(self, method: str) -> str:
        """The id of a request the caller serialises itself (a client that sends
        messages as dicts); it stays pending until answered, as ``send_request``'s."""
        request_id = f"{self._prefix}{self._next_id}"
        self._next_id += 1
        self._pending[request_id] = method
        return request_id

    def forget_request(self, request_id: str) -> bool:
        """Stop waiting for a request (timed out or cancelled). True if it was pending."""
        return self._pending.pop(request_id, None) is not None

    def send_notification(self, method: str, params: Payload = None) -> bytes:
        return encode_notification(method, params)

    def send_result(self, request_id: RequestId, result: Payload) -> bytes:
        return encode_result(request_id, result)

    def send_error(self, request_id: RequestId, error: RpcError | ErrorObject) -> bytes:
        if isinstance(error, RpcError):
            return serialize_message(error.to_response(request_id))
        return serialize_message(ErrorResponse(id=request_id, error=error))

    def send_response(self, response: Response | ErrorResponse) -> bytes:
        if not isinstance(response, Response | ErrorResponse):
            raise LocalProtocolError("send_response takes a Response or an ErrorResponse")
        return serialize_message(response)


def _id_text(request_id: RequestId) -> str | None:
    if request_id is None:
        return None
    if isinstance(request_id, float) and request_id.is_integer():
        return str(int(request_id))
    return str(request_id)
