"""The relay: stdin lines → WebSocket frames, frames → stdout lines, across reconnections.

The bookkeeping (the phase, requests in flight, held messages, sessions, the replay,
renamed ids) is ``acp_bridge.relay_state.RelayState``, which does no I/O; the tasks here
feed it what they read, perform what it returns, and wake each other when it reports a
change. All in one nursery:

* the stdin pump reads lines, answers bad ones locally and hands the good ones to the
  state, which says whether to send each as one text frame, hold it or refuse it;
* the connection manager opens the connection and, after a drop, reconnects:
  it sends the replay the state plans (the IDE's ``initialize``, ``session/resume`` for
  every session seen so far), then the held frames, and only then lets the stdin pump
  send directly again; per connection it runs
* the gateway pump, which turns each batch of frames into stdout lines through the state;
* the notice task, which tells the user in the chat when a prompt is held because the
  gateway cannot be reached (editors do not show the agent's stderr);
* the stdout writer is the only task that writes stdout; the others hand it lines through a
  bounded channel, so a slow IDE slows the gateway down instead of growing memory.

Only one task sends IDE messages on a connection at a time: the manager while the state is
REPLAYING or FLUSHING, the stdin pump once it is READY.

How it ends:

* stdin EOF: stop reading, wait up to ``eof_grace`` for replies owed to relayed (or held)
  requests, answer any still missing with an error, close the WebSocket normally; exit 0;
* connection lost: every request in flight is answered with an error that names the cause
  (the session itself is kept by the gateway). With reconnection on (the default), the
  bridge reconnects with jittered exponential backoff, for at most ``reconnect_max_secs``;
  giving up, a 401, or a "rejected" close (1008) ends it with exit 1 (3 for auth);
  with ``--no-reconnect`` the first loss ends it with exit 1;
* the first connection fails: exit 1 (3 for auth) at once, unless the gateway was reached
  and is only busy (503, cut mid-handshake): that is retried as a reconnection is;
* stdout closed by the IDE: nobody is listening any more; close normally, exit 0;
* SIGINT/SIGTERM: close the WebSocket with "going away", exit 128 + signal number.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Final

import msgspec
import trio
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from acp_bridge.connection import GatewayConnection
from acp_bridge.errors import BridgeExit, ExitCode
from acp_bridge.gateway import DEFAULT_CLOSE_TIMEOUT_SECS, describe_close
from acp_bridge.messages import Forward, ReplyToClient, ReplyToGateway, StdinFramer
from acp_bridge.notices import Outage
from acp_bridge.reconnect_policy import (
    REJECTED_CLOSE_CODES,
    STABLE_CONNECTION_SECS,
    backoff,
    may_reconnect,
)
from acp_bridge.relay_phase import Ending, RelayPhase
from acp_bridge.relay_state import REPLAY_ANSWERED, RelayState, SendToGateway, WriteToClient
from acp_bridge.stdio import DEFAULT_READ_CHUNK_BYTES
from acp_core.framing import DEFAULT_MAX_LINE_BYTES

logger = logging.getLogger(__name__)

DEFAULT_EOF_GRACE_SECS: Final = 10.0
"""After stdin EOF, how long replies owed to requests already relayed are waited for."""
DEFAULT_RECONNECT_MAX_SECS: Final = 60.0
"""How long the bridge keeps trying to reconnect before it gives up (exit 1)."""
DEFAULT_REPLAY_TIMEOUT_SECS: Final = 10.0
"""How long the answers to the replayed initialize and session/resume are waited for."""
DEFAULT_MAX_HELD_MESSAGES: Final = 1000
DEFAULT_MAX_HELD_BYTES: Final = 32 * 1024 * 1024
"""IDE messages held while reconnecting; beyond either bound they are refused."""
DEFAULT_HELD_PROMPT_NOTICE_SECS: Final = 2.0
"""A prompt held this long while disconnected gets a notice the user sees (a gateway that
restarts in a second or two goes unmentioned)."""
DEFAULT_OUTBOX_LINES: Final = 64
"""Lines waiting for stdout before the gateway pump blocks (backpressure)."""
DEFAULT_MAX_WRITE_BATCH_BYTES: Final = 1024 * 1024
"""Queued lines are joined into one stdout write up to this size (fewer syscalls)."""
TRACE_CHARS: Final = 500
"""With --log-level debug, how much of each relayed message is logged."""


class RelayOptions(msgspec.Struct):
    eof_grace: float = DEFAULT_EOF_GRACE_SECS
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES
    handle_signals: bool = True
    reconnect: bool = True
    reconnect_max_secs: float = DEFAULT_RECONNECT_MAX_SECS
    max_held_messages: int = DEFAULT_MAX_HELD_MESSAGES
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES
    replay_timeout: float = DEFAULT_REPLAY_TIMEOUT_SECS
    held_prompt_notice: float = DEFAULT_HELD_PROMPT_NOTICE_SECS
    close_timeout: float = 2 * DEFAULT_CLOSE_TIMEOUT_SECS
    """Outer bound on closing a connection when the relay ends (the connection has its own)."""
    rejected_advice: str = (
        "Check that the bridge's token is still paired (`zeroclaw-acp-bridge --check`)."
    )
    """What to do after a "rejected" close (1008): the credentials' own advice, as for a 401."""
    shared_filesystem: bool = False
    """Add ``_meta.zeroclaw.sharedFilesystem: true`` to the IDE's ``initialize``."""


class _Connection(msgspec.Struct):
    socket: GatewayConnection
    generation: int
    opened_at: float
    closed: ConnectionClosed | None = None
    cause: str = ""


OpenConnection = Callable[[], AbstractAsyncContextManager[GatewayConnection]]


class _Relay:
    def __init__(
        self,
        open_connection: OpenConnection,
        outbox: trio.MemorySendChannel[bytes],
        *,
        url: str,
        options: RelayOptions,
    ) -> None:
        self.open_connection = open_connection
        self.outbox = outbox
        self.url = url
        self.options = options
        self.state = RelayState(
            url=url,
            max_held_messages=options.max_held_messages,
            max_held_bytes=options.max_held_bytes,
            shared_filesystem=options.shared_filesystem,
        )
        self.connection: _Connection | None = None
        """The open connection (while replaying too), None while there is none."""
        self.outage: Outage | None = None
        self.trace = logger.isEnabledFor(logging.DEBUG)
        # What the state reports, turned into wake-ups for the tasks that wait on it.
        self.progress = trio.Event()
        """Set when the replies owed may have changed (a reply queued, the hold flushed)."""
        self.replay_answered = trio.Event()
        self.prompt_held = trio.Event()
        """Set when a prompt was held that the user has not been told about."""
        self.first_attempt_done = trio.Event()
        self.ended = trio.Event()
        # Cancel scopes that end() cancels.
        self.pumps = trio.CancelScope()
        self.attempt_scope: trio.CancelScope | None = None
        self.fatal: BridgeExit | None = None
        self.signal_number = 0

    # --- ending ----------------------------------------------------------------------

    def end(self, ending: Ending, cause: str = "") -> None:
        self.state.end(ending, cause)
        self.ended.set()
        self.pumps.cancel()
        if self.attempt_scope is not None:
            self.attempt_scope.cancel()

    def _close_code(self) -> tuple[int, str]:
        if self.state.ending in (Ending.SIGNALLED, Ending.FATAL):
            return int(CloseCode.GOING_AWAY), "bridge stopped"
        return int(CloseCode.NORMAL_CLOSURE), ""

    def _woke(self) -> None:
        """Wake whoever waits for the replies owed to change."""
        self.progress.set()
        self.progress = trio.Event()

    async def answer_owed(self) -> None:
        """Never leave a request silently unanswered: the IDE would wait for it forever."""
        ending = self.state.ending
        if ending is Ending.STDIN_EOF:
            message = (
                f"zeroclaw-acp-bridge: no reply within {self.options.eof_grace:g} s after "
                "stdin was closed; the bridge is exiting"
            )
            lines = self.state.abandon(message, "stdin_closed")
            if lines:
                logger.warning(
                    "stdin closed; %d replies still owed after %g s",
                    len(lines),
                    self.options.eof_grace,
                )
        elif ending in (Ending.CONNECTION_LOST, Ending.FATAL):
            message = (
                "zeroclaw-acp-bridge: the bridge stopped before this request was sent: "
                f"{self.state.cause}"
            )
            lines = self.state.abandon(message, "connection_lost")
        else:
            return  # nobody is reading stdout, or we were told to stop
        for line in lines:
            await self.outbox.send(line)

    # --- stdin -----------------------------------------------------------------------

    async def pump_stdin(self, stdin: trio.abc.ReceiveStream) -> None:
        framer = StdinFramer(max_line_bytes=self.options.max_line_bytes)
        # The first connection is made (or fails, with its exit code) before stdin is read.
        await self.first_attempt_done.wait()
        while True:
            try:
                chunk = bytes(await stdin.receive_some(self.options.read_chunk_bytes))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                logger.warning("reading stdin failed (%s); treating it as end of input", exc)
                chunk = b""
            for action in framer.feed(chunk):
                if isinstance(action, ReplyToClient):
                    logger.warning("answered a bad stdin line locally: %s", action.line[:300])
                    await self.outbox.send(action.line)
                    continue
                if isinstance(action, ReplyToGateway):
                    logger.warning("dropped a bad client response: %s", action.text[:300])
                await self.send_or_hold(action)
            if not chunk:
                break
        state = self.state
        if state.owes_replies:
            logger.info(
                "stdin closed; waiting up to %g s for %d replies",
                self.options.eof_grace,
                len(state.inflight) + len(state.held),
            )
            with trio.move_on_after(self.options.eof_grace):
                while state.owes_replies:
                    await self.progress.wait()
        self.end(Ending.STDIN_EOF)

    async def send_or_hold(self, action: Forward | ReplyToGateway) -> None:
        """Send a client message now, or leave it held (or answered) as the state says."""
        outcome = self.state.client_message(action)
        if outcome is None:
            if self.state.prompts:
                self.prompt_held.set()
            return
        if isinstance(outcome, WriteToClient):
            await self.outbox.send(outcome.line)
            return
        connection = self.connection
        assert connection is not None  # the state is ready only while a connection is open
        await self._send(connection, outcome)

    async def _send(self, connection: _Connection, outgoing: SendToGateway) -> None:
        text = outgoing.text
        if self.trace:
            logger.debug("→ %s", text[:TRACE_CHARS])
        try:
            await connection.socket.send(text)
        except ConnectionClosed:
            # The gateway pump sees the same closure; a request sent here is in flight and
            # is answered with the connection-lost error, anything else is lost with it.
            if not outgoing.is_request:
                logger.warning("lost with the connection: %s", text[:200])

    async def announce_held_prompts(self) -> None:
        """Tell the user, in the chat itself, why a held prompt does not move: none of the
        editors shows the agent's stderr, and a bare spinner for a minute says nothing."""
        while True:
            await self.prompt_held.wait()
            self.prompt_held = trio.Event()
            await trio.sleep(self.options.held_prompt_notice)
            outage = self.outage
            if outage is not None:
                text = outage.text(self.url, trio.current_time())
                for line in self.state.held_prompt_notices(text):
                    await self.outbox.send(line)
            if self.state.prompts:
                self.prompt_held.set()  # connected meanwhile but not ready: look again

    # --- the gateway side ------------------------------------------------------------

    async def manage_connections(self) -> None:
        """Connect; after each loss, reconnect (unless told not to) until the relay ends.

        Runs outside the pumps' cancel scope: when the relay ends while connected, the
        connection is closed with a proper close frame rather than torn down by cancellation.
        """
        first = True
        given_up_at: float | None = None
        attempt = 0
        try:
            while not self.ended.is_set():
                try:
                    lost = await self._connect_and_serve(first)
                except BridgeExit as exc:
                    # The very first attempt fails at once with its advice (no gateway
                    # there), unless the gateway is only busy: the IDE's initialize waits.
                    retry_first = exc.busy and self.options.reconnect
                    if exc.code is ExitCode.AUTH or (given_up_at is None and not retry_first):
                        self.fatal = exc
                        self.end(Ending.FATAL, exc.message)
                        return
                    if given_up_at is None:
                        given_up_at = trio.current_time() + self.options.reconnect_max_secs
                    last_error = exc.message.removeprefix("ERROR: ")
                    if self.outage is not None:
                        self.outage.last_attempt = last_error
                    if self._give_up_if_past(given_up_at, last_error):
                        return
                    now = trio.current_time()
                    delay = min(backoff(attempt), max(0.0, given_up_at - now))
                    attempt += 1
                    logger.info(
                        "connection attempt %d failed (%s); next in %.2f s",
                        attempt,
                        last_error,
                        delay,
                    )
                    await self._pause(delay)
                    continue
                if lost is None:
                    return  # the relay ended
                first = False
                if trio.current_time() - lost.opened_at >= STABLE_CONNECTION_SECS:
                    given_up_at, attempt = None, 0
                # else: a gateway that accepts and drops at once must not cause a reconnect
                # storm, so the backoff and the give-up deadline carry on.
                if not await self._after_loss(lost):
                    return
                if given_up_at is None:
                    given_up_at = trio.current_time() + self.options.reconnect_max_secs
                elif self._give_up_if_past(given_up_at, f"{lost.cause} right after connecting"):
                    return
                if self.outage is not None:
                    self.outage.retry_until = given_up_at
                delay = backoff(attempt)
                attempt += 1
                await self._pause(delay)
        finally:
            self.first_attempt_done.set()

    def _give_up_if_past(self, deadline: float, last_error: str) -> bool:
        if trio.current_time() < deadline:
            return False
        self.fatal = BridgeExit(
            ExitCode.CONNECTION,
            f"ERROR: gave up reconnecting to {self.url} after "
            f"{self.options.reconnect_max_secs:g} s; last attempt: {last_error}",
        )
        self.end(Ending.FATAL, self.fatal.message)
        return True

    async def _pause(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            await self.ended.wait()

    async def _connect_and_serve(self, first: bool) -> _Connection | None:
        """One connection, from opening to closing; None when the relay ended meanwhile.

        Raises:
            BridgeExit: the connection could not be opened.
        """
        manager = self.open_connection()
        connection: _Connection | None = None
        # Only opening is cancelled when the relay ends (end() cancels the attempt scope while
        # it is set); an open connection sees `ended` and is closed with a proper close frame.
        with trio.CancelScope() as scope:
            self.attempt_scope = scope
            if self.ended.is_set():
                scope.cancel()
            async with manager as socket:
                self.attempt_scope = None
                self.first_attempt_done.set()
                if not first:
                    logger.warning("reconnected to %s", self.url)
                connection = await self._run_connection(socket)
        self.attempt_scope = None
        if connection is None:
            return None
        return connection if connection.closed is not None else None

    async def _after_loss(self, connection: _Connection) -> bool:
        """Answer what was in flight; whether to reconnect (else the relay is ended)."""
        closed = connection.closed
        assert closed is not None
        cause = connection.cause = describe_close(closed, connection.socket)
        code = closed.rcvd.code if closed.rcvd is not None else None
        reconnecting = may_reconnect(code, enabled=self.options.reconnect)
        await self._connection_lost(cause, reconnecting=reconnecting)
        if code in REJECTED_CLOSE_CODES:
            reason = closed.rcvd.reason if closed.rcvd is not None else ""
            self.fatal = BridgeExit(
                ExitCode.AUTH,
                f"ERROR: the gateway at {self.url} rejected this connection (close code "
                f"{code}{': ' + reason if reason else ''}); not reconnecting. "
                f"{self.options.rejected_advice}",
            )
            self.end(Ending.FATAL, self.fatal.message)
            return False
        if not reconnecting:
            self.end(Ending.CONNECTION_LOST, cause)
            return False
        logger.warning("%s (%s); reconnecting", cause, self.url)
        self.outage = Outage(cause, retry_until=None)
        if self.state.prompts:
            self.prompt_held.set()
        return True

    async def _connection_lost(self, cause: str, *, reconnecting: bool) -> None:
        """Answer every request in flight: its outcome on the lost connection is unknown."""
        self.connection = None
        for line in self.state.connection_lost(cause, reconnecting=reconnecting):
            await self.outbox.send(line)
        self._woke()

    async def _run_connection(self, socket: GatewayConnection) -> _Connection | None:
        """Serve one connection until it closes or the relay ends (then close it properly);
        None when the relay ended before it could be used."""
        if self.state.phase is RelayPhase.ENDED:
            return None
        generation = self.state.connection_opened()
        connection = _Connection(socket, generation, trio.current_time())
        # Visible (not ready) at once, so that the IDE's answers can be matched.
        self.connection = connection
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump_gateway, connection, nursery.cancel_scope)
            nursery.start_soon(self._cancel_when_ended, nursery.cancel_scope)
            await self._replay(connection)
            await self._flush_held(connection)
        if connection.closed is None:
            code, reason = self._close_code()
            with trio.move_on_after(self.options.close_timeout):
                await socket.aclose(code, reason)
        return connection

    async def _cancel_when_ended(self, scope: trio.CancelScope) -> None:
        await self.ended.wait()
        scope.cancel()

    async def _replay(self, connection: _Connection) -> None:
        """Send the replay the state plans (initialize, then session/resume for every known
        session), each after the answer to the one before."""
        state = self.state
        request = state.start_replay()
        planned = request is not None
        with trio.move_on_after(self.options.replay_timeout) as scope:
            while request is not None:
                self.replay_answered = answered = trio.Event()
                try:
                    await connection.socket.send(request.text)
                except ConnectionClosed:
                    await trio.sleep_forever()  # the gateway pump ends this connection
                await answered.wait()
                request = state.advance_replay()
        if scope.cancelled_caught:
            logger.warning(
                "the gateway did not answer the replayed requests within %g s; continuing",
                self.options.replay_timeout,
            )
            state.replay_abandoned()
        elif planned:
            logger.info("resumed %d of %d sessions", state.resumed, state.to_resume)

    async def _flush_held(self, connection: _Connection) -> None:
        state = self.state
        if self.outage is not None:
            self.outage = None
            for line in state.prompts.reconnected():
                await self.outbox.send(line)
        while (outgoing := state.next_held()) is not None:
            await self._send(connection, outgoing)
            if connection.closed is not None:
                break
        if connection.closed is None:
            # No await between the last check and this: the stdin pump cannot slip a message
            # in ahead of the held ones.
            state.connection_ready()
            self._woke()

    async def _pump_gateway(self, connection: _Connection, scope: trio.CancelScope) -> None:
        socket = connection.socket
        state = self.state
        frame_received = state.frame_received
        while True:
            # Every frame one socket read completed goes to stdout in one write: one syscall
            # per read instead of one per (often tiny) session/update.
            try:
                frames = await socket.receive()
            except ConnectionClosed as exc:
                connection.closed = exc
                frames = []
            lines: list[bytes] = []
            for frame in frames:
                line = frame_received(frame)
                if line is None:
                    continue
                if line is REPLAY_ANSWERED:
                    self.replay_answered.set()
                    continue
                if self.trace:
                    logger.debug("← %s", line[:TRACE_CHARS].decode(errors="replace").rstrip())
                lines.append(line)
            if lines:
                await self.outbox.send(lines[0] if len(lines) == 1 else b"".join(lines))
            # Settled only once the replies are queued for stdout.
            if state.lines_queued():
                self._woke()
            if connection.closed is not None:
                logger.info("%s", describe_close(connection.closed, socket))
                if self.connection is connection:
                    self.connection = None
                state.connection_closed(connection.generation)
                scope.cancel()
                return


async def relay(
    open_connection: OpenConnection,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    *,
    url: str,
    options: RelayOptions,
) -> int:
    """Connect and relay until one side ends; see the module docstring.

    Returns the exit code: 0, or 128 + the signal number after SIGINT/SIGTERM.

    Raises:
        BridgeExit: the first connection failed, the connection was lost for good, or the
            gateway rejected the bridge.
    """
    outbox_send, outbox_recv = trio.open_memory_channel[bytes](DEFAULT_OUTBOX_LINES)
    bridge = _Relay(open_connection, outbox_send, url=url, options=options)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_stdout, stdout, outbox_recv, bridge.end)
        async with outbox_send:
            async with trio.open_nursery() as work:
                work.start_soon(bridge.manage_connections)
                with bridge.pumps:
                    async with trio.open_nursery() as pumps:
                        pumps.start_soon(bridge.pump_stdin, stdin)
                        pumps.start_soon(bridge.announce_held_prompts)
                        if options.handle_signals:
                            pumps.start_soon(_watch_signals, bridge)
            await bridge.answer_owed()
        # Leaving the nursery waits for the writer to flush every queued line.

    ending, cause = bridge.state.ending, bridge.state.cause
    if bridge.fatal is not None:
        raise bridge.fatal
    if ending is Ending.CONNECTION_LOST:
        raise BridgeExit(ExitCode.CONNECTION, f"ERROR: {cause} ({url}).")
    if ending is Ending.SIGNALLED:
        return 128 + bridge.signal_number
    logger.info("relay ended (%s); connection closed normally", ending)
    return int(ExitCode.OK)


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


async def _watch_signals(bridge: _Relay) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signal_number in signals:
            logger.info("received %s; closing", signal.Signals(signal_number).name)
            bridge.signal_number = signal_number
            bridge.end(Ending.SIGNALLED)
            return
