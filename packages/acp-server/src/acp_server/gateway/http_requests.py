"""Reading and checking one Streamable HTTP request at ``/acp``: headers, body, message.

What ACP's Streamable HTTP draft (the ACP RFD "Streamable HTTP & WebSocket Transport") asks
of a request, as the official SDKs send it, apart from serving it (gateway/streamable_http.py):
the header names, which methods need ``Acp-Session-Id``, reading a POST body within its
limits (``read_body``), what the body is (``read_envelope``: one JSON-RPC message, not a
batch), where its answer will go (``response_route``), and ``Refused``, the HTTP error
whose body is a JSON-RPC error response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import h11
import msgspec
import trio

from acp_core import methods
from acp_server.gateway.http import BadRequest, HttpRequest, json_body, next_event, send_response
from acp_server.gateway.http_transport import IdKey, NoId, ResponseRoute, id_key, session_of
from acp_server.gateway.routes import Exchange
from acp_server.protocol.limits import ByteBudget

CONNECTION_ID_HEADER: Final = "Acp-Connection-Id"
SESSION_ID_HEADER: Final = "Acp-Session-Id"
LAST_EVENT_ID_HEADER: Final = "Last-Event-ID"
EVENT_STREAM: Final = "text/event-stream"
STREAMABLE_HTTP_METHODS: Final = frozenset({"GET", "POST", "DELETE"})
PREFLIGHT_ALLOWED_HEADERS: Final = f"Authorization, Content-Type, {CONNECTION_ID_HEADER}, {SESSION_ID_HEADER}, {LAST_EVENT_ID_HEADER}"

SESSION_HEADER_METHODS: Final = frozenset(
    {
        methods.SESSION_PROMPT,
        methods.SESSION_CANCEL,
        methods.SESSION_CLOSE,
        methods.SESSION_SET_CONFIG_OPTION,
    }
)
"""Methods whose POST must carry ``Acp-Session-Id``: the ones both official SDKs send it
with (the TypeScript SDK sends it with every method naming a session)."""
ESTABLISHING_METHODS: Final = frozenset(
    {methods.SESSION_NEW, methods.SESSION_LOAD, methods.SESSION_RESUME}
)

DEFAULT_BODY_IDLE_TIMEOUT_SECS: Final = 10.0
"""A POST body that stops arriving for this long is refused (408)."""
MAX_SESSION_ID_CHARS: Final = 256


class Refused(Exception):
    """A request answered with an HTTP error; the body is a JSON-RPC error response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = -32600,
        request_id: IdKey = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.request_id = request_id
        self.headers = headers

    async def send(self, stream: trio.abc.Stream, request: HttpRequest) -> None:
        error = {"code": self.code, "message": str(self)}
        body = {"jsonrpc": "2.0", "id": self.request_id, "error": error}
        await send_response(
            stream,
            self.status,
            json_body(body),
            content_type="application/json",
            headers=[*self.headers, *cors_headers(request)],
        )


def cors_headers(request: HttpRequest) -> list[tuple[str, str]]:
    """What lets a web page read the answer (Fetch standard, CORS): only a request whose
    ``Origin`` the gateway's screen let through (an allowed origin) gets here, so that
    origin is named; ``Acp-Connection-Id`` is exposed, the page needs it."""
    origin = request.header("origin")
    if origin is None:
        return []
    return [
        ("Access-Control-Allow-Origin", origin),
        ("Access-Control-Expose-Headers", CONNECTION_ID_HEADER),
        ("Vary", "Origin"),
    ]


def preflight_headers(request: HttpRequest) -> list[tuple[str, str]]:
    """The answer to a browser's CORS preflight (``OPTIONS``): the methods and request
    headers Streamable HTTP uses. A preflight carries no credentials; it grants nothing
    (the request that follows is checked as any other)."""
    return [
        *cors_headers(request),
        ("Access-Control-Allow-Methods", "GET, POST, DELETE"),
        ("Access-Control-Allow-Headers", PREFLIGHT_ALLOWED_HEADERS),
        ("Access-Control-Max-Age", "600"),
    ]


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a POST body is, as far as the transport needs to know."""

    text: str
    method: str | None
    key: IdKey | NoId
    """The request id (``NO_ID`` for a notification)."""
    session_id: str | None
    """``params.sessionId``, when the params name a session."""


class _Inbound(msgspec.Struct):
    method: str | None = None
    id: msgspec.Raw = msgspec.Raw(b"")
    params: msgspec.Raw = msgspec.Raw(b"")


_decode_inbound = msgspec.json.Decoder(_Inbound).decode


def read_envelope(body: bytes) -> Envelope:
    """The message in a POST body.

    Raises:
        Refused: not UTF-8 or not JSON (400, -32700), a batch (501: the draft has none),
            or not a JSON object (400, -32600).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(
            400, f"Parse error: the body is not UTF-8 ({exc.reason})", code=-32700
        ) from None
    try:
        inbound = _decode_inbound(body)
    except msgspec.ValidationError:
        if text.lstrip().startswith("["):
            raise Refused(501, "Batch requests are not supported: POST one message") from None
        raise Refused(400, "Invalid Request: the body is not a JSON-RPC message") from None
    except msgspec.DecodeError as exc:
        raise Refused(400, f"Parse error: {exc}", code=-32700) from None
    session_id = session_of(inbound.params) if inbound.method is not None else None
    return Envelope(text, inbound.method, id_key(inbound.id), session_id)


def checked_session_id(value: str) -> str:
    session_id = value.strip()
    if not session_id or len(session_id) > MAX_SESSION_ID_CHARS or not session_id.isprintable():
        raise Refused(400, f"{SESSION_ID_HEADER} is not a session id")
    return session_id


def response_route(request: HttpRequest, envelope: Envelope) -> ResponseRoute | None:
    """Where the answer to a POSTed request goes; checks ``Acp-Session-Id``."""
    header = request.header(SESSION_ID_HEADER)
    header_session = None if header is None else checked_session_id(header)
    method, key = envelope.method, envelope.key
    request_id = None if isinstance(key, NoId) else key
    if method in SESSION_HEADER_METHODS and header_session is None:
        raise Refused(400, f"{SESSION_ID_HEADER} is required for {method}", request_id=request_id)
    if header_session is not None and envelope.session_id not in (None, header_session):
        raise Refused(
            400, f"{SESSION_ID_HEADER} names another session than params.sessionId",
            request_id=request_id,
        )  # fmt: skip
    if method is None or isinstance(key, NoId):
        return None  # a response or a notification: nothing comes back
    if method in ESTABLISHING_METHODS:
        return ResponseRoute(envelope.session_id, establishes=True)
    session_id = header_session or envelope.session_id
    return None if session_id is None else ResponseRoute(session_id, establishes=False)


async def read_body(exchange: Exchange, limit: int, budget: ByteBudget | None) -> tuple[bytes, int]:
    """The POST body and the bytes of ``budget`` it holds (taken as it arrives).

    Raises:
        Refused: 413 past ``limit``, 408 when it stops arriving, 400 when malformed.
    """
    request, stream = exchange.request, exchange.request.connection
    declared = request.header("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise Refused(413, f"message larger than the {limit}-byte limit")
    if stream.they_are_waiting_for_100_continue:
        # curl, for one, waits a second for this before it sends a larger body.
        continue_ = h11.InformationalResponse(status_code=100, reason=b"Continue", headers=[])
        await exchange.stream.send_all(stream.send(continue_) or b"")
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            event: object = None
            with trio.move_on_after(DEFAULT_BODY_IDLE_TIMEOUT_SECS):
                try:
                    event = await next_event(exchange.stream, stream)
                except BadRequest as exc:
                    raise Refused(exc.status, f"bad request body: {exc}") from None
            if event is None:
                raise Refused(408, "the request body stopped arriving")
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > limit:
                    raise Refused(413, f"message larger than the {limit}-byte limit")
                if budget is not None:
                    await budget.take(len(event.data))
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                return b"".join(chunks), size if budget is not None else 0
            else:
                raise Refused(400, f"unexpected {type(event).__name__} in the request body")
    except BaseException:
        if budget is not None:
            held = sum(len(chunk) for chunk in chunks)
            if held:
                budget.give_back(held)
        raise
