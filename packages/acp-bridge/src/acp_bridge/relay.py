"""The relay: stdin lines → WebSocket frames, frames → stdout lines, across reconnections.

Tasks (aesthetics notes §2.4.11), all in one nursery:

* the stdin pump reads lines, answers bad ones locally, records relayed request ids and
  sends each good line as one text frame, or holds it while there is no usable connection;
* the connection manager opens the connection and, after a drop, reconnects (issue 8):
  it replays the IDE's ``initialize`` and sends ``session/resume`` for every session seen
  so far, answering those internal requests itself, then sends the held frames, and only
  then lets the stdin pump send directly again; per connection it runs
* the gateway pump, which turns each frame into one stdout line, clears the ids of
  responses from the in-flight table and notes which sessions exist;
* the stdout writer is the only task that writes stdout; the others hand it lines through a
  bounded channel, so a slow IDE slows the gateway down instead of growing memory.

Only one task sends on a connection at a time: the manager while it is not yet "ready"
(replay, held frames), the stdin pump once it is.

How it ends (issues 7 §2 and 8):

* stdin EOF: stop reading, wait up to ``eof_grace`` for replies owed to relayed (or held)
  requests, answer any still missing with an error, close the WebSocket normally; exit 0;
* connection lost: every request in flight is answered with an error that names the cause
  (the session itself is kept by the gateway). With reconnection on (the default), the
  bridge reconnects with jittered exponential backoff, for at most ``reconnect_max_secs``;
  giving up, a 401, or a "rejected" close (1008) ends it with exit 1 (3 for auth);
  with ``--no-reconnect`` the first loss ends it with exit 1;
* stdout closed by the IDE: nobody is listening any more; close normally, exit 0;
* SIGINT/SIGTERM: close the WebSocket with "going away", exit 128 + signal number.
"""

from __future__ import annotations

import enum
import logging
import random
import signal
from collections import OrderedDict, deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Final

import trio
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode, Opcode
from websockets.trio.client import ClientConnection

from acp_bridge.errors import BridgeExit, ExitCode
from acp_bridge.gateway import DEFAULT_CLOSE_TIMEOUT_SECS, describe_close
from acp_bridge.messages import (
    Forward,
    FrameError,
    Kind,
    ReplyToClient,
    ReplyToGateway,
    StdinFramer,
    decode_object,
    encode_message,
    error_line,
    frame_to_line,
    peek,
    session_id_of,
    with_id,
)
from acp_bridge.stdio import DEFAULT_READ_CHUNK_BYTES
from acp_core import methods
from acp_core.errors import ErrorCode
from acp_core.framing import DEFAULT_MAX_LINE_BYTES
from acp_core.jsonrpc import RequestId

logger = logging.getLogger(__name__)

DEFAULT_EOF_GRACE_SECS: Final = 10.0
"""After stdin EOF, how long replies owed to requests already relayed are waited for."""
DEFAULT_RECONNECT_MAX_SECS: Final = 60.0
"""How long the bridge keeps trying to reconnect before it gives up (exit 1)."""
RECONNECT_FIRST_DELAY_SECS: Final = 0.1
RECONNECT_MAX_DELAY_SECS: Final = 5.0
"""Backoff between attempts doubles from the first delay up to this, with jitter."""
STABLE_CONNECTION_SECS: Final = 10.0
"""A connection that lasted this long resets the backoff and the give-up deadline."""
DEFAULT_REPLAY_TIMEOUT_SECS: Final = 10.0
"""How long the answers to the replayed initialize and session/resume are waited for."""
DEFAULT_MAX_HELD_MESSAGES: Final = 1000
DEFAULT_MAX_HELD_BYTES: Final = 32 * 1024 * 1024
"""IDE messages held while reconnecting; beyond either bound they are refused."""
DEFAULT_OUTBOX_LINES: Final = 64
"""Lines waiting for stdout before the gateway pump blocks (backpressure)."""
DEFAULT_MAX_WRITE_BATCH_BYTES: Final = 1024 * 1024
"""Queued lines are joined into one stdout write up to this size (fewer syscalls)."""
MAX_IN_FLIGHT_REQUESTS: Final = 100_000
"""Ids kept for requests awaiting a reply; beyond this the oldest are forgotten (a client
that never reads its replies must not grow the bridge without bound)."""
MAX_TRACKED_SESSIONS: Final = 10_000
MAX_TRACKED_SERVER_REQUESTS: Final = 10_000
BRIDGE_ERROR_CODE: Final = int(ErrorCode.INTERNAL_ERROR)
TRACE_CHARS: Final = 500
"""With --log-level debug, how much of each relayed message is logged."""
INTERNAL_ID_PREFIX: Final = "zeroclaw-acp-bridge:"
"""Ids of the bridge's own requests (replay) and of renamed gateway requests."""

# Close codes after which reconnecting cannot help (issue 8: 1008 means "rejected, stop").
REJECTED_CLOSE_CODES: Final = frozenset({int(CloseCode.POLICY_VIOLATION)})
BROKEN_CLOSE_CODES: Final = frozenset(
    {
        int(CloseCode.PROTOCOL_ERROR),
        int(CloseCode.UNSUPPORTED_DATA),
        int(CloseCode.INVALID_DATA),
        int(CloseCode.MANDATORY_EXTENSION),
    }
)
SESSION_METHODS_WITH_ID: Final = frozenset({methods.SESSION_LOAD, methods.SESSION_RESUME})
REPLAY_INPUT_METHODS: Final = frozenset(
    {methods.INITIALIZE, methods.SESSION_NEW, *SESSION_METHODS_WITH_ID}
)
"""Requests whose params the bridge keeps, to replay initialize and resume sessions."""


@dataclass(slots=True)
class _Owed:
    method: str
    session_id: str | None = None
    params: dict[str, Any] | None = None
    """session/new params (kept to resume the session with the same cwd)."""


class InFlight:
    """Requests relayed to the gateway and not yet answered."""

    def __init__(self, *, limit: int = MAX_IN_FLIGHT_REQUESTS) -> None:
        self._owed: dict[RequestId, _Owed] = {}
        self._limit = limit
        self._empty = trio.Event()
        self._empty.set()

    def __len__(self) -> int:
        return len(self._owed)

    def add(
        self,
        request_id: RequestId,
        method: str,
        session_id: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        if not self._owed:
            self._empty = trio.Event()
        elif len(self._owed) >= self._limit:
            forgotten = next(iter(self._owed))
            del self._owed[forgotten]
            logger.warning("more than %d requests in flight; forgot id %r", self._limit, forgotten)
        self._owed[request_id] = _Owed(method, session_id, params)

    def get(self, request_id: RequestId) -> _Owed | None:
        return self._owed.get(request_id)

    def settle(self, request_id: RequestId) -> _Owed | None:
        owed = self._owed.pop(request_id, None)
        if owed is not None and not self._owed:
            self._empty.set()
        return owed

    def drain(self) -> list[tuple[RequestId, _Owed]]:
        owed = list(self._owed.items())
        self._owed.clear()
        self._empty.set()
        return owed

    async def wait_empty(self) -> None:
        while self._owed:
            await self._empty.wait()


class Ending(enum.Enum):
    STDIN_EOF = "stdin closed"
    CONNECTION_LOST = "connection lost"
    STDOUT_CLOSED = "stdout closed"
    SIGNALLED = "signal"
    FATAL = "fatal"


@dataclass(slots=True)
class RelayOptions:
    eof_grace: float = DEFAULT_EOF_GRACE_SECS
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES
    handle_signals: bool = True
    reconnect: bool = True
    reconnect_max_secs: float = DEFAULT_RECONNECT_MAX_SECS
    max_held_messages: int = DEFAULT_MAX_HELD_MESSAGES
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES
    replay_timeout: float = DEFAULT_REPLAY_TIMEOUT_SECS
    close_timeout: float = 2 * DEFAULT_CLOSE_TIMEOUT_SECS
    """Outer bound on closing a connection when the relay ends (websockets has its own)."""
    rejected_advice: str = (
        "Check that the bridge's token is still paired (`zeroclaw-acp-bridge --check`)."
    )
    """What to do after a "rejected" close (1008): the credentials' own advice, as for a 401."""


@dataclass(slots=True)
class _ServerRequest:
    """A gateway → IDE request awaiting the IDE's answer."""

    generation: int
    method: str
    gateway_id: RequestId
    """The id the gateway used (the IDE may see a renamed one, see ``_relay_server_request``)."""


@dataclass(slots=True)
class _Connection:
    websocket: ClientConnection
    generation: int
    opened_at: float
    ready: bool = False
    """Replay and held frames are done: the stdin pump may send directly."""
    closed: ConnectionClosed | None = None
    cause: str = ""
    internal: dict[RequestId, trio.Event] = field(default_factory=dict)
    internal_errors: dict[RequestId, str] = field(default_factory=dict)


OpenConnection = Callable[[], AbstractAsyncContextManager[ClientConnection]]


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
        self.inflight = InFlight()
        self.held: deque[Forward | ReplyToGateway] = deque()
        self.held_bytes = 0
        self.held_empty = trio.Event()
        self.held_empty.set()
        self.connection: _Connection | None = None
        self.generation = 0
        self.sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Sessions created, loaded or resumed, with the params to resume them."""
        self.initialize: dict[str, Any] | None = None
        """The IDE's initialize request, replayed on each new connection."""
        self.server_requests: OrderedDict[RequestId, _ServerRequest] = OrderedDict()
        self.internal_ids = 0
        self.trace = logger.isEnabledFor(logging.DEBUG)
        self.pumps = trio.CancelScope()
        self.ended = trio.Event()
        self.attempt_scope: trio.CancelScope | None = None
        self.first_attempt_done = trio.Event()
        self.ending: Ending | None = None
        self.cause = ""
        self.fatal: BridgeExit | None = None
        self.signal_number = 0

    # --- ending ----------------------------------------------------------------------

    def end(self, ending: Ending, cause: str = "") -> None:
        if self.ending is None:
            self.ending, self.cause = ending, cause
        self.ended.set()
        self.pumps.cancel()
        if self.attempt_scope is not None:
            self.attempt_scope.cancel()

    def _close_code(self) -> tuple[int, str]:
        if self.ending in (Ending.SIGNALLED, Ending.FATAL):
            return int(CloseCode.GOING_AWAY), "bridge stopped"
        return int(CloseCode.NORMAL_CLOSURE), ""

    async def answer_owed(self) -> None:
        """Never leave a request silently unanswered: the IDE would wait for it forever."""
        owed = self.inflight.drain()
        held = [
            (action.request_id, _Owed(action.method))
            for action in self.held
            if isinstance(action, Forward) and action.method is not None
        ]
        self.held.clear()
        if self.ending is Ending.STDIN_EOF:
            message = (
                f"zeroclaw-acp-bridge: no reply within {self.options.eof_grace:g} s after "
                "stdin was closed; the bridge is exiting"
            )
            reason = "stdin_closed"
            if owed or held:
                logger.warning(
                    "stdin closed; %d replies still owed after %g s",
                    len(owed) + len(held),
                    self.options.eof_grace,
                )
        elif self.ending in (Ending.CONNECTION_LOST, Ending.FATAL):
            message = f"zeroclaw-acp-bridge: the bridge stopped before this request was sent: {self.cause}"
            reason = "connection_lost"
        else:
            return  # nobody is reading stdout, or we were told to stop
        for request_id, entry in [*owed, *held]:
            await self.outbox.send(
                error_line(
                    request_id,
                    BRIDGE_ERROR_CODE,
                    message,
                    {"bridge": reason, "method": entry.method},
                )
            )

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
        if self.inflight or self.held:
            logger.info(
                "stdin closed; waiting up to %g s for %d replies",
                self.options.eof_grace,
                len(self.inflight) + len(self.held),
            )
            with trio.move_on_after(self.options.eof_grace):
                while self.inflight or self.held:
                    if self.held:
                        await self.held_empty.wait()
                    else:
                        await self.inflight.wait_empty()
        self.end(Ending.STDIN_EOF)

    async def send_or_hold(self, action: Forward | ReplyToGateway) -> None:
        text = self._answer_for_this_connection(action)
        if text is None:
            return
        connection = self.connection
        if connection is None or not connection.ready:
            if not self._hold(action, text):
                await self._refuse(action)
            return
        await self._send(connection, action, text)

    def _answer_for_this_connection(self, action: Forward | ReplyToGateway) -> str | None:
        """The text to send, or None when it answers a gateway request from a lost connection
        (that request died with its connection, issue 8); renamed ids are restored."""
        if action.response_to is None:
            return action.text
        pending = self.server_requests.pop(action.response_to, None)
        if pending is None:
            return action.text  # not a request we relayed: let the gateway judge
        connection = self.connection
        if connection is None or pending.generation != connection.generation:
            logger.warning(
                "dropped the client's answer to %s %r: it was asked on a connection that has "
                "since been lost, and the gateway can no longer use it",
                pending.method,
                action.response_to,
            )
            return None
        if pending.gateway_id != action.response_to:
            return with_id(action.text, pending.gateway_id).decode()
        return action.text

    def _hold(self, action: Forward | ReplyToGateway, text: str) -> bool:
        """Keep a message until a connection is ready; False when the hold is full."""
        size = len(text)
        if (
            len(self.held) >= self.options.max_held_messages
            or self.held_bytes + size > self.options.max_held_bytes
        ):
            return False
        if not self.held:
            self.held_empty = trio.Event()
        if text is not action.text:
            action = (
                Forward(text, action.request_id, action.method)
                if isinstance(action, Forward)
                else ReplyToGateway(text, action.response_to)
            )
        self.held.append(action)
        self.held_bytes += size
        return True

    async def _refuse(self, action: Forward | ReplyToGateway) -> None:
        if isinstance(action, Forward) and action.method is not None:
            message = (
                f"zeroclaw-acp-bridge: the bridge is reconnecting to the gateway at {self.url} "
                f"and already holds {len(self.held)} messages; try again shortly"
            )
            line = error_line(
                action.request_id,
                BRIDGE_ERROR_CODE,
                message,
                {"bridge": "reconnecting", "method": action.method},
            )
            await self.outbox.send(line)
            return
        logger.warning("reconnecting and the hold is full: dropped %s", action.text[:200])

    async def _send(
        self, connection: _Connection, action: Forward | ReplyToGateway, text: str
    ) -> None:
        if isinstance(action, Forward) and action.method is not None:
            # Recorded before sending: the reply may arrive while send() waits.
            self._track_request(action)
        if self.trace:
            logger.debug("→ %s", text[:TRACE_CHARS])
        try:
            await connection.websocket.send(text)
        except ConnectionClosed:
            # The gateway pump sees the same closure; a request sent here is in flight and
            # is answered with the connection-lost error, anything else is lost with it.
            if not (isinstance(action, Forward) and action.method is not None):
                logger.warning("lost with the connection: %s", text[:200])

    def _track_request(self, action: Forward) -> None:
        """Record a request before it is sent, with what a reconnect will need from it."""
        method = action.method
        assert method is not None
        session_id: str | None = None
        params: dict[str, Any] | None = None
        if method in REPLAY_INPUT_METHODS:  # small messages: read whole
            body = decode_object(action.text) or {}
            raw_params = body.get("params")
            params = raw_params if isinstance(raw_params, dict) else {}
            candidate = params.get("sessionId")
            session_id = candidate if isinstance(candidate, str) else None
            if method == methods.INITIALIZE:
                self.initialize = body
        elif method.startswith("session/"):
            # Only the id: a session/prompt may carry megabytes of embedded resources.
            session_id = session_id_of(action.text)
            if method == methods.SESSION_CLOSE and session_id is not None:
                self.sessions.pop(session_id, None)
        self.inflight.add(action.request_id, method, session_id, params)

    # --- the gateway side ------------------------------------------------------------

    async def manage_connections(self) -> None:
        """Connect; after each loss, reconnect (unless told not to) until the relay ends.

        Runs outside the pumps' cancel scope: when the relay ends while connected, the
        connection is closed with a proper close frame rather than torn down by cancellation
        (websockets' own tasks live in the connection's context, inside this task).
        """
        first = True
        given_up_at: float | None = None
        attempt = 0
        try:
            while not self.ended.is_set():
                try:
                    lost = await self._connect_and_serve(first)
                except BridgeExit as exc:
                    if first or exc.code is ExitCode.AUTH or given_up_at is None:
                        self.fatal = exc
                        self.end(Ending.FATAL, exc.message)
                        return
                    last_error = exc.message.removeprefix("ERROR: ")
                    if self._give_up_if_past(given_up_at, last_error):
                        return
                    now = trio.current_time()
                    delay = min(_backoff(attempt), max(0.0, given_up_at - now))
                    attempt += 1
                    logger.info(
                        "reconnect attempt %d failed (%s); next in %.2f s",
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
                delay = _backoff(attempt)
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
            async with manager as websocket:
                self.attempt_scope = None
                self.first_attempt_done.set()
                if not first:
                    logger.warning("reconnected to %s", self.url)
                connection = await self._run_connection(websocket)
        self.attempt_scope = None
        if connection is None:
            return None
        return connection if connection.closed is not None else None

    async def _after_loss(self, connection: _Connection) -> bool:
        """Answer what was in flight; whether to reconnect (else the relay is ended)."""
        closed = connection.closed
        assert closed is not None
        cause = connection.cause = describe_close(closed, connection.websocket)
        code = closed.rcvd.code if closed.rcvd is not None else None
        reconnecting = self._should_reconnect(code)
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
        return True

    def _should_reconnect(self, close_code: int | None) -> bool:
        return (
            self.options.reconnect
            and close_code not in REJECTED_CLOSE_CODES
            and close_code not in BROKEN_CLOSE_CODES
        )

    async def _connection_lost(self, cause: str, *, reconnecting: bool) -> None:
        """Answer every request in flight: its outcome on the lost connection is unknown."""
        self.connection = None
        for request_id, owed in self.inflight.drain():
            kept = (
                f" Session {owed.session_id} is still there: the bridge is reconnecting, "
                "send the request again."
                if reconnecting and owed.session_id
                else " The bridge is reconnecting."
                if reconnecting
                else ""
            )
            turn = " during this prompt turn" if owed.method == methods.SESSION_PROMPT else ""
            message = (
                f"zeroclaw-acp-bridge: {cause} ({self.url}){turn} before this request was "
                f"answered; its outcome is unknown.{kept}"
            )
            data: dict[str, Any] = {"bridge": "connection_lost", "method": owed.method}
            if owed.session_id:
                data["sessionId"] = owed.session_id
            if reconnecting:
                data["reconnecting"] = True
            await self.outbox.send(error_line(request_id, BRIDGE_ERROR_CODE, message, data))

    async def _run_connection(self, websocket: ClientConnection) -> _Connection:
        """Serve one connection until it closes or the relay ends (then close it properly)."""
        self.generation += 1
        connection = _Connection(websocket, self.generation, trio.current_time())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump_gateway, connection, nursery.cancel_scope)
            nursery.start_soon(self._cancel_when_ended, nursery.cancel_scope)
            if self.generation > 1:
                await self._replay(connection)
            await self._flush_held(connection)
        if connection.closed is None:
            code, reason = self._close_code()
            with trio.move_on_after(self.options.close_timeout):
                await websocket.aclose(code, reason)
        return connection

    async def _cancel_when_ended(self, scope: trio.CancelScope) -> None:
        await self.ended.wait()
        scope.cancel()

    async def _replay(self, connection: _Connection) -> None:
        """Re-establish the IDE's context on a new connection before relaying anything else:
        its initialize, then session/resume for every known session (issue 8)."""
        requests: list[tuple[str, dict[str, Any]]] = []
        if self.initialize is not None:
            requests.append((methods.INITIALIZE, self.initialize))
        for session_id, params in self.sessions.items():
            resume = {
                "sessionId": session_id,
                **{k: v for k, v in params.items() if k != "sessionId"},
            }
            body = {"jsonrpc": "2.0", "method": methods.SESSION_RESUME, "params": resume}
            requests.append((session_id, body))
        resumed = 0
        to_resume = len(self.sessions)
        with trio.move_on_after(self.options.replay_timeout) as scope:
            for what, body in requests:
                self.internal_ids += 1
                internal_id = f"{INTERNAL_ID_PREFIX}{self.internal_ids}"
                done = trio.Event()
                connection.internal[internal_id] = done
                try:
                    await connection.websocket.send(
                        encode_message({**body, "id": internal_id}).decode()
                    )
                except ConnectionClosed:
                    await trio.sleep_forever()  # the gateway pump ends this connection
                await done.wait()
                error = connection.internal_errors.get(internal_id)
                if error is None:
                    resumed += what != methods.INITIALIZE
                elif what == methods.INITIALIZE:
                    logger.warning("replayed initialize failed: %s", error)
                else:
                    logger.warning("could not resume session %s: %s", what, error)
                    self.sessions.pop(what, None)
        if scope.cancelled_caught:
            logger.warning(
                "the gateway did not answer the replayed requests within %g s; continuing",
                self.options.replay_timeout,
            )
        elif requests:
            logger.info("resumed %d of %d sessions", resumed, to_resume)

    async def _flush_held(self, connection: _Connection) -> None:
        while self.held:
            action = self.held.popleft()
            self.held_bytes -= len(action.text)
            await self._send(connection, action, action.text)
            if connection.closed is not None:
                break
        if connection.closed is None:
            # No await between the last check and this: the stdin pump cannot slip a message
            # in ahead of the held ones.
            connection.ready = True
            self.connection = connection
            self.held_empty.set()

    async def _pump_gateway(self, connection: _Connection, scope: trio.CancelScope) -> None:
        websocket = connection.websocket
        self.connection = connection  # visible (not ready) so answers can be matched
        take_ready = _ready_message_taker(websocket)
        while True:
            # Frames websockets has already received are gathered into one stdout write:
            # one syscall per socket read instead of one per (often tiny) session/update.
            batch: list[bytes] = []
            batch_bytes = 0
            answered: list[RequestId] = []
            try:
                frame: bytes | None = await websocket.recv(decode=False)
            except ConnectionClosed as exc:
                connection.closed = exc
                frame = None
            while frame is not None:
                line = self._line_for(connection, frame, answered)
                if line is not None:
                    if self.trace:
                        logger.debug("← %s", line[:TRACE_CHARS].decode(errors="replace").rstrip())
                    batch.append(line)
                    batch_bytes += len(line)
                if batch_bytes >= DEFAULT_MAX_WRITE_BATCH_BYTES:
                    break
                frame = take_ready()
            if batch:
                await self.outbox.send(batch[0] if len(batch) == 1 else b"".join(batch))
            # Settled only once the reply is queued for stdout: an emptied table may end the
            # EOF grace period, and the reply must not be lost to that.
            for request_id in answered:
                self.inflight.settle(request_id)
            if connection.closed is not None:
                logger.info("%s", describe_close(connection.closed, websocket))
                if self.connection is connection:
                    self.connection = None
                scope.cancel()
                return

    def _line_for(
        self, connection: _Connection, frame: bytes, answered: list[RequestId]
    ) -> bytes | None:
        """The stdout line for a frame (None: not for the IDE), noting what it answers."""
        peeked = peek(frame)
        if peeked.kind is Kind.RESPONSE:
            done = connection.internal.pop(peeked.id, None)
            if done is not None:  # the answer to a replayed request: the bridge's own
                if peeked.is_error:
                    error = (decode_object(frame) or {}).get("error")
                    connection.internal_errors[peeked.id] = str(error)
                done.set()
                return None
            answered.append(peeked.id)
        elif peeked.kind is Kind.REQUEST and peeked.method is not None:
            frame = self._relay_server_request(connection, frame, peeked.id, peeked.method)
        try:
            line = frame_to_line(frame)
        except FrameError as exc:
            logger.error("dropped a frame from the gateway: %s", exc)
            return None
        if peeked.kind is Kind.RESPONSE and not peeked.is_error:
            self._note_session(peeked.id, frame)
        return line

    def _relay_server_request(
        self, connection: _Connection, frame: bytes, gateway_id: RequestId, method: str
    ) -> bytes:
        """Remember a gateway → IDE request; rename it if its id is still pending from a lost
        connection (gateways number these per connection, so ids repeat after a reconnect and
        the IDE's late answer to the old one must not be taken for an answer to the new)."""
        ide_id = gateway_id
        stale = self.server_requests.get(gateway_id)
        if stale is not None and stale.generation != connection.generation:
            ide_id = f"{INTERNAL_ID_PREFIX}{connection.generation}:{gateway_id}"
            frame = with_id(frame, ide_id)
        if len(self.server_requests) >= MAX_TRACKED_SERVER_REQUESTS:
            self.server_requests.popitem(last=False)
        self.server_requests[ide_id] = _ServerRequest(connection.generation, method, gateway_id)
        return frame

    def _note_session(self, request_id: RequestId, frame: bytes) -> None:
        """Track the sessions to resume after a reconnect, from successful replies."""
        owed = self.inflight.get(request_id)
        if owed is None:
            return
        session_id = owed.session_id
        if owed.method == methods.SESSION_NEW:
            result = (decode_object(frame) or {}).get("result")
            candidate = result.get("sessionId") if isinstance(result, dict) else None
            session_id = candidate if isinstance(candidate, str) else None
        elif owed.method not in SESSION_METHODS_WITH_ID:
            return
        if session_id is None:
            return
        if len(self.sessions) >= MAX_TRACKED_SESSIONS:
            self.sessions.popitem(last=False)
        params = owed.params or {}
        self.sessions[session_id] = {k: params[k] for k in ("cwd", "mcpServers") if k in params}


def _backoff(attempt: int) -> float:
    """Jittered exponential backoff: about 0.1, 0.2, 0.4 ... s, capped, times 0.5-1.0."""
    delay: float = min(RECONNECT_MAX_DELAY_SECS, RECONNECT_FIRST_DELAY_SECS * 2.0**attempt)
    return delay * random.uniform(0.5, 1.0)  # jitter, not cryptography


def _ready_message_taker(websocket: ClientConnection) -> Callable[[], bytes | None]:
    """A function returning the next message websockets has already received, or None.

    ``recv()`` costs a trip through the trio scheduler per message even when the message is
    waiting (the channel's receive always yields); with small session/update frames that
    trip was half the relay's time. This takes a waiting single-frame message straight
    from websockets' trio ``Assembler`` queue, as ``Assembler.get`` would (including its
    flow control, ``maybe_resume``), and leaves everything else to ``recv()``: fragmented
    messages, an empty queue, a ``recv()`` in progress. It reads the queue the way
    websockets' own flow control does (``send_frames._state.data``); should a future
    version rename any of it, the taker always answers None and the relay just uses
    ``recv()``.
    """
    assembler = getattr(websocket, "recv_messages", None)
    receive = getattr(assembler, "recv_frames", None)
    state = getattr(getattr(assembler, "send_frames", None), "_state", None)
    waiting = getattr(state, "data", None)
    resume = getattr(assembler, "maybe_resume", None)
    if (
        assembler is None
        or not isinstance(receive, trio.MemoryReceiveChannel)
        or not isinstance(waiting, deque)
        or not callable(resume)
    ):
        return lambda: None

    def take() -> bytes | None:
        if not waiting or assembler.get_in_progress:
            return None
        head = waiting[0]
        if not head.fin or head.opcode not in _MESSAGE_OPCODES:
            return None
        try:
            frame = receive.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            return None
        resume()
        return bytes(frame.data)

    return take


_MESSAGE_OPCODES: Final = frozenset({Opcode.TEXT, Opcode.BINARY})


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
    state = _Relay(open_connection, outbox_send, url=url, options=options)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_write_stdout, stdout, outbox_recv, state.end)
        async with outbox_send:
            async with trio.open_nursery() as work:
                work.start_soon(state.manage_connections)
                with state.pumps:
                    async with trio.open_nursery() as pumps:
                        pumps.start_soon(state.pump_stdin, stdin)
                        if options.handle_signals:
                            pumps.start_soon(_watch_signals, state)
            await state.answer_owed()
        # Leaving the nursery waits for the writer to flush every queued line.

    if state.fatal is not None:
        raise state.fatal
    if state.ending is Ending.CONNECTION_LOST:
        raise BridgeExit(ExitCode.CONNECTION, f"ERROR: {state.cause} ({url}).")
    if state.ending is Ending.SIGNALLED:
        return 128 + state.signal_number
    logger.info("relay ended (%s); connection closed normally", state.ending)
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


async def _watch_signals(state: _Relay) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signal_number in signals:
            logger.info("received %s; closing", signal.Signals(signal_number).name)
            state.signal_number = signal_number
            state.end(Ending.SIGNALLED)
            return
