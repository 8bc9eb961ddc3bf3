"""The relay: stdin lines → WebSocket frames, frames → stdout lines.

Three tasks share one connection (aesthetics notes §2.4.11):

* the stdin pump reads lines, answers bad ones locally, records relayed request ids and
  sends each good line as one text frame (it is the only sender on the WebSocket);
* the gateway pump receives frames, turns each into one stdout line and clears the ids
  of responses from the in-flight table;
* the stdout writer is the only task that writes stdout; the other two hand it lines through
  a bounded channel, so a slow IDE slows the gateway down instead of growing memory.

How it ends (issue 7 §2):

* stdin EOF: stop reading, wait up to ``eof_grace`` for replies owed to relayed requests,
  answer any still missing with an error, close the WebSocket normally; exit 0;
* gateway close or connection loss: answer every request still in flight with an error that
  names the cause, then exit 1 with a message;
* stdout closed by the IDE: nobody is listening any more; close normally, exit 0;
* SIGINT/SIGTERM: close the WebSocket with "going away", exit 128 + signal number.
"""

from __future__ import annotations

import enum
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import trio
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.trio.client import ClientConnection

from acp_bridge.errors import BridgeExit, ExitCode
from acp_bridge.gateway import describe_close
from acp_bridge.messages import (
    Forward,
    FrameError,
    ReplyToClient,
    ReplyToGateway,
    StdinFramer,
    error_line,
    frame_to_line,
    response_id,
)
from acp_bridge.stdio import DEFAULT_READ_CHUNK_BYTES
from acp_core.errors import ErrorCode
from acp_core.framing import DEFAULT_MAX_LINE_BYTES
from acp_core.jsonrpc import RequestId

logger = logging.getLogger(__name__)

DEFAULT_EOF_GRACE_SECS: Final = 10.0
"""After stdin EOF, how long replies owed to requests already relayed are waited for."""
DEFAULT_OUTBOX_LINES: Final = 64
"""Lines waiting for stdout before the gateway pump blocks (backpressure)."""
DEFAULT_MAX_WRITE_BATCH_BYTES: Final = 1024 * 1024
"""Queued lines are joined into one stdout write up to this size (fewer syscalls)."""
MAX_IN_FLIGHT_REQUESTS: Final = 100_000
"""Ids kept for requests awaiting a reply; beyond this the oldest are forgotten (a client
that never reads its replies must not grow the bridge without bound)."""
BRIDGE_ERROR_CODE: Final = int(ErrorCode.INTERNAL_ERROR)
TRACE_CHARS: Final = 500
"""With --log-level debug, how much of each relayed message is logged."""


class InFlight:
    """Ids of requests relayed to the gateway and not yet answered, with their methods."""

    def __init__(self, *, limit: int = MAX_IN_FLIGHT_REQUESTS) -> None:
        self._methods: dict[RequestId, str] = {}
        self._limit = limit
        self._empty = trio.Event()
        self._empty.set()

    def __len__(self) -> int:
        return len(self._methods)

    def add(self, request_id: RequestId, method: str) -> None:
        if not self._methods:
            self._empty = trio.Event()
        elif len(self._methods) >= self._limit:
            forgotten = next(iter(self._methods))
            del self._methods[forgotten]
            logger.warning("more than %d requests in flight; forgot id %r", self._limit, forgotten)
        self._methods[request_id] = method

    def settle(self, request_id: RequestId) -> None:
        if self._methods.pop(request_id, None) is not None and not self._methods:
            self._empty.set()

    def drain(self) -> list[tuple[RequestId, str]]:
        owed = list(self._methods.items())
        self._methods.clear()
        self._empty.set()
        return owed

    async def wait_empty(self) -> None:
        while self._methods:
            await self._empty.wait()


class Ending(enum.Enum):
    STDIN_EOF = "stdin closed"
    CONNECTION_LOST = "connection lost"
    STDOUT_CLOSED = "stdout closed"
    SIGNALLED = "signal"


@dataclass(slots=True)
class RelayOptions:
    eof_grace: float = DEFAULT_EOF_GRACE_SECS
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES
    handle_signals: bool = True


class _Shutdown:
    """The first reason to stop wins; it cancels the pumps."""

    def __init__(self, pumps: trio.CancelScope) -> None:
        self._pumps = pumps
        self.ending: Ending | None = None
        self.cause = ""
        self.signal_number = 0

    def end(self, ending: Ending, cause: str = "") -> None:
        if self.ending is None:
            self.ending, self.cause = ending, cause
        self._pumps.cancel()


async def relay(
    websocket: ClientConnection,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    *,
    url: str,
    options: RelayOptions,
) -> int:
    """Relay until one side ends; see the module docstring for how each ending is handled.

    Returns the exit code: 0, or 128 + the signal number after SIGINT/SIGTERM.

    Raises:
        BridgeExit: (connection) the gateway closed the connection or it was lost.
    """
    inflight = InFlight()
    outbox_send, outbox_recv = trio.open_memory_channel[bytes](DEFAULT_OUTBOX_LINES)
    pumps = trio.CancelScope()
    shutdown = _Shutdown(pumps)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_stdout, stdout, outbox_recv, shutdown.end)
        async with outbox_send:
            with pumps:
                async with trio.open_nursery() as pump_nursery:
                    pump_nursery.start_soon(
                        _pump_stdin, stdin, websocket, outbox_send, inflight, shutdown, options
                    )
                    pump_nursery.start_soon(
                        _pump_gateway, websocket, outbox_send, inflight, shutdown
                    )
                    if options.handle_signals:
                        pump_nursery.start_soon(_watch_signals, shutdown)
            await _answer_owed(inflight, outbox_send, shutdown, url, options)
        # Leaving the nursery waits for the writer to flush every queued line.

    if shutdown.ending is Ending.CONNECTION_LOST:
        raise BridgeExit(ExitCode.CONNECTION, f"ERROR: {shutdown.cause} ({url}).")
    if shutdown.ending is Ending.SIGNALLED:
        await websocket.aclose(CloseCode.GOING_AWAY, "bridge stopped")
        return 128 + shutdown.signal_number
    await websocket.aclose()
    logger.info("relay ended (%s); connection closed normally", shutdown.ending)
    return int(ExitCode.OK)


async def _answer_owed(
    inflight: InFlight,
    outbox: trio.MemorySendChannel[bytes],
    shutdown: _Shutdown,
    url: str,
    options: RelayOptions,
) -> None:
    """Never leave a request silently unanswered: the IDE would wait for it forever."""
    owed = inflight.drain()
    if not owed:
        return
    if shutdown.ending is Ending.CONNECTION_LOST:
        message = (
            f"zeroclaw-acp-bridge: {shutdown.cause} ({url}) before this request was answered; "
            "its outcome is unknown"
        )
        reason = "connection_lost"
    elif shutdown.ending is Ending.STDIN_EOF:
        message = (
            f"zeroclaw-acp-bridge: no reply within {options.eof_grace:g} s after stdin was "
            "closed; the bridge is exiting"
        )
        reason = "stdin_closed"
        logger.warning(
            "stdin closed; %d replies still owed after %g s", len(owed), options.eof_grace
        )
    else:
        return  # nobody is reading stdout, or we were told to stop
    for request_id, method in owed:
        await outbox.send(
            error_line(request_id, BRIDGE_ERROR_CODE, message, {"bridge": reason, "method": method})
        )


async def _pump_stdin(
    stdin: trio.abc.ReceiveStream,
    websocket: ClientConnection,
    outbox: trio.MemorySendChannel[bytes],
    inflight: InFlight,
    shutdown: _Shutdown,
    options: RelayOptions,
) -> None:
    framer = StdinFramer(max_line_bytes=options.max_line_bytes)
    trace = logger.isEnabledFor(logging.DEBUG)
    try:
        while True:
            try:
                chunk = bytes(await stdin.receive_some(options.read_chunk_bytes))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                logger.warning("reading stdin failed (%s); treating it as end of input", exc)
                chunk = b""
            for action in framer.feed(chunk):
                if isinstance(action, Forward):
                    if action.method is not None:
                        # Recorded before sending: the reply may arrive while send() waits.
                        inflight.add(action.request_id, action.method)
                    if trace:
                        logger.debug("→ %s", action.text[:TRACE_CHARS])
                    await websocket.send(action.text)
                elif isinstance(action, ReplyToClient):
                    logger.warning("answered a bad stdin line locally: %s", action.line[:300])
                    await outbox.send(action.line)
                elif isinstance(action, ReplyToGateway):
                    logger.warning("dropped a bad client response: %s", action.text[:300])
                    await websocket.send(action.text)
            if not chunk:
                break
    except ConnectionClosed:
        # The gateway pump sees the same closure and reports it; wait to be cancelled.
        await trio.sleep_forever()
    if inflight:
        logger.info(
            "stdin closed; waiting up to %g s for %d replies", options.eof_grace, len(inflight)
        )
        with trio.move_on_after(options.eof_grace):
            await inflight.wait_empty()
    shutdown.end(Ending.STDIN_EOF)


async def _pump_gateway(
    websocket: ClientConnection,
    outbox: trio.MemorySendChannel[bytes],
    inflight: InFlight,
    shutdown: _Shutdown,
) -> None:
    trace = logger.isEnabledFor(logging.DEBUG)
    while True:
        # Frames websockets has already received are gathered into one stdout write: one
        # syscall per socket read instead of one per (often tiny) session/update.
        batch: list[bytes] = []
        batch_bytes = 0
        answered: list[RequestId] = []
        closed: ConnectionClosed | None = None
        while True:
            try:
                frame = await websocket.recv(decode=False)
            except ConnectionClosed as exc:
                closed = exc
                break
            try:
                line = frame_to_line(frame)
            except FrameError as exc:
                logger.error("dropped a frame from the gateway: %s", exc)
            else:
                if trace:
                    logger.debug("← %s", line[:TRACE_CHARS].decode(errors="replace").rstrip())
                batch.append(line)
                batch_bytes += len(line)
                if inflight:
                    is_response, request_id = response_id(frame)
                    if is_response:
                        answered.append(request_id)
            if batch_bytes >= DEFAULT_MAX_WRITE_BATCH_BYTES or not _frames_waiting(websocket):
                break
        if batch:
            await outbox.send(batch[0] if len(batch) == 1 else b"".join(batch))
        # Settled only once the reply is queued for stdout: an emptied table may end the
        # EOF grace period, and the reply must not be lost to that.
        for request_id in answered:
            inflight.settle(request_id)
        if closed is not None:
            cause = describe_close(closed, websocket)
            logger.info("%s", cause)
            shutdown.end(Ending.CONNECTION_LOST, cause)
            return


def _frames_waiting(websocket: ClientConnection) -> bool:
    """Whether websockets already holds more received frames (the next recv() is immediate).

    Reads the queue of websockets' trio Assembler; should a future version rename it, this
    answers False and the relay simply stops batching.
    """
    queue = getattr(websocket.recv_messages, "recv_frames", None)
    return isinstance(queue, trio.MemoryReceiveChannel) and (
        queue.statistics().current_buffer_used > 0
    )


async def _write_stdout(
    stdout: trio.abc.SendStream,
    outbox: trio.MemoryReceiveChannel[bytes],
    end: Callable[[Ending, str], None],
) -> None:
    broken = False
    async with outbox:
        async for line in outbox:
            batch = [line]
            size = len(line)
            while size < DEFAULT_MAX_WRITE_BATCH_BYTES:
                try:
                    line = outbox.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                batch.append(line)
                size += len(line)
            if broken:
                continue  # keep draining so that producers never block on a dead stdout
            try:
                await stdout.send_all(batch[0] if len(batch) == 1 else b"".join(batch))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                logger.warning("stdout was closed by the client (%s); stopping", exc)
                broken = True
                end(Ending.STDOUT_CLOSED, str(exc))
    await stdout.aclose()


async def _watch_signals(shutdown: _Shutdown) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signal_number in signals:
            logger.info("received %s; closing", signal.Signals(signal_number).name)
            shutdown.signal_number = signal_number
            shutdown.end(Ending.SIGNALLED)
            return
