"""One WebSocket to the gateway: websockets' sans-I/O client protocol over a trio stream.

The bridge drives websockets' public sans-I/O ``ClientProtocol`` itself (the documented way
to put websockets on another I/O layer) instead of its trio ``ClientConnection``. That
connection hands messages over one at a time through a channel, and each ``recv()`` costs a
trip through the trio scheduler even when the next message is already there; reaching past
it means reading private attributes. Here the reader owns the socket: ``receive()`` reads
once, feeds websockets' parser, and returns every message that read completed, so a burst
of small ``session/update`` frames becomes one batch (and one stdout write) without
touching anything private.

Who does what on a ``GatewayConnection`` (RFC 6455 roles, client side):

* one task reads (``receive``); it also answers pings and the gateway's close frame,
  because the protocol queues those replies when it parses the frames;
* any task may send (``send``, ``ping``); a lock makes each write whole and in order, and
  whatever the protocol has queued (a pong, a close) goes out with it;
* the keepalive task pings every ``ping_interval`` and, with no pong within
  ``ping_timeout``, fails the connection with 1011 and drops the socket, which wakes the
  reader with the close;
* ``aclose`` sends a close frame and waits up to ``close_timeout`` for the gateway's; after
  that the TCP connection is dropped anyway.

Once the connection is closed, ``receive`` and ``send`` raise websockets'
``ConnectionClosed`` (with the close frames sent and received, as websockets' own
connections do), and ``connection_exc`` keeps the transport error, if any, that ended it.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Final

import trio
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, InvalidMessage
from websockets.frames import CloseCode, Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import Event, State
from websockets.uri import parse_uri

logger = logging.getLogger(__name__)

READ_CHUNK_BYTES: Final = 256 * 1024
"""One socket read; every message it completes is returned by one ``receive()``."""
USER_AGENT: Final = "zeroclaw-acp-bridge"
PING_PAYLOAD_BYTES: Final = 4
KEEPALIVE_CLOSE_REASON: Final = "keepalive ping timeout"

_TRANSPORT_ERRORS: Final = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
_TEXT: Final = Opcode.TEXT
_BINARY: Final = Opcode.BINARY
_CONT: Final = Opcode.CONT
_PONG: Final = Opcode.PONG


class GatewayConnection:
    """An open WebSocket; see the module docstring for who calls what."""

    def __init__(
        self, stream: trio.abc.Stream, protocol: ClientProtocol, *, close_timeout: float
    ) -> None:
        self._stream = stream
        self._protocol = protocol
        self._close_timeout = close_timeout
        self._send_lock = trio.Lock()
        self._pending: list[Event] = []
        """Events parsed with the handshake response, delivered by the first ``receive``."""
        self._fragments: list[bytes] | None = None
        """The parts of a fragmented message received so far."""
        self._pings: dict[bytes, trio.Event] = {}
        self.connection_exc: BaseException | None = None
        """The transport error that ended the connection, if one did."""
        self.response: Response | None = None
        """The gateway's answer to the upgrade request."""

    @property
    def closed(self) -> ConnectionClosed | None:
        """How the connection ended (None while it is open or closing)."""
        if self._protocol.state is not State.CLOSED:
            return None
        return self._protocol.close_exc

    # --- opening ---------------------------------------------------------------------

    async def handshake(self, headers: Mapping[str, str]) -> None:
        """Send the upgrade request and read the response.

        Raises:
            InvalidHandshake: the gateway refused the upgrade (``InvalidStatus`` carries
                its HTTP response) or did not answer with one.
        """
        protocol = self._protocol
        request = protocol.connect()
        request.headers.update(headers)
        request.headers["User-Agent"] = USER_AGENT
        protocol.send_request(request)
        await self._write_pending()
        while self.response is None:
            if not await self._read():
                break
            for event in protocol.events_received():
                if self.response is None and isinstance(event, Response):
                    self.response = event
                else:
                    self._pending.append(event)  # frames that came with the response
            await self._write_pending()
        if protocol.handshake_exc is not None:
            raise protocol.handshake_exc
        if self.response is None:  # the stream ended without a response
            raise InvalidMessage("the gateway closed the connection during the handshake")

    # --- receiving -------------------------------------------------------------------

    async def receive(self) -> list[bytes]:
        """The messages (text or binary, as bytes) completed by one read of the socket,
        possibly none (a ping, a partial frame).

        Raises:
            ConnectionClosed: the connection is closed; any message received before the
                close was returned by an earlier call.
        """
        protocol = self._protocol
        if self._pending:
            events, self._pending = self._pending, []
        else:
            if protocol.state is State.CLOSED:
                raise protocol.close_exc
            await self._read()
            events = protocol.events_received()
            await self._write_pending()  # pongs, and the echo of a close frame
        messages = self._messages(events) if events else []
        if protocol.state is State.CLOSING:
            await self._finish_closing()
        elif protocol.state is State.CLOSED:
            await trio.aclose_forcefully(self._stream)
        if not messages and protocol.state is State.CLOSED:
            raise protocol.close_exc
        return messages

    def _messages(self, events: list[Event]) -> list[bytes]:
        messages: list[bytes] = []
        for event in events:
            if not isinstance(event, Frame):
                continue
            opcode = event.opcode
            if event.fin and (opcode is _TEXT or opcode is _BINARY):
                messages.append(bytes(event.data))
            elif opcode is _TEXT or opcode is _BINARY:
                self._fragments = [bytes(event.data)]
            elif opcode is _CONT and self._fragments is not None:
                self._fragments.append(bytes(event.data))
                if event.fin:
                    messages.append(b"".join(self._fragments))
                    self._fragments = None
            elif opcode is _PONG:
                self._pong_received(bytes(event.data))
        return messages

    async def _read(self) -> bool:
        """Read once and feed the protocol; False at the end of the stream."""
        try:
            data = await self._stream.receive_some(READ_CHUNK_BYTES)
        except _TRANSPORT_ERRORS as exc:
            if self.connection_exc is None and self._protocol.state is State.OPEN:
                self.connection_exc = exc
            data = b""
        if data:
            self._protocol.receive_data(data)
            return True
        self._protocol.receive_eof()
        return False

    async def _finish_closing(self) -> None:
        """A close frame was sent or received: wait (bounded) for the gateway to end the TCP
        connection, then drop it anyway (RFC 6455 7.1.1: the server closes first)."""
        protocol = self._protocol
        with trio.move_on_after(self._close_timeout):
            while protocol.state is not State.CLOSED and await self._read():
                protocol.events_received()  # RFC 6455 1.4: data after a close is discarded
        protocol.receive_eof()
        await trio.aclose_forcefully(self._stream)

    # --- sending ---------------------------------------------------------------------

    async def send(self, message: str | bytes) -> None:
        """Send one text frame.

        Raises:
            ConnectionClosed: the connection is closing or closed.
        """
        self._check_open()
        self._protocol.send_text(message.encode() if isinstance(message, str) else message)
        await self._write_pending(raise_on_loss=True)

    async def ping(self) -> trio.Event:
        """Send a ping; the event is set when its pong has been read by ``receive``."""
        self._check_open()
        payload = os.urandom(PING_PAYLOAD_BYTES)
        while payload in self._pings:
            payload = os.urandom(PING_PAYLOAD_BYTES)
        pong = self._pings[payload] = trio.Event()
        self._protocol.send_ping(payload)
        await self._write_pending(raise_on_loss=True)
        return pong

    def _pong_received(self, payload: bytes) -> None:
        # RFC 6455 5.5.3: a pong answers the ping with the same payload, and the pings
        # sent before it have been answered by it too.
        if payload not in self._pings:
            return
        for sent, pong in list(self._pings.items()):
            del self._pings[sent]
            pong.set()
            if sent == payload:
                break

    def _check_open(self) -> None:
        protocol = self._protocol
        if protocol.state is State.CLOSED:
            raise protocol.close_exc
        if protocol.state is not State.OPEN:
            raise ConnectionClosedError(
                protocol.close_rcvd, protocol.close_sent, protocol.close_rcvd_then_sent
            )

    async def _write_pending(self, *, raise_on_loss: bool = False) -> None:
        """Write whatever the protocol has queued, in order, one writer at a time."""
        async with self._send_lock:
            data = self._protocol.data_to_send()
            payload = b"".join(data)
            if not payload:
                return
            try:
                await self._stream.send_all(payload)
            except _TRANSPORT_ERRORS as exc:
                # The reader sees the same loss on its next read and reports the close.
                if self.connection_exc is None:
                    self.connection_exc = exc
                await trio.aclose_forcefully(self._stream)
                if raise_on_loss:
                    raise ConnectionClosedError(None, None) from exc

    # --- keepalive and closing --------------------------------------------------------

    async def keep_alive(self, interval: float, pong_timeout: float | None) -> None:
        """Ping every ``interval`` seconds; fail the connection when a pong takes longer
        than ``pong_timeout``."""
        while True:
            await trio.sleep(interval)
            try:
                pong = await self.ping()
            except ConnectionClosed:
                return
            if pong_timeout is None:
                continue
            with trio.move_on_after(pong_timeout):
                await pong.wait()
                continue
            logger.info("no pong within %g s; failing the connection", pong_timeout)
            self._protocol.fail(CloseCode.INTERNAL_ERROR, KEEPALIVE_CLOSE_REASON)
            with trio.move_on_after(self._close_timeout):
                await self._write_pending()
            # The reader, blocked on the socket, wakes up with the close.
            await trio.aclose_forcefully(self._stream)
            return

    async def aclose(self, code: int = int(CloseCode.NORMAL_CLOSURE), reason: str = "") -> None:
        """Close with ``code``: send a close frame, wait (bounded) for the gateway's, and
        drop the TCP connection. Never raises; a closed connection is left as it is."""
        protocol = self._protocol
        if protocol.state is State.OPEN:
            protocol.send_close(code, reason)
            with trio.move_on_after(self._close_timeout):
                await self._write_pending()
        if protocol.state is not State.CLOSED:
            await self._finish_closing()
        else:
            await trio.aclose_forcefully(self._stream)


@asynccontextmanager
async def connect(
    url: str,
    *,
    headers: Mapping[str, str],
    max_message_bytes: int,
    open_timeout: float,
    close_timeout: float,
    ping_interval: float | None,
    ping_timeout: float | None,
) -> AsyncIterator[GatewayConnection]:
    """Open a WebSocket to ``url`` (TCP, TLS for ``wss://``, the upgrade) within
    ``open_timeout``; keep it alive while the block runs; close it normally on exit.

    No proxy is used (a local gateway must never be reached through an IDE's proxy
    settings) and no extension is offered (permessage-deflate only costs CPU on loopback).

    Raises:
        InvalidURI: ``url`` is not a WebSocket URL.
        InvalidHandshake: the gateway refused the upgrade (``InvalidStatus``) or broke it.
        OSError: the TCP connection failed.
        trio.BrokenResourceError: the TLS handshake failed (its cause says why).
        TimeoutError: all this took longer than ``open_timeout``.
    """
    uri = parse_uri(url)
    protocol = ClientProtocol(uri, max_size=max_message_bytes)
    stream: trio.abc.Stream | None = None
    try:
        with trio.fail_after(open_timeout):
            stream = await trio.open_tcp_stream(uri.host, uri.port)
            if uri.secure:
                stream = trio.SSLStream(
                    stream,
                    ssl.create_default_context(),
                    server_hostname=uri.host,
                    https_compatible=True,
                )
                await stream.do_handshake()
            connection = GatewayConnection(stream, protocol, close_timeout=close_timeout)
            await connection.handshake(headers)
    except trio.TooSlowError:
        if stream is not None:
            await trio.aclose_forcefully(stream)
        raise TimeoutError("timed out during the opening handshake") from None
    except BaseException:
        if stream is not None:
            await trio.aclose_forcefully(stream)
        raise
    async with trio.open_nursery() as nursery:
        if ping_interval:
            nursery.start_soon(connection.keep_alive, ping_interval, ping_timeout)
        try:
            yield connection
        finally:
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await connection.aclose()
