"""The relay's bookkeeping as a state machine: events in, actions out, no I/O.

Rule 1 (as in h11's ``_state.py``): the relay's phase changes only through
``relay_phase.next_phase`` and its table of moves, which also describes the phases; a move
the table does not list raises ``RelayStateError``. Rule 2: this file never calls into the
I/O side. Every method returns what the trio tasks in ``acp_bridge.relay`` must do (send,
write, wake a waiter), and they do it.

Besides the phase, ``RelayState`` knows which requests are in flight, which IDE messages are
held, which sessions exist, the IDE's ``initialize``, the gateway → IDE requests awaiting an
answer (and the ids they were renamed to), and which held prompts the IDE was told about.

Events (method calls) and what they return:

* ``client_message(action)``: a ``Forward`` or ``ReplyToGateway`` from ``StdinFramer``.
  Returns ``SendToGateway`` (send now; a request is already recorded as in flight),
  ``WriteToClient`` (the hold is full: this error line answers the request), or None (held
  until READY, or dropped: an answer to a gateway request that died with its connection).
* ``connection_opened()``: DISCONNECTED → REPLAYING (→ FLUSHING at once when there is
  nothing to replay); returns the connection's generation. ``start_replay()`` and, after
  each answer, ``advance_replay()`` return the next replayed request, or None when the
  replay is over (→ FLUSHING); ``replay_abandoned()`` gives up waiting (→ FLUSHING).
  ``next_held()`` returns the held messages one at a time as ``SendToGateway``, and
  ``connection_ready()`` says they are all sent (→ READY).
* ``frame_received(frame)``: one gateway frame. Returns the stdout line (``bytes``), None
  (not for the IDE), or ``REPLAY_ANSWERED`` (the answer the replay waits for has arrived).
  This is the per-frame path, hence a bare ``bytes`` rather than an action object. What
  the IDE must never see is dropped with a log line: a frame that is not a JSON-RPC object
  (``messages.peek``'s ``Kind.OTHER``: not an object, an id that is not a string or number,
  a response without exactly one of result and error) and a second response to a request
  already answered.
* ``lines_queued()``: the lines for the frames fed so far are queued for stdout; the
  requests they answer leave the in-flight table only now (an emptied table may end the
  EOF grace period, and the reply must not be lost to that). Returns True when nothing is
  in flight any more.
* ``connection_closed(generation)`` / ``connection_lost(cause, reconnecting=...)``: →
  DISCONNECTED; the second returns the error lines answering every request that was in
  flight (its outcome is unknown).
* ``held_prompt_notices(outage)``: while DISCONNECTED, a ``session/update`` line for each
  held ``session/prompt`` not yet announced, telling the user why nothing happens
  (``prompts.reconnected()``: the follow-up lines once the connection is back).
* ``end(ending, cause)``: → ENDED (True the first time); ``abandon(message, reason)`` ends
  too and returns the error lines answering every request still in flight or held.
"""

from __future__ import annotations

import enum
import logging
from collections import OrderedDict, deque
from typing import Any, Final, NamedTuple

import msgspec

from acp_bridge.inflight import InFlightTable
from acp_bridge.messages import (
    Forward,
    FrameError,
    Kind,
    ReplyToGateway,
    decode_object,
    encode_message,
    error_line,
    frame_to_line,
    peek,
    session_id_of,
    with_id,
    with_shared_filesystem,
)
from acp_bridge.notices import HeldPrompts
from acp_bridge.relay_phase import Ending, RelayEvent, RelayPhase, RelayStateError, next_phase
from acp_core import methods
from acp_core.errors import ErrorCode
from acp_core.jsonrpc import RequestId

# The relay's log lines keep one logger name, whichever half of the relay writes them.
logger = logging.getLogger("acp_bridge.relay")

MAX_TRACKED_SESSIONS: Final = 10_000
MAX_TRACKED_SERVER_REQUESTS: Final = 10_000
MAX_REMEMBERED_ANSWERS: Final = 10_000
"""Ids of the latest answered requests, kept to drop a gateway's duplicate response."""
DROPPED_FRAME_EXCERPT_CHARS: Final = 200
BRIDGE_ERROR_CODE: Final = int(ErrorCode.INTERNAL_ERROR)
INTERNAL_ID_PREFIX: Final = "zeroclaw-acp-bridge:"
"""Ids of the bridge's own requests (replay) and of renamed gateway requests."""
SESSION_METHODS_WITH_ID: Final = frozenset({methods.SESSION_LOAD, methods.SESSION_RESUME})
SESSION_OPENING_METHODS: Final = frozenset({methods.SESSION_NEW, methods.SESSION_FORK})
"""Requests whose result names a new session (a fork is one too)."""
REPLAY_INPUT_METHODS: Final = frozenset(
    {methods.INITIALIZE, *SESSION_OPENING_METHODS, *SESSION_METHODS_WITH_ID}
)
"""Requests whose params the bridge keeps, to replay initialize and resume sessions."""
RESUMED_SESSION_PARAMS: Final = ("cwd", "mcpServers")
"""What of a session/new, session/fork, session/load or session/resume is kept to resume
the session."""


class SendToGateway(NamedTuple):
    """Send ``text`` as one text frame on the current connection.

    ``is_request``: a request recorded as in flight (if the connection turns out closed, the
    connection-lost error answers it; anything else is simply lost with the connection).
    """

    text: str
    is_request: bool = False


class WriteToClient(NamedTuple):
    """Write ``line`` (newline-terminated) to stdout."""

    line: bytes


class ReplayAnswered(enum.Enum):
    """``frame_received``'s answer when the frame answers the replayed request awaited."""

    ANSWERED = "answered"


REPLAY_ANSWERED: Final = ReplayAnswered.ANSWERED

ClientAction = SendToGateway | WriteToClient | None
ClientMessage = Forward | ReplyToGateway


class ServerRequest(msgspec.Struct):
    """A gateway → IDE request awaiting the IDE's answer."""

    generation: int
    method: str
    gateway_id: RequestId
    """The id the gateway used (the IDE may see a renamed one, see ``_relay_server_request``)."""


class _ReplayStep(NamedTuple):
    session_id: str | None
    """None for the replayed initialize."""
    body: dict[str, Any]


class _Replay(msgspec.Struct):
    """The replay on the current connection (REPLAYING)."""

    steps: deque[_ReplayStep]
    awaited_id: RequestId = None
    """The id of the replayed request sent and not yet answered."""
    awaited_step: _ReplayStep | None = None
    error: str | None = None
    """The error answering the awaited request, once it has arrived."""


class RelayState:
    """See the module docstring."""

    def __init__(
        self,
        *,
        url: str,
        max_held_messages: int,
        max_held_bytes: int,
        shared_filesystem: bool = False,
    ) -> None:
        self.url = url
        self.shared_filesystem = shared_filesystem
        """The IDE's ``initialize`` says it shares the gateway's filesystem (added here)."""
        self.max_held_messages = max_held_messages
        self.max_held_bytes = max_held_bytes
        self.phase = RelayPhase.DISCONNECTED
        self.ending: Ending | None = None
        self.cause = ""
        """What ended the relay, in words (for the exit message)."""
        self.inflight = InFlightTable()
        self.held: deque[ClientMessage] = deque()
        self.held_bytes = 0
        self.sessions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        """Sessions created, loaded or resumed, with the params to resume them."""
        self.initialize: dict[str, Any] | None = None
        """The IDE's initialize request, replayed on each new connection."""
        self.server_requests: OrderedDict[RequestId, ServerRequest] = OrderedDict()
        self.generation = 0
        """Connections opened so far; the current one's number."""
        self._internal_ids = 0
        self._replay = _Replay(deque())
        self._late_replay_id: RequestId = None
        """A replayed request given up on: its answer, if it comes, is the bridge's own."""
        self.resumed = 0
        """Sessions the last replay resumed, of ``to_resume``."""
        self.to_resume = 0
        self._answered: set[RequestId] = set()
        """Ids answered by the frames fed since the last ``lines_queued``."""
        self._answered_before: OrderedDict[RequestId, None] = OrderedDict()
        """Ids already answered (latest ``MAX_REMEMBERED_ANSWERS``), oldest first."""
        self.prompts = HeldPrompts()
        """Held session/prompt requests, and which the user was told about."""

    # --- the phase -------------------------------------------------------------------

    def _move(self, event: RelayEvent) -> RelayPhase:
        self.phase = next_phase(self.phase, event)
        return self.phase

    @property
    def connected(self) -> bool:
        """A connection is open (possibly still replaying or flushing)."""
        return self.phase in (RelayPhase.REPLAYING, RelayPhase.FLUSHING, RelayPhase.READY)

    @property
    def ready(self) -> bool:
        """Client messages are sent directly."""
        return self.phase is RelayPhase.READY

    @property
    def owes_replies(self) -> bool:
        """Some request is in flight or held: the IDE is still owed a reply."""
        return bool(self.inflight) or bool(self.held)

    def end(self, ending: Ending, cause: str = "") -> bool:
        """→ ENDED; True the first time (the first ending and cause are kept)."""
        if self.phase is RelayPhase.ENDED:
            return False
        self._move(RelayEvent.END)
        self.ending, self.cause = ending, cause
        return True

    # --- the client side -------------------------------------------------------------

    def client_message(self, action: ClientMessage) -> ClientAction:
        """What to do with a message from the client (see the module docstring)."""
        if (
            self.shared_filesystem
            and isinstance(action, Forward)
            and action.method == methods.INITIALIZE
        ):
            action = Forward(with_shared_filesystem(action.text), action.request_id, action.method)
        text = self._answer_for_this_connection(action)
        if text is None:
            return None
        if not self.ready:
            if self._hold(action, text):
                return None
            return self._refuse(action)
        return self._outgoing(action, text)

    def _answer_for_this_connection(self, action: ClientMessage) -> str | None:
        """The text to send, or None when it answers a gateway request from a lost connection
        (that request died with its connection); renamed ids are restored."""
        if action.response_to is None:
            return action.text
        pending = self.server_requests.pop(action.response_to, None)
        if pending is None:
            return action.text  # not a request we relayed: let the gateway judge
        if not self.connected or pending.generation != self.generation:
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

    def _hold(self, action: ClientMessage, text: str) -> bool:
        """Keep a message until a connection is ready; False when the hold is full."""
        size = len(text)
        if len(self.held) >= self.max_held_messages or self.held_bytes + size > self.max_held_bytes:
            return False
        if text is not action.text:
            action = (
                Forward(text, action.request_id, action.method)
                if isinstance(action, Forward)
                else ReplyToGateway(text, action.response_to)
            )
        self.held.append(action)
        self.held_bytes += size
        if isinstance(action, Forward) and action.method == methods.SESSION_PROMPT:
            session_id = session_id_of(text)
            if session_id is not None:
                self.prompts.held(session_id)
        return True

    def _refuse(self, action: ClientMessage) -> WriteToClient | None:
        if isinstance(action, Forward) and action.method is not None:
            message = (
                f"zeroclaw-acp-bridge: the bridge is reconnecting to the gateway at {self.url} "
                f"and already holds {len(self.held)} messages; try again shortly"
            )
            return WriteToClient(
                error_line(
                    action.request_id,
                    BRIDGE_ERROR_CODE,
                    message,
                    {"bridge": "reconnecting", "method": action.method},
                )
            )
        logger.warning("reconnecting and the hold is full: dropped %s", action.text[:200])
        return None

    def _outgoing(self, action: ClientMessage, text: str) -> SendToGateway:
        if isinstance(action, Forward) and action.method is not None:
            # Recorded before sending: the reply may arrive while the send waits.
            self._track_request(action, action.method)
            return SendToGateway(text, True)
        return SendToGateway(text)

    def _track_request(self, action: Forward, method: str) -> None:
        """Record a request before it is sent, with what a reconnect will need from it."""
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
        # The IDE may reuse an id once it was answered: its next answer is no duplicate.
        self._answered_before.pop(action.request_id, None)
        self.inflight.add(action.request_id, method, session_id, params)

    # --- a connection's life ---------------------------------------------------------

    def connection_opened(self) -> int:
        """DISCONNECTED → REPLAYING (→ FLUSHING with nothing to replay); the generation."""
        self._move(RelayEvent.OPENED)
        self.generation += 1
        self._answered.clear()
        steps: deque[_ReplayStep] = deque()
        if self.initialize is not None:
            steps.append(_ReplayStep(None, self.initialize))
        for session_id, params in self.sessions.items():
            resume = {
                "sessionId": session_id,
                **{k: v for k, v in params.items() if k != "sessionId"},
            }
            body = {"jsonrpc": "2.0", "method": methods.SESSION_RESUME, "params": resume}
            steps.append(_ReplayStep(session_id, body))
        self._replay = _Replay(steps)
        self.resumed = 0
        self.to_resume = len(self.sessions)
        if not steps:
            self._move(RelayEvent.REPLAY_OVER)
        return self.generation

    def start_replay(self) -> SendToGateway | None:
        """The first request re-establishing the IDE's context on a reconnection (None: none
        to send): its initialize, then session/resume for every known session."""
        if self.phase is not RelayPhase.REPLAYING or self._replay.awaited_step is not None:
            return None
        return self._next_replay_request()

    def advance_replay(self) -> SendToGateway | None:
        """After ``REPLAY_ANSWERED``: take in the answer, return the next request (None: the
        replay is over, → FLUSHING)."""
        replay = self._replay
        step = replay.awaited_step
        if self.phase is not RelayPhase.REPLAYING or step is None:
            return None
        replay.awaited_step = None
        if replay.error is None:
            self.resumed += step.session_id is not None
        elif step.session_id is None:
            logger.warning("replayed initialize failed: %s", replay.error)
        else:
            logger.warning("could not resume session %s: %s", step.session_id, replay.error)
            self.sessions.pop(step.session_id, None)
        return self._next_replay_request()

    def replay_abandoned(self) -> None:
        """The replay's answers took too long: REPLAYING → FLUSHING without them."""
        if self.phase is RelayPhase.REPLAYING:
            self._late_replay_id = self._replay.awaited_id
            self._replay = _Replay(deque())
            self._move(RelayEvent.REPLAY_OVER)

    def _next_replay_request(self) -> SendToGateway | None:
        replay = self._replay
        if not replay.steps:
            self._move(RelayEvent.REPLAY_OVER)
            return None
        step = replay.steps.popleft()
        self._internal_ids += 1
        internal_id = f"{INTERNAL_ID_PREFIX}{self._internal_ids}"
        replay.awaited_id, replay.awaited_step, replay.error = internal_id, step, None
        return SendToGateway(encode_message({**step.body, "id": internal_id}).decode())

    def next_held(self) -> SendToGateway | None:
        """While FLUSHING, the next held message to send (its request now in flight)."""
        if self.phase is not RelayPhase.FLUSHING or not self.held:
            return None
        action = self.held.popleft()
        self.held_bytes -= len(action.text)
        if isinstance(action, Forward) and action.method == methods.SESSION_PROMPT:
            self.prompts.sent(session_id_of(action.text) or "")
        return self._outgoing(action, action.text)

    def connection_ready(self) -> None:
        """Every held message was sent: FLUSHING → READY."""
        if self.held:
            raise RelayStateError(f"{len(self.held)} held messages were not sent yet")
        self._move(RelayEvent.HELD_SENT)

    def connection_closed(self, generation: int) -> None:
        """The gateway side saw connection ``generation`` close: → DISCONNECTED."""
        if generation == self.generation:
            self._disconnected()

    def _disconnected(self) -> None:
        self._move(RelayEvent.CLOSED)
        self._answered.clear()
        self._replay = _Replay(deque())

    def connection_lost(self, cause: str, *, reconnecting: bool) -> list[bytes]:
        """Answer every request in flight: its outcome on the lost connection is unknown."""
        self._disconnected()
        lines: list[bytes] = []
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
            lines.append(error_line(request_id, BRIDGE_ERROR_CODE, message, data))
        return lines

    def abandon(self, message: str, reason: str) -> list[bytes]:
        """→ ENDED; error lines for every request in flight or held."""
        self.end(Ending.FATAL, message)
        owed = [(request_id, entry.method) for request_id, entry in self.inflight.drain()]
        held = [
            (action.request_id, action.method)
            for action in self.held
            if isinstance(action, Forward) and action.method is not None
        ]
        self.held.clear()
        self.held_bytes = 0
        self.prompts.clear()
        return [
            error_line(request_id, BRIDGE_ERROR_CODE, message, {"bridge": reason, "method": method})
            for request_id, method in [*owed, *held]
        ]

    def held_prompt_notices(self, outage: str) -> list[bytes]:
        """While DISCONNECTED: a line for each held prompt not yet announced, saying
        ``outage`` (see ``acp_bridge.notices``)."""
        if self.phase is not RelayPhase.DISCONNECTED:
            return []
        return self.prompts.announce(outage)

    # --- the gateway side ------------------------------------------------------------

    def frame_received(self, frame: bytes) -> bytes | ReplayAnswered | None:
        """The stdout line for a frame (None: not for the IDE), noting what it answers."""
        peeked = peek(frame)
        kind = peeked.kind
        if kind is Kind.OTHER:
            _log_dropped(frame, "not a JSON-RPC request, notification or response with a usable id")
            return None
        if kind is Kind.RESPONSE and peeked.id is not None:
            response_to = peeked.id
            replay = self._replay
            if replay.awaited_id is not None and replay.awaited_id == response_to:
                # The answer to a replayed request: the bridge's own.
                replay.awaited_id = None
                if peeked.is_error:
                    replay.error = str((decode_object(frame) or {}).get("error"))
                return REPLAY_ANSWERED
            if self._late_replay_id is not None and self._late_replay_id == response_to:
                self._late_replay_id = None
                logger.info("the late answer to a replayed request arrived; dropped")
                return None
            if response_to in self._answered or (
                response_to in self._answered_before and self.inflight.get(response_to) is None
            ):
                _log_dropped(frame, f"a second response to request {response_to!r}")
                return None
            self._answered.add(response_to)
        elif kind is Kind.REQUEST and peeked.method is not None:
            frame = self._relay_server_request(frame, peeked.id, peeked.method)
        try:
            line = frame_to_line(frame)
        except FrameError as exc:
            logger.error("dropped a frame from the gateway: %s", exc)
            return None
        if kind is Kind.RESPONSE and not peeked.is_error:
            self._note_session(peeked.id, frame)
        return line

    def lines_queued(self) -> bool:
        """The lines for the frames fed so far are queued for stdout: settle the requests
        they answer. True when that left nothing in flight (a waiter may wake)."""
        answered = self._answered
        if not answered:
            return False
        settle = self.inflight.settle
        remember = self._remember_answered
        for request_id in answered:
            settle(request_id)
            remember(request_id)
        answered.clear()
        return not self.inflight

    def _remember_answered(self, request_id: RequestId) -> None:
        remembered = self._answered_before
        remembered[request_id] = None
        remembered.move_to_end(request_id)
        if len(remembered) > MAX_REMEMBERED_ANSWERS:
            remembered.popitem(last=False)

    def _relay_server_request(self, frame: bytes, gateway_id: RequestId, method: str) -> bytes:
        """Remember a gateway → IDE request; rename it if its id is still pending from a lost
        connection (gateways number these per connection, so ids repeat after a reconnect and
        the IDE's late answer to the old one must not be taken for an answer to the new)."""
        ide_id = gateway_id
        stale = self.server_requests.get(gateway_id)
        if stale is not None and stale.generation != self.generation:
            ide_id = f"{INTERNAL_ID_PREFIX}{self.generation}:{gateway_id}"
            frame = with_id(frame, ide_id)
        if len(self.server_requests) >= MAX_TRACKED_SERVER_REQUESTS:
            self.server_requests.popitem(last=False)
        self.server_requests[ide_id] = ServerRequest(self.generation, method, gateway_id)
        return frame

    def _note_session(self, request_id: RequestId, frame: bytes) -> None:
        """Track the sessions to resume after a reconnect, from successful replies."""
        owed = self.inflight.get(request_id)
        if owed is None:
            return
        session_id = owed.session_id
        if owed.method in SESSION_OPENING_METHODS:
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
        self.sessions[session_id] = {k: params[k] for k in RESUMED_SESSION_PARAMS if k in params}


def _log_dropped(frame: bytes, reason: str) -> None:
    """Log a gateway frame the IDE must not see."""
    excerpt = frame[:DROPPED_FRAME_EXCERPT_CHARS].decode("utf-8", errors="replace")
    logger.warning("dropped a frame from the gateway (%s): %s", reason, excerpt)
