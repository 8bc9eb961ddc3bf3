"""The gateway's small HTTP/1.1 front: read one request head with h11, write one response.

Every plain response closes the connection (``Connection: close``): the gateway's HTTP
routes are a handful of tiny one-shot calls, so keep-alive would only add state. A
WebSocket upgrade leaves the h11 connection paused right after the request; the bytes the
client sent past the head (``trailing_data``) are handed to the WebSocket layer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import parse_qs

import h11
import trio

DEFAULT_MAX_REQUEST_HEAD_BYTES: Final = 16 * 1024
DEFAULT_MAX_REQUEST_BODY_BYTES: Final = 64 * 1024
DEFAULT_RECEIVE_CHUNK_BYTES: Final = 16 * 1024

Headers = Sequence[tuple[bytes, bytes]]


class BadRequest(Exception):
    """The request could not be read; ``status`` says how to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: list[tuple[bytes, bytes]]
    connection: h11.Connection = field(repr=False)

    def header(self, name: str) -> str | None:
        """The first value of a header (case-insensitive name), or None."""
        key = name.lower().encode("ascii")
        for header_name, value in self.headers:
            if header_name == key:
                return value.decode("latin-1")
        return None

    @property
    def trailing_data(self) -> bytes:
        """Bytes received after the request (the first WebSocket frames, if any)."""
        return bytes(self.connection.trailing_data[0])


def split_target(target: str) -> tuple[str, dict[str, str]]:
    """Path and the first value of each query parameter (blank values kept)."""
    path, _, query = target.partition("?")
    params = parse_qs(query, keep_blank_values=True) if query else {}
    return path or "/", {key: values[0] for key, values in params.items() if values}


async def next_event(stream: trio.abc.Stream, connection: h11.Connection) -> object:
    """The next h11 event, reading from the stream as needed (never NEED_DATA)."""
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as exc:
            raise BadRequest(exc.error_status_hint, str(exc)) from None
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(DEFAULT_RECEIVE_CHUNK_BYTES)
        # b"" marks EOF: h11 then reports ConnectionClosed, or an error mid-message.
        connection.receive_data(bytes(data))


async def read_request(stream: trio.abc.Stream) -> HttpRequest | None:
    """Read one request head; None when the peer closed before sending one.

    Raises:
        BadRequest: malformed or oversized head.
    """
    connection = h11.Connection(
        h11.SERVER, max_incomplete_event_size=DEFAULT_MAX_REQUEST_HEAD_BYTES
    )
    while True:
        event = await next_event(stream, connection)
        if isinstance(event, h11.ConnectionClosed):
            return None
        if isinstance(event, h11.Request):
            target = event.target.decode("ascii", errors="replace")
            path, query = split_target(target)
            return HttpRequest(
                method=event.method.decode("ascii", errors="replace").upper(),
                path=path,
                query=query,
                headers=[(name.lower(), value) for name, value in event.headers],
                connection=connection,
            )
        raise BadRequest(400, f"unexpected {type(event).__name__} before the request")


async def read_request_or_refuse(stream: trio.abc.Stream) -> HttpRequest | None:
    """``read_request``; a head it refuses is answered here (its status, "Bad request: …")
    and None returned, as for a peer that sent nothing."""
    try:
        return await read_request(stream)
    except BadRequest as exc:
        await send_response(stream, exc.status, f"Bad request: {exc}\n")
        return None


async def read_body(stream: trio.abc.Stream, request: HttpRequest) -> bytes:
    """The request body (bounded), so the response is not answered over unread data.

    Raises:
        BadRequest: 413 beyond DEFAULT_MAX_REQUEST_BODY_BYTES, 400 when malformed.
    """
    connection = request.connection
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await next_event(stream, connection)
        if isinstance(event, h11.Data):
            size += len(event.data)
            if size > DEFAULT_MAX_REQUEST_BODY_BYTES:
                raise BadRequest(
                    413, f"request body larger than {DEFAULT_MAX_REQUEST_BODY_BYTES} bytes"
                )
            chunks.append(bytes(event.data))
            continue
        if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed) or event is h11.PAUSED:
            return b"".join(chunks)
        raise BadRequest(400, f"unexpected {type(event).__name__} in the request body")


def is_websocket_upgrade(request: HttpRequest) -> bool:
    upgrade = (request.header("upgrade") or "").strip().lower()
    connection_tokens = {
        token.strip().lower() for token in (request.header("connection") or "").split(",")
    }
    return upgrade == "websocket" and "upgrade" in connection_tokens


def render_response(
    status: int,
    body: bytes = b"",
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: Sequence[tuple[str, str]] = (),
) -> bytes:
    """A complete ``Connection: close`` response."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Status"
    lines = [f"HTTP/1.1 {status} {reason}"]
    all_headers: list[tuple[str, str]] = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
        ("X-Content-Type-Options", "nosniff"),
        ("Connection", "close"),
        *headers,
    ]
    lines.extend(f"{name}: {value}" for name, value in all_headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def json_body(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


async def send_response(
    stream: trio.abc.Stream,
    status: int,
    body: bytes | str = b"",
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    payload = body.encode("utf-8") if isinstance(body, str) else body
    await stream.send_all(
        render_response(status, payload, content_type=content_type, headers=headers)
    )


async def send_json(
    stream: trio.abc.Stream,
    status: int,
    value: Mapping[str, Any],
    *,
    headers: Sequence[tuple[str, str]] = (),
) -> None:
    await send_response(
        stream, status, json_body(value), content_type="application/json", headers=headers
    )
