"""The services driven without a connection: a recording ``Outbound`` stands for the peer
(acp_server/protocol/outbound.py), so no transport, JSON-RPC framing or read loop is
involved, and each step's session state is read from the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from acp_core import methods, schema
from acp_core.errors import ErrorCode, SessionBusyError, SessionNotFoundError
from acp_core.jsonrpc import ErrorResponse, Payload, Response
from acp_server.errors import rpc_error_for
from acp_server.protocol.client_profile import BEFORE_INITIALIZE, ClientProfile
from acp_server.protocol.services import handshake, lifecycle, prompt
from acp_server.protocol.services.connection_state import ConnectionState
from acp_server.protocol.services.followups import ReplyThen
from acp_server.protocol.services.session_state import SessionState, SessionStateError
from acp_server.testing import ScriptedProvider, memory_app, text_round
from tests.helpers import make_config, session_dir


class RecordingOutbound:
    """An ``Outbound`` that keeps what the services send; it asks the client nothing."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.client_capabilities: schema.ClientCapabilities | None = None
        self.client_profile: ClientProfile = BEFORE_INITIALIZE
        self.shares_filesystem = False
        self.remote = False
        self.principal: str | None = None
        self.connection_default_agent: str | None = None
        self.nursery = nursery
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.notifications: list[tuple[str, Payload]] = []

    async def send_update(self, session_id: str, update: schema.SessionUpdate) -> None:
        self.updates.append((session_id, msgspec.json.decode(msgspec.json.encode(update))))

    async def send_notification(self, method: str, params: Payload) -> None:
        self.notifications.append((method, params))

    async def call(self, method: str, params: Payload) -> Response | ErrorResponse:
        raise AssertionError(f"no request to the client expected, got {method}")

    def kinds(self, session_id: str) -> list[str]:
        return [update["sessionUpdate"] for sid, update in self.updates if sid == session_id]


def params(params_type: type[Any], **fields: Any) -> Any:
    """Params decoded as the connection decodes them (``schema.decode_inbound``)."""
    return schema.decode_inbound(params_type, msgspec.Raw(msgspec.json.encode(fields)))


async def open_session(state: ConnectionState, tmp_path: Path) -> str:
    reply = await lifecycle.new_session(
        state, params(schema.NewSessionParams, cwd=str(session_dir(tmp_path)), mcpServers=[])
    )
    assert isinstance(reply, ReplyThen)
    await reply.after()  # what the connection sends right after the reply
    session_id: str = reply.result.session_id
    return session_id


async def test_new_session_then_a_prompt_sends_the_turn_through_the_outbound(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([text_round("Hello", ", world")])
    app = memory_app(make_config(tmp_path), provider=provider)
    async with trio.open_nursery() as nursery:
        outbound = RecordingOutbound(nursery)
        state = ConnectionState(app, outbound)
        initialized = await handshake.initialize(
            state, params(schema.InitializeParams, protocolVersion=1)
        )
        assert msgspec.to_builtins(initialized)["protocolVersion"] == 1
        session_id = await open_session(state, tmp_path)
        assert state.table.state_of(session_id) is SessionState.IDLE
        assert outbound.kinds(session_id) == ["available_commands_update"]

        request = params(schema.PromptParams, sessionId=session_id, prompt="Say hello")
        job = prompt.admit_prompt(state, request, "7")
        assert state.table.state_of(session_id) is SessionState.PROMPTING
        with pytest.raises(SessionBusyError):  # one turn at a time, refused on admission
            prompt.admit_prompt(state, request, "8")
        result = await job()

        assert isinstance(result, schema.PromptResult)
        assert (result.stop_reason, result.content) == ("end_turn", "Hello, world")
        assert state.table.state_of(session_id) is SessionState.IDLE
        assert state.prompt_turns == {}
        assert outbound.kinds(session_id) == [
            "available_commands_update",
            "session_info_update",  # its title, from the first prompt
            "agent_message_chunk",
            "agent_message_chunk",
        ]
        texts = [u["content"]["text"] for _, u in outbound.updates[-2:]]
        assert texts == ["Hello", ", world"]
        assert outbound.notifications == []
        assert len(provider.requests) == 1


async def test_close_of_an_unknown_id_is_the_not_found_error(tmp_path: Path) -> None:
    app = memory_app(make_config(tmp_path), provider=ScriptedProvider([text_round("x")]))
    async with trio.open_nursery() as nursery:
        state = ConnectionState(app, RecordingOutbound(nursery))
        with pytest.raises(SessionNotFoundError) as refused:
            lifecycle.admit_close(state, params(schema.SessionIdParams, sessionId="nope"), "1")
    error = rpc_error_for(refused.value, method=methods.SESSION_CLOSE)
    assert (error.code, error.message) == (ErrorCode.SESSION_NOT_FOUND, "Session not found: nope")
    assert state.table.state_of("nope") is SessionState.CLOSED


async def test_a_closed_session_leaves_the_table_and_refuses_prompts(tmp_path: Path) -> None:
    app = memory_app(make_config(tmp_path), provider=ScriptedProvider([text_round("x")]))
    async with trio.open_nursery() as nursery:
        outbound = RecordingOutbound(nursery)
        state = ConnectionState(app, outbound)
        session_id = await open_session(state, tmp_path)
        by_id = params(schema.SessionIdParams, sessionId=session_id)
        close = lifecycle.admit_close(state, by_id, "2")
        assert state.table.state_of(session_id) is SessionState.CLOSED  # in arrival order
        assert await close() == schema.EmptyResult()
        request = params(schema.PromptParams, sessionId=session_id, prompt="again")
        with pytest.raises(SessionNotFoundError):
            prompt.admit_prompt(state, request, "3")


async def test_a_reaped_session_is_remembered_and_a_busy_one_is_never_reaped(
    tmp_path: Path,
) -> None:
    app = memory_app(make_config(tmp_path), provider=ScriptedProvider([text_round("x")]))
    async with trio.open_nursery() as nursery:
        state = ConnectionState(app, RecordingOutbound(nursery))
        idle_id = await open_session(state, tmp_path)
        busy_id = await open_session(state, tmp_path)
        request = params(schema.PromptParams, sessionId=busy_id, prompt="hold")
        job = prompt.admit_prompt(state, request, "")
        state.table.reap_idle(trio.current_time() + 3600, idle_timeout=60)
        assert state.table.state_of(idle_id) is SessionState.REAPED
        assert state.table.was_reaped(idle_id)
        assert state.table.state_of(busy_id) is SessionState.PROMPTING
        await job()
        state.cancel_all()


async def test_the_table_refuses_a_move_its_transitions_do_not_list(tmp_path: Path) -> None:
    app = memory_app(make_config(tmp_path), provider=ScriptedProvider([text_round("x")]))
    async with trio.open_nursery() as nursery:
        state = ConnectionState(app, RecordingOutbound(nursery))
        session_id = await open_session(state, tmp_path)
        session = state.table.get(session_id)
        assert session is not None
        with pytest.raises(SessionStateError, match=f"session {session_id}: go_live cannot"):
            state.table.add(session)  # live already: only a reserved id goes live
        with pytest.raises(SessionStateError, match="begin_restore cannot happen while it is idle"):
            state.table.begin_opening(session_id)
        assert state.table.state_of(session_id) is SessionState.IDLE  # nothing moved
        state.cancel_all()
