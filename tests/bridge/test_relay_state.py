"""The relay's state machine alone: events in, actions out, no trio and no sockets."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import acp_bridge.inflight
import acp_bridge.notices
import acp_bridge.relay_phase
import acp_bridge.relay_state
from acp_bridge.messages import Forward, ReplyToGateway, classify_line
from acp_bridge.notices import Outage
from acp_bridge.relay_phase import (
    TRANSITIONS,
    Ending,
    RelayEvent,
    RelayPhase,
    RelayStateError,
    next_phase,
)
from acp_bridge.relay_state import (
    INTERNAL_ID_PREFIX,
    REPLAY_ANSWERED,
    RelayState,
    SendToGateway,
    WriteToClient,
)
from acp_core.jsonrpc import RequestId

URL = "ws://127.0.0.1:1/acp"
SESSION = "sess-1"


def _state(*, max_held_messages: int = 100, max_held_bytes: int = 1 << 20) -> RelayState:
    return RelayState(url=URL, max_held_messages=max_held_messages, max_held_bytes=max_held_bytes)


def _client(body: dict[str, Any]) -> Forward | ReplyToGateway:
    """What StdinFramer makes of one stdin line holding ``body``."""
    [action] = classify_line(json.dumps({"jsonrpc": "2.0", **body}))
    assert isinstance(action, Forward | ReplyToGateway)
    return action


def _request(request_id: RequestId, method: str, params: dict[str, Any] | None = None) -> Any:
    return _client({"id": request_id, "method": method, "params": params or {}})


def _frame(body: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **body}).encode()


def _result(request_id: RequestId, result: Any = None) -> bytes:
    return _frame({"id": request_id, "result": result if result is not None else {}})


def _error(request_id: RequestId, message: str = "no") -> bytes:
    return _frame({"id": request_id, "error": {"code": -32000, "message": message}})


def _sent(action: object) -> dict[str, Any]:
    assert isinstance(action, SendToGateway), action
    body = json.loads(action.text)
    assert isinstance(body, dict)
    return body


def _written(line: object) -> dict[str, Any]:
    assert isinstance(line, bytes), line
    assert line.endswith(b"\n")
    body = json.loads(line)
    assert isinstance(body, dict)
    return body


def _connect_first(state: RelayState) -> None:
    assert state.connection_opened() == 1
    assert state.next_held() is None
    state.connection_ready()


def _reply(state: RelayState, frame: bytes) -> object:
    """A gateway frame whose line is then queued for stdout."""
    line = state.frame_received(frame)
    state.lines_queued()
    return line


@pytest.mark.parametrize(
    "module",
    [acp_bridge.relay_state, acp_bridge.relay_phase, acp_bridge.inflight, acp_bridge.notices],
)
def test_the_state_modules_do_no_io(module: ModuleType) -> None:
    assert module.__file__ is not None
    source = Path(module.__file__).read_text()
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            imported.add(node.module.split(".")[0])
    assert imported & {"trio", "websockets", "socket", "asyncio", "anyio", "time"} == set()


class TestInFlight:
    def test_a_request_sent_is_in_flight_until_its_reply_is_queued_for_stdout(self) -> None:
        state = _state()
        _connect_first(state)
        out = state.client_message(_request(7, "session/prompt", {"sessionId": SESSION}))
        assert isinstance(out, SendToGateway)
        assert out.is_request
        assert _sent(out)["id"] == 7
        owed = state.inflight.get(7)
        assert owed is not None
        assert (owed.method, owed.session_id) == ("session/prompt", SESSION)
        line = state.frame_received(_result(7, {"stopReason": "end_turn"}))
        assert _written(line)["result"] == {"stopReason": "end_turn"}
        assert state.owes_replies  # the reply is not queued for stdout yet
        state.lines_queued()
        assert not state.owes_replies
        assert state.inflight.get(7) is None

    def test_notifications_and_client_responses_are_not_tracked(self) -> None:
        state = _state()
        _connect_first(state)
        out = state.client_message(_client({"method": "session/cancel", "params": {}}))
        assert out == SendToGateway('{"jsonrpc": "2.0", "method": "session/cancel", "params": {}}')
        out = state.client_message(_client({"id": 3, "result": {}}))
        assert isinstance(out, SendToGateway)
        assert not out.is_request
        assert len(state.inflight) == 0

    def test_a_response_for_an_unknown_id_goes_to_stdout_unchanged(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/new", {"cwd": "/w"}))
        frame = b'{"jsonrpc":"2.0","id":99,"result":{"sessionId":"ghost"}}'
        assert _reply(state, frame) == frame + b"\n"
        assert _reply(state, _error("nobody")) == _error("nobody") + b"\n"
        # Nothing it could answer was touched, and no session was made up from it.
        assert [request_id for request_id, _ in state.inflight.drain()] == [1]
        assert state.sessions == {}

    def test_a_second_response_to_one_request_is_dropped_in_a_batch_or_later(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/prompt", {"sessionId": SESSION}))
        state.client_message(_request(2, "session/prompt", {"sessionId": SESSION}))
        # Two answers to request 1 in one batch (nothing queued for stdout in between).
        assert _written(state.frame_received(_result(1)))["id"] == 1
        assert state.frame_received(_error(1)) is None
        state.lines_queued()
        assert _written(_reply(state, _result(2)))["id"] == 2
        # And a later one, after the first was written.
        assert _reply(state, _result(2, {"again": True})) is None
        # The IDE may use an id again once it was answered: that answer is relayed.
        state.client_message(_request(1, "session/prompt", {"sessionId": SESSION}))
        assert _written(_reply(state, _result(1)))["id"] == 1
        assert not state.owes_replies

    @given(
        st.one_of(
            st.lists(st.integers()),
            st.booleans(),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
            st.none(),
        )
    )
    def test_a_frame_without_a_usable_id_never_reaches_stdout(self, bad_id: Any) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/new", {"cwd": "/w"}))
        bodies: list[dict[str, Any]] = [{"result": {}}, {"method": "fs/read_text_file"}]
        for body in bodies:
            assert _reply(state, _frame({"id": bad_id, **body})) is None
        if not isinstance(bad_id, list | dict):  # a JSON value that is not an object
            assert _reply(state, json.dumps(bad_id).encode()) is None
        assert [request_id for request_id, _ in state.inflight.drain()] == [1]

    def test_a_response_needs_exactly_one_of_result_and_error(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/new", {"cwd": "/w"}))
        assert _reply(state, _frame({"id": 1})) is None
        both = {"id": 1, "result": {}, "error": {"code": 1, "message": "x"}}
        assert _reply(state, _frame(both)) is None
        assert len(state.inflight) == 1
        # An error for a request whose id could not be read carries id null (JSON-RPC 2.0).
        unreadable = _frame({"id": None, "error": {"code": -32600, "message": "no id"}})
        assert _reply(state, unreadable) == unreadable + b"\n"
        assert len(state.inflight) == 1

    def test_a_reconnect_answers_what_was_in_flight_with_an_error(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/prompt", {"sessionId": SESSION}))
        state.client_message(_request("b", "authenticate"))
        state.connection_closed(1)
        lines = [_written(line) for line in state.connection_lost("closed", reconnecting=True)]
        assert [line["id"] for line in lines] == [1, "b"]
        prompt, other = lines
        assert "during this prompt turn" in prompt["error"]["message"]
        assert URL in prompt["error"]["message"]
        assert prompt["error"]["data"] == {
            "bridge": "connection_lost",
            "method": "session/prompt",
            "sessionId": SESSION,
            "reconnecting": True,
            "details": prompt["error"]["message"],
        }
        assert other["error"]["data"] == {
            "bridge": "connection_lost",
            "method": "authenticate",
            "reconnecting": True,
            "details": other["error"]["message"],
        }
        assert not state.owes_replies
        # A late reply to an id already answered is still passed on, but settles nothing.
        assert _written(_reply(state, _result(1)))["id"] == 1

    def test_at_the_end_everything_owed_or_held_is_answered(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/prompt", {"sessionId": SESSION}))
        state.connection_lost("gone", reconnecting=True)
        state.client_message(_request(2, "session/new", {"cwd": "/w"}))
        state.client_message(_client({"method": "session/cancel", "params": {}}))
        lines = [_written(line) for line in state.abandon("bye", "stdin_closed")]
        assert [(line["id"], line["error"]["data"]) for line in lines] == [
            (2, {"bridge": "stdin_closed", "method": "session/new", "details": "bye"})
        ]
        assert not state.owes_replies
        assert state.held_bytes == 0


class TestHolding:
    def test_messages_are_held_until_the_connection_is_ready_then_sent_in_order(self) -> None:
        state = _state()
        assert state.client_message(_request(1, "initialize", {"protocolVersion": 1})) is None
        assert state.client_message(_client({"method": "note", "params": {}})) is None
        assert state.client_message(_request(2, "session/new", {"cwd": "/w"})) is None
        assert len(state.held) == 3
        assert len(state.inflight) == 0  # held, not sent: not in flight
        assert state.owes_replies
        state.connection_opened()
        # Opened but not ready: still held.
        assert state.client_message(_request(3, "session/list")) is None
        flushed = []
        while (out := state.next_held()) is not None:
            flushed.append((_sent(out).get("id"), out.is_request))
        assert flushed == [(1, True), (None, False), (2, True), (3, True)]
        assert state.held_bytes == 0
        state.connection_ready()
        assert _sent(state.client_message(_request(4, "session/list")))["id"] == 4
        assert [request_id for request_id, _ in state.inflight.drain()] == [1, 2, 3, 4]

    def test_a_full_hold_refuses_requests_with_an_error_and_drops_the_rest(self) -> None:
        state = _state(max_held_messages=1)
        assert state.client_message(_request(1, "session/list")) is None
        refused = state.client_message(_request(2, "session/new", {"cwd": "/w"}))
        assert isinstance(refused, WriteToClient)
        reply = _written(refused.line)
        assert reply["id"] == 2
        assert reply["error"]["data"] == {
            "bridge": "reconnecting",
            "method": "session/new",
            "details": reply["error"]["message"],
        }
        assert "already holds 1 messages" in reply["error"]["message"]
        assert state.client_message(_client({"method": "note", "params": {}})) is None
        assert len(state.held) == 1

    def test_the_hold_is_bounded_in_bytes_too(self) -> None:
        small = _request(1, "session/list")
        state = _state(max_held_bytes=len(small.text) + 5)
        assert state.client_message(small) is None
        assert isinstance(state.client_message(_request(2, "session/list")), WriteToClient)
        assert state.held_bytes == len(small.text)

    def test_a_loss_during_the_flush_keeps_the_rest_held(self) -> None:
        state = _state()
        for request_id in (1, 2):
            state.client_message(_request(request_id, "session/list"))
        state.connection_opened()
        assert _sent(state.next_held())["id"] == 1
        state.connection_closed(1)
        lines = state.connection_lost("closed", reconnecting=True)
        assert [_written(line)["id"] for line in lines] == [1]  # sent: outcome unknown
        assert [json.loads(action.text)["id"] for action in state.held] == [2]  # still held
        assert state.client_message(_request(3, "session/list")) is None


def _set_up_sessions(state: RelayState) -> dict[str, Any]:
    """initialize, a new session, a loaded one and a closed one, all answered."""
    initialize = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}
    _connect_first(state)
    state.client_message(_request(1, "initialize", initialize))
    _reply(state, _result(1, {"protocolVersion": 1}))
    state.client_message(_request(2, "session/new", {"cwd": "/w", "mcpServers": []}))
    _reply(state, _result(2, {"sessionId": "new-1"}))
    state.client_message(_request(3, "session/load", {"sessionId": "old-1", "cwd": "/o"}))
    _reply(state, _result(3))
    state.client_message(_request(4, "session/new", {"cwd": "/x"}))
    _reply(state, _result(4, {"sessionId": "closed-1"}))
    state.client_message(_request(5, "session/close", {"sessionId": "closed-1"}))
    _reply(state, _result(5))
    state.client_message(_request(6, "session/new", {"cwd": "/y"}))
    _reply(state, _error(6))  # failed: no session
    return initialize


class TestReplay:
    def test_sessions_known_are_the_ones_created_or_loaded_and_not_closed(self) -> None:
        state = _state()
        _set_up_sessions(state)
        assert dict(state.sessions) == {
            "new-1": {"cwd": "/w", "mcpServers": []},
            "old-1": {"cwd": "/o"},
        }

    def test_a_reconnect_replays_initialize_then_resumes_every_session(self) -> None:
        state = _state()
        initialize = _set_up_sessions(state)
        state.connection_closed(1)
        assert state.connection_lost("closed", reconnecting=True) == []
        assert state.client_message(_request(10, "session/list")) is None  # held meanwhile
        assert state.connection_opened() == 2

        first = _sent(state.start_replay())
        assert first["method"] == "initialize"
        assert first["params"] == initialize
        assert str(first["id"]).startswith(INTERNAL_ID_PREFIX)
        assert state.frame_received(_result(first["id"], {"protocolVersion": 1})) is (
            REPLAY_ANSWERED
        )
        second = _sent(state.advance_replay())
        assert (second["method"], second["params"]) == (
            "session/resume",
            {"sessionId": "new-1", "cwd": "/w", "mcpServers": []},
        )
        assert state.frame_received(_result(second["id"])) is REPLAY_ANSWERED
        third = _sent(state.advance_replay())
        assert third["params"] == {"sessionId": "old-1", "cwd": "/o"}
        assert len({first["id"], second["id"], third["id"]}) == 3
        assert state.frame_received(_error(third["id"], "unknown session")) is REPLAY_ANSWERED
        assert state.advance_replay() is None
        assert (state.resumed, state.to_resume) == (1, 2)
        assert list(state.sessions) == ["new-1"]  # the one that failed is forgotten
        # The replay's own requests never reach the in-flight table or stdout.
        assert len(state.inflight) == 0
        assert _sent(state.next_held())["id"] == 10
        state.connection_ready()
        assert state.ready

    def test_only_the_awaited_answer_counts_as_the_replay_answer(self) -> None:
        state = _state()
        _set_up_sessions(state)
        state.connection_lost("closed", reconnecting=True)
        state.connection_opened()
        request = _sent(state.start_replay())
        other = _result(f"{INTERNAL_ID_PREFIX}999")
        assert state.frame_received(other) == other + b"\n"
        assert state.frame_received(_result(request["id"])) is REPLAY_ANSWERED
        # Answered once: the same id again is not the bridge's any more.
        assert state.frame_received(_result(request["id"])) == _result(request["id"]) + b"\n"

    def test_nothing_to_replay_before_initialize_or_any_session(self) -> None:
        state = _state()
        _connect_first(state)
        state.connection_lost("closed", reconnecting=True)
        state.connection_opened()
        assert state.start_replay() is None
        assert state.advance_replay() is None

    def test_each_reconnect_replays_the_captured_initialize_again(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "initialize", {"protocolVersion": 1}))
        _reply(state, _result(1))
        for generation in (2, 3):
            state.connection_lost("closed", reconnecting=True)
            assert state.connection_opened() == generation
            replayed = _sent(state.start_replay())
            assert (replayed["method"], replayed["params"]) == (
                "initialize",
                {"protocolVersion": 1},
            )
            assert state.frame_received(_result(replayed["id"])) is REPLAY_ANSWERED
            assert state.advance_replay() is None
            state.connection_ready()


def _server_request(request_id: RequestId) -> bytes:
    return _frame(
        {"id": request_id, "method": "session/request_permission", "params": {"sessionId": "s"}}
    )


class TestGatewayRequests:
    def test_an_answer_on_the_same_connection_is_relayed_as_is(self) -> None:
        state = _state()
        _connect_first(state)
        assert _written(_reply(state, _server_request(0)))["id"] == 0
        answer = _client({"id": 0, "result": {"outcome": "allow"}})
        assert state.client_message(answer) == SendToGateway(answer.text)
        # Answered: a second answer is not one the bridge relayed, so the gateway judges it.
        assert state.client_message(answer) == SendToGateway(answer.text)

    def test_an_answer_to_a_request_from_a_lost_connection_is_dropped(self) -> None:
        state = _state()
        _connect_first(state)
        _reply(state, _server_request(5))
        state.connection_closed(1)
        state.connection_lost("closed", reconnecting=True)
        assert state.client_message(_client({"id": 5, "result": {}})) is None
        state.connection_opened()
        state.connection_ready()
        assert state.client_message(_client({"id": 5, "result": {}})) == SendToGateway(
            '{"jsonrpc": "2.0", "id": 5, "result": {}}'
        )

    @given(
        ids=st.lists(
            st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=20)),
            unique=True,
            min_size=1,
            max_size=8,
        ),
        answer_old_first=st.booleans(),
        reconnects=st.integers(1, 3),
    )
    def test_ids_repeated_after_a_reconnect_are_renamed_and_restored(
        self, ids: list[RequestId], answer_old_first: bool, reconnects: int
    ) -> None:
        state = _state()
        _connect_first(state)
        for gateway_id in ids:  # asked, never answered before the connection is lost
            assert _written(_reply(state, _server_request(gateway_id)))["id"] == gateway_id
        for _ in range(reconnects):
            state.connection_lost("closed", reconnecting=True)
            state.connection_opened()
            state.connection_ready()
        seen = {
            gateway_id: _written(_reply(state, _server_request(gateway_id)))["id"]
            for gateway_id in ids
        }
        # Every repeated id reaches the IDE under a new one, told apart from all old ones.
        assert len(set(seen.values())) == len(ids)
        assert not set(seen.values()) & set(ids)
        for gateway_id, ide_id in seen.items():
            assert ide_id != gateway_id
            assert str(ide_id).startswith(INTERNAL_ID_PREFIX)

        def answer(ide_id: RequestId) -> object:
            return state.client_message(_client({"id": ide_id, "result": {"n": 1}}))

        if answer_old_first:
            for gateway_id in ids:
                assert answer(gateway_id) is None  # the old request died with its connection
        for gateway_id, ide_id in seen.items():
            relayed = _sent(answer(ide_id))
            assert relayed == {"jsonrpc": "2.0", "id": gateway_id, "result": {"n": 1}}
        if not answer_old_first:
            for gateway_id in ids:
                assert answer(gateway_id) is None
        assert len(state.server_requests) == 0


def _phase(state: RelayState) -> RelayPhase:
    """The current phase (a call, so that type checkers do not carry one assert's narrowing
    over the events that follow it)."""
    return state.phase


class TestPhases:
    def test_a_connection_s_life_goes_through_the_phases_in_order(self) -> None:
        state = _state()
        assert _phase(state) is RelayPhase.DISCONNECTED
        _set_up_sessions(state)
        assert _phase(state) is RelayPhase.READY
        state.connection_closed(1)
        assert _phase(state) is RelayPhase.DISCONNECTED
        state.connection_opened()
        assert _phase(state) is RelayPhase.REPLAYING
        out = state.start_replay()
        while out is not None:
            assert state.frame_received(_result(_sent(out)["id"])) is REPLAY_ANSWERED
            out = state.advance_replay()
        assert _phase(state) is RelayPhase.FLUSHING
        state.connection_ready()
        assert _phase(state) is RelayPhase.READY
        assert state.end(Ending.STDIN_EOF, "bye")
        assert not state.end(Ending.FATAL, "later")  # the first ending is kept
        assert (state.phase, state.ending, state.cause) == (
            RelayPhase.ENDED,
            Ending.STDIN_EOF,
            "bye",
        )
        state.connection_closed(2)  # the connection may still close afterwards
        assert _phase(state) is RelayPhase.ENDED

    def test_moves_the_table_does_not_list_raise(self) -> None:
        state = _state()
        with pytest.raises(RelayStateError, match="every held message was sent"):
            state.connection_ready()  # not connected
        _connect_first(state)
        with pytest.raises(RelayStateError, match="a connection was opened"):
            state.connection_opened()  # already connected
        state.end(Ending.STDIN_EOF)
        with pytest.raises(RelayStateError, match="while the relay is ended"):
            state.connection_opened()
        assert next_phase(RelayPhase.READY, RelayEvent.CLOSED) is RelayPhase.DISCONNECTED

    def test_every_phase_can_end_and_only_ended_is_final(self) -> None:
        for phase in RelayPhase:
            assert TRANSITIONS[phase, RelayEvent.END] is RelayPhase.ENDED
        leaving_ended = {
            event for (phase, event), to in TRANSITIONS.items() if phase is RelayPhase.ENDED
        }
        assert {TRANSITIONS[RelayPhase.ENDED, event] for event in leaving_ended} == {
            RelayPhase.ENDED
        }

    def test_lines_queued_says_when_the_last_reply_is_in(self) -> None:
        state = _state()
        _connect_first(state)
        state.client_message(_request(1, "session/list"))
        state.client_message(_request(2, "session/list"))
        assert not state.lines_queued()  # nothing answered yet
        state.frame_received(_result(1))
        assert not state.lines_queued()  # one still owed
        state.frame_received(_result(2))
        assert state.lines_queued()

    def test_a_replay_given_up_on_moves_on_and_drops_its_late_answer(self) -> None:
        state = _state()
        _set_up_sessions(state)
        state.connection_lost("closed", reconnecting=True)
        state.client_message(_request(10, "session/list"))
        state.connection_opened()
        request = _sent(state.start_replay())
        state.replay_abandoned()
        assert state.phase is RelayPhase.FLUSHING
        assert _sent(state.next_held())["id"] == 10
        assert state.frame_received(_result(request["id"])) is None  # not the IDE's
        assert state.advance_replay() is None


def _update_texts(lines: list[bytes]) -> list[tuple[str, str, str]]:
    """(session, text, _meta.zeroclaw.bridge) of each session/update line."""
    found = []
    for line in lines:
        body = _written(line)
        assert body["method"] == "session/update"
        params = body["params"]
        assert params["update"]["sessionUpdate"] == "agent_message_chunk"
        content = params["update"]["content"]
        assert content["type"] == "text"
        found.append((params["sessionId"], content["text"], params["_meta"]["zeroclaw"]["bridge"]))
    return found


class TestHeldPromptNotices:
    def test_a_prompt_held_while_disconnected_is_announced_once_then_followed_up(self) -> None:
        state = _state()
        _set_up_sessions(state)
        state.connection_lost("closed", reconnecting=True)
        state.client_message(_request(20, "session/prompt", {"sessionId": "new-1"}))
        state.client_message(_request(21, "session/list"))
        assert state.prompts
        [(session, text, marker)] = _update_texts(state.held_prompt_notices("gateway down"))
        assert (session, text, marker) == ("new-1", "gateway down", "reconnecting")
        assert not state.prompts
        assert state.held_prompt_notices("gateway down") == []  # told once
        state.connection_opened()
        [(session, text, marker)] = _update_texts(state.prompts.reconnected())
        assert (session, marker) == ("new-1", "reconnected")
        assert "sending this prompt now" in text
        assert state.prompts.reconnected() == []

    def test_no_notice_while_connected_or_for_a_prompt_already_sent(self) -> None:
        state = _state()
        _set_up_sessions(state)
        state.connection_lost("closed", reconnecting=True)
        state.connection_opened()  # replaying: held, but the gateway is there
        state.client_message(_request(20, "session/prompt", {"sessionId": "new-1"}))
        assert state.held_prompt_notices("gateway down") == []
        state.replay_abandoned()
        assert _sent(state.next_held())["id"] == 20
        assert not state.prompts  # sent before anyone was told: nothing to say
        state.connection_closed(2)
        assert state.held_prompt_notices("gateway down") == []

    def test_the_outage_text_says_what_failed_for_how_long_and_that_the_prompt_waits(
        self,
    ) -> None:
        outage = Outage("the gateway closed the connection (code 1012)", retry_until=100.4)
        assert "code 1012" in outage.text(URL, now=40)
        outage.last_attempt = f"failed to connect to {URL}: connection refused. Is it running?"
        text = outage.text(URL, now=40)
        assert text.count(URL) == 1
        assert f"{URL} cannot be reached right now (connection refused. Is it running?)" in text
        assert "for up to 60 s more" in text
        assert "this prompt is kept and will be sent as soon as the gateway is back" in text
        assert "for up to 0 s more" in outage.text(URL, now=500)
        assert "The bridge is reconnecting;" in Outage("lost").text(URL, now=0)


def test_a_forked_session_is_resumed_after_a_reconnect_like_a_new_one() -> None:
    state = _state()
    _set_up_sessions(state)
    fork = {"sessionId": "new-1", "cwd": "/f", "mcpServers": []}
    state.client_message(_request(7, "session/fork", fork))
    _reply(state, _result(7, {"sessionId": "fork-1"}))
    assert state.sessions["fork-1"] == {"cwd": "/f", "mcpServers": []}
    state.connection_lost("closed", reconnecting=True)
    state.connection_opened()
    _sent(state.start_replay())
    resumed = [_sent(state.advance_replay())["params"]["sessionId"] for _ in range(3)]
    assert resumed == ["new-1", "old-1", "fork-1"]
