"""One WebSocket connection as a ``MessageTransport`` (wsproto state machine, trio I/O).

Frames: one text frame carries one JSON-RPC message. Binary frames are decoded as UTF-8
like ZeroClaw's implementation does (some generic clients, e.g. websocat in binary mode, send JSON that
way); one that is not UTF-8 is answered with the same -32700 parse error the stdio server
gives an invalid line, and the connection keeps serving. A message larger than
``max_message_bytes`` (default: the stdio line limit, 24 MiB, room for a 10 MiB blob in
base64 plus its envelope) closes the connection with 1009 "message too big" without ever
buffering more than the limit. The fragments of a message are gathered as bytes in one
buffer, so what a message holds in memory is the size counted against the limit however
small its fragments are (one Python string per 2-byte fragment would cost ~40 times that).

Tasks: ``run_reader`` reads the socket all the time (so pongs and close frames are seen
even while the ACP layer is busy) and hands complete messages to ``receive_message`` through
a small bounded channel; ``run_keepalive`` pings. Writes from the ACP layer, the reader
(pongs, close replies) and the keepalive go through one lock: one writer at a time. Every
frame, data or control, is built by the one wsproto ``Connection``, so its state (open,
closing) is the only one there is; a batch of text frames is joined into one write.

Close codes are wsproto's ``CloseReason`` names for RFC 6455 §7.4 (bridges reconnect on
``SERVICE_RESTART`` 1012 and stop on ``POLICY_VIOLATION`` 1008).

A transport only: it carries frames and never looks inside a message. What a drain needs
(which requests are unanswered, refusing new ones) is the ACP connection's business
(``AcpConnection.refuse_new_requests`` / ``wait_idle`` in protocol/connection.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import trio
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError

from acp_core.errors import ErrorCode, RemoteProtocolError, RpcError
from acp_core.framing import DEFAULT_MAX_LINE_BYTES
from acp_server.protocol.transport import TransportClosed

logger = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES: Final = DEFAULT_MAX_LINE_BYTES
"""Largest inbound message; beyond it the connection is closed with 1009."""
DEFAULT_RECEIVE_CHUNK_BYTES: Final = 64 * 1024
DEFAULT_MAX_COALESCED_WRITE_BYTES: Final = 256 * 1024
"""Frames of a batch are joined into one write up to this size (bounds the copy)."""
DEFAULT_MAX_PENDING_INBOUND_MESSAGES: Final = 4
"""Complete messages read ahead of the ACP layer before the reader stops reading."""
DEFAULT_CLOSE_TIMEOUT_SECS: Final = 2.0
"""How long to wait for the peer's close frame after sending ours."""


def _parse_error(message: str) -> RemoteProtocolError:
    """What ``receive_message`` raises for a frame that is not text: the ACP layer answers
    it with the error in ``reply_hint``, as it answers a stdio line that is not UTF-8."""
    error = RpcError(message, code=ErrorCode.PARSE_ERROR)
    return RemoteProtocolError(message, reply_hint=error.to_response(None))


_Inbound = str | RemoteProtocolError


def _utf8(chunk: str | bytes | bytearray) -> bytes | bytearray:
    return chunk.encode("utf-8") if isinstance(chunk, str) else chunk


def _decode_binary(raw: bytes | bytearray) -> _Inbound:
    """A binary message's text, or the parse error that answers it when it is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _parse_error(
            f"Parse error: binary frame is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        )


class WebSocketTransport:
    """A server-side WebSocket after a successful upgrade.

    Args:
        stream: the TCP (or TLS) stream, already past the HTTP 101 response.
        trailing_data: bytes read past the HTTP request head (the start of the first frames).
        peer: a label for logs.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        trailing_data: bytes = b"",
        peer: str = "?",
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        ping_interval_secs: float = 30.0,
    ) -> None:
        self._stream = stream
        self._trailing = trailing_data
        self.peer = peer
        self._max_message_bytes = max_message_bytes
        self._ping_interval = ping_interval_secs
        self._ws = Connection(ConnectionType.SERVER)
        self._write_lock = trio.StrictFIFOLock()
        self._inbound_send, self._inbound_receive = trio.open_memory_channel[_Inbound](
            DEFAULT_MAX_PENDING_INBOUND_MESSAGES
        )
        self._fragments = bytearray()
        """The UTF-8 bytes of the message being received, before its last fragment."""
        self._reader_blocked = False
        self._heard_since_ping = False
        self._pong_received = trio.Event()
        self._stream_closed = False
        self.peer_gone = trio.Event()
        self.close_code: int | None = None
        """The close code the gateway sent, or received first from the peer."""
        self.close_reason: str = ""

    # ------------------------------------------------------------------ MessageTransport

    async def receive_message(self) -> str | None:
        try:
            item = await self._inbound_receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None
        if isinstance(item, RemoteProtocolError):
            raise item
        return item

    async def send_message(self, payload: bytes) -> None:
        await self._send_text((payload,))

    async def send_messages(self, payloads: Sequence[bytes]) -> None:
        """Several messages, one text frame each, in one write (the ACP layer batches
        what is queued: fewer syscalls when a turn streams fast)."""
        batch: list[bytes] = []
        batch_bytes = 0
        for payload in payloads:
            batch.append(payload)
            batch_bytes += len(payload)
            if batch_bytes >= DEFAULT_MAX_COALESCED_WRITE_BYTES:
                await self._send_text(batch)
                batch = []
                batch_bytes = 0
        if batch:
            await self._send_text(batch)

    async def _send_text(self, payloads: Sequence[bytes]) -> None:
        """One text frame per payload (serialised JSON, so valid UTF-8), in one write."""
        if not self.open:
            raise TransportClosed(f"WebSocket to {self.peer} is closed")
        async with self._write_lock:
            # Framed under the lock: a close frame sent meanwhile ends the OPEN state.
            if not self.open:
                raise TransportClosed(f"WebSocket to {self.peer} is closed")
            frame = self._ws.send
            data = b"".join([frame(TextMessage(data=payload.decode())) for payload in payloads])
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                self._stream_closed = True
                raise TransportClosed(f"WebSocket to {self.peer} went away") from exc

    async def aclose(self) -> None:
        await self.close(CloseReason.NORMAL_CLOSURE, "")

    # ------------------------------------------------------------------ lifecycle

    @property
    def open(self) -> bool:
        return not self._stream_closed and self._ws.state is ConnectionState.OPEN

    def end_input(self) -> None:
        """No more inbound messages: ``receive_message`` answers None once the ones already
        read are consumed. Outbound traffic keeps flowing (cancelled turns still answer)."""
        self._inbound_send.close()

    async def close(self, code: int, reason: str) -> None:
        """Send a close frame (if the socket is still open), wait briefly for the peer's
        reply, then close the stream. Idempotent."""
        self.end_input()
        await self._send_close(code, reason)
        with trio.move_on_after(DEFAULT_CLOSE_TIMEOUT_SECS):
            await self.peer_gone.wait()
        await self.abort()

    async def abort(self) -> None:
        """Drop the TCP stream at once (a peer that stopped answering)."""
        self.end_input()
        self._stream_closed = True
        self.peer_gone.set()
        await trio.aclose_forcefully(self._stream)

    async def _send_close(self, code: int, reason: str) -> None:
        # Bounded as a whole: a peer that stopped reading may hold the writer in send_all.
        with trio.move_on_after(DEFAULT_CLOSE_TIMEOUT_SECS):
            async with self._write_lock:
                if self._stream_closed or self._ws.state not in (
                    ConnectionState.OPEN,
                    ConnectionState.REMOTE_CLOSING,
                ):
                    return
                if self.close_code is None:
                    self.close_code, self.close_reason = code, reason
                try:
                    data = self._ws.send(CloseConnection(code=code, reason=reason or None))
                    await self._stream.send_all(data)
                except (LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
                    self._stream_closed = True

    async def _send_control(self, event: Ping | Pong) -> None:
        """A ping or pong, only while the connection is open: once a close frame is out,
        wsproto's state refuses both (and nothing follows the close on the wire)."""
        async with self._write_lock:
            if not self.open:
                return
            try:
                await self._stream.send_all(self._ws.send(event))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._stream_closed = True

    # ------------------------------------------------------------------ tasks

    async def run_reader(self) -> None:
        """Read frames until the peer closes or the stream ends."""
        try:
            if self._trailing:
                await self._feed(self._trailing)
                self._trailing = b""
            while self._ws.state in (ConnectionState.OPEN, ConnectionState.LOCAL_CLOSING):
                try:
                    data = await self._stream.receive_some(DEFAULT_RECEIVE_CHUNK_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    logger.info("connection from %s ended without a close frame", self.peer)
                    break
                self._heard_since_ping = True
                await self._feed(bytes(data))
        finally:
            self.end_input()
            self.peer_gone.set()

    async def run_keepalive(self) -> None:
        """Ping every ``ping_interval_secs``; a peer that sends nothing at all (not even a
        pong) for a whole interval after a ping is dropped. 0 disables keepalive."""
        if self._ping_interval <= 0:
            return
        sequence = 0
        while self.open:
            await trio.sleep(self._ping_interval)
            if not self.open:
                return
            sequence += 1
            self._heard_since_ping = False
            self._pong_received = trio.Event()
            with trio.move_on_after(self._ping_interval):
                await self._send_control(Ping(payload=sequence.to_bytes(8, "big")))
                await self._pong_received.wait()
            # A reader held up by a slow ACP layer is not reading pongs: not the peer's fault.
            if self._pong_received.is_set() or self._heard_since_ping or self._reader_blocked:
                continue
            logger.warning(
                "peer %s did not answer a ping within %.0f s; dropping the connection",
                self.peer,
                self._ping_interval,
            )
            self.close_code, self.close_reason = CloseReason.GOING_AWAY, "ping timeout"
            await self.abort()
            return

    async def _feed(self, data: bytes) -> None:
        try:
            self._ws.receive_data(data)
        except LocalProtocolError:
            return
        for event in self._ws.events():
            if isinstance(event, TextMessage):
                await self._on_data(event.data, event.message_finished, text=True)
            elif isinstance(event, BytesMessage):
                await self._on_data(event.data, event.message_finished, text=False)
            elif isinstance(event, Ping):
                await self._send_control(event.response())
            elif isinstance(event, Pong):
                self._pong_received.set()
            elif isinstance(event, CloseConnection):
                await self._on_close(event)
                return

    async def _on_close(self, event: CloseConnection) -> None:
        if self.close_code is None:
            self.close_code, self.close_reason = event.code, event.reason or ""
        self.end_input()
        if self._ws.state is ConnectionState.REMOTE_CLOSING:
            # The peer closed first: echo its code (RFC 6455 §5.5.1).
            await self._send_close(event.code, "")
        elif self._ws.state is ConnectionState.OPEN:
            # wsproto reports a frame it could not parse as a close with 1002/1007.
            logger.info("closing %s: %s", self.peer, event.reason)
            await self._send_close(event.code, event.reason or "")
        self.peer_gone.set()

    async def _on_data(self, chunk: str | bytes | bytearray, finished: bool, *, text: bool) -> None:
        if self._ws.state is not ConnectionState.OPEN:
            return  # closing (e.g. the rest of an oversized message): read and discard
        if finished and not self._fragments:
            # A whole message in one frame (nearly always): no copy.
            if self._too_big(len(chunk) if chunk.isascii() else len(_utf8(chunk))):
                await self._refuse_oversized()
                return
            await self._deliver(chunk if isinstance(chunk, str) else _decode_binary(chunk))
            return
        # For ASCII (nearly all JSON) characters are bytes; otherwise count exactly.
        self._fragments += _utf8(chunk)
        if self._too_big(len(self._fragments)):
            await self._refuse_oversized()
            return
        if not finished:
            return
        raw, self._fragments = self._fragments, bytearray()
        # wsproto has checked a text message's UTF-8 already.
        item = raw.decode("utf-8") if text else _decode_binary(raw)
        del raw  # the buffer is released before the message waits for the ACP layer
        await self._deliver(item)

    def _too_big(self, size: int) -> bool:
        return size > self._max_message_bytes

    async def _refuse_oversized(self) -> None:
        limit_mib = self._max_message_bytes / (1024 * 1024)
        logger.warning(
            "closing %s: message larger than the %d-byte limit", self.peer, self._max_message_bytes
        )
        self._fragments = bytearray()
        self.end_input()
        await self._send_close(
            CloseReason.MESSAGE_TOO_BIG, f"message exceeds the {limit_mib:g} MiB limit"
        )

    async def _deliver(self, item: _Inbound) -> None:
        self._reader_blocked = True
        try:
            await self._inbound_send.send(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # input ended (drain, close): the message is dropped on purpose
        finally:
            self._reader_blocked = False
