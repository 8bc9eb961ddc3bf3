"""Requests that race on one connection: cancel/close against a pending permission request,
close/stop against a replaying session/load, duplicate loads, and slot accounting when
session/new or session/load fails part-way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from acp_server.model import ChatMessage, CompletedTurn
from acp_server.protocol import connection as server_module
from acp_server.protocol.presentation import replay as replay_module
from acp_server.protocol.services import restore_replay as restore_replay_module
from acp_server.storage import StoredSession, StoreError
from tests.helpers import make_config, rpc_error, session_dir
from tests.jsonrpc_peer import JsonDict
from tests.server.agent.test_server_tools import stub_turn
from tests.server.protocol.test_server_restore import FakeStore
from tests.server.server_harness import (
    ScriptedProvider,
    StubTool,
    open_server,
    text_round,
)


def responses_to(client: Any, request_id: Any) -> list[JsonDict]:
    return [
        frame for frame in client.frames if frame.get("id") == request_id and "method" not in frame
    ]


@pytest.mark.parametrize("method", ["session/cancel", "session/close"])
async def test_cancel_or_close_withdraws_a_pending_permission_request(
    tmp_path: Path, method: str
) -> None:
    """The turn is answered "cancelled" exactly once, the question is withdrawn with
    $/cancel_request, the tool never runs, and the client's late answer is ignored."""
    tool = StubTool()
    asked: list[JsonDict] = []
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=stub_turn(), tools=[tool]) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            prompt_id = await client.prompt_request(session_id, "go")
            stop_id: Any = None

            async def leave_unanswered(request: JsonDict) -> None:
                nonlocal stop_id
                asked.append(request)
                stop_id = await client.request(method, {"sessionId": session_id})

            prompt = await client.wait_response(prompt_id, on_request=leave_unanswered)
            stopped = await client.wait_response(stop_id)
            # The user clicks "allow" after the question was withdrawn: ignored, no reply.
            [question] = asked
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": question["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}},
                }
            )
            # The connection still serves requests afterwards.
            await client.new_session(session_dir(tmp_path))
    assert prompt["result"]["stopReason"] == "cancelled"
    assert "error" not in stopped
    assert tool.calls == []
    withdrawn = [n for n in client.notifications if n["method"] == "$/cancel_request"]
    assert [n["params"] for n in withdrawn] == [{"requestId": question["id"]}]
    assert len(responses_to(client, prompt_id)) == 1
    # Nothing answered the late permission answer (responses are never answered).
    assert all(frame.get("id") != question["id"] for frame in client.frames[1:] if "error" in frame)


def long_history(turns: int) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for index in range(turns):
        messages += [ChatMessage("user", f"q{index}"), ChatMessage("assistant", f"a{index}")]
    return messages


@pytest.mark.parametrize("method", ["session/close", "session/stop"])
async def test_no_replayed_update_follows_a_close_that_raced_the_load(
    tmp_path: Path, method: str
) -> None:
    """session/close (or stop) sent right behind session/load: once its answer is written,
    no more of the replay may follow for the closed session."""
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), long_history(1000))
    with trio.fail_after(10):
        async with open_server(make_config(tmp_path), store=store) as client:
            load_id = await client.request("session/load", {"sessionId": "s-1"})
            # Wait until the replay is under way, then close behind it.
            first = await client.receive()
            assert first["method"] == "session/update"
            client.notifications.append(first)
            close_id = await client.request(method, {"sessionId": "s-1"})
            closed = await client.wait_response(close_id)
            await client.wait_response(load_id)
            # A prompt for the closed session is refused: it is gone.
            gone = await client.error("session/prompt", {"sessionId": "s-1", "prompt": "hi"})
    assert "error" not in closed
    assert gone["code"] == -32000
    close_at = client.frames.index(closed)
    late = [
        frame
        for frame in client.frames[close_at:]
        if frame.get("method") == "session/update" and frame["params"]["sessionId"] == "s-1"
    ]
    assert late == []


async def test_a_second_load_of_the_same_id_while_the_first_runs_is_refused(
    tmp_path: Path,
) -> None:
    release = trio.Event()

    class SlowStore(FakeStore):
        async def load_session(
            self, session_id: str, *, max_messages: int | None = None
        ) -> StoredSession | None:
            await release.wait()
            return await super().load_session(session_id, max_messages=max_messages)

    store = SlowStore()
    store.add("s-1", session_dir(tmp_path), long_history(2))
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), store=store) as client:
            first_id = await client.request("session/load", {"sessionId": "s-1"})
            second = await client.error("session/load", {"sessionId": "s-1"})
            release.set()
            first = await client.wait_response(first_id)
    assert second == rpc_error(-32602, "Session already active: s-1. Call session/close first.")
    assert first["result"].keys() == {"modes", "configOptions"}
    # The refused load replayed nothing: each stored message was sent once.
    assert len(client.updates("s-1")) == 4


async def test_a_load_that_fails_during_replay_leaves_no_active_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), long_history(2))
    real_history_updates = replay_module.history_updates

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("uploads/ unreadable")

    config = make_config(tmp_path, max_sessions=1)
    with trio.fail_after(5):
        async with open_server(config, store=store) as client:
            monkeypatch.setattr(restore_replay_module, "history_updates", broken)
            failed = await client.error("session/load", {"sessionId": "s-1"})
            # The client was told the load failed: the session is not half-open, and
            # its slot is free again, so a retry works.
            gone = await client.error("session/prompt", {"sessionId": "s-1", "prompt": "hi"})
            monkeypatch.setattr(restore_replay_module, "history_updates", real_history_updates)
            retried = await client.call("session/load", {"sessionId": "s-1"})
    assert failed["code"] == -32603
    assert gone["code"] == -32000
    assert retried["result"].keys() == {"modes", "configOptions"}


async def test_a_failed_store_insert_frees_its_session_slot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class FailingStore(FakeStore):
        fail_create = True

        async def create_session(
            self,
            session_id: str,
            agent_alias: str,
            workspace_dir: str,
            *,
            principal: str | None = None,
        ) -> None:
            await trio.lowlevel.checkpoint()
            if self.fail_create:
                raise StoreError("database is locked")
            await super().create_session(session_id, agent_alias, workspace_dir)

    store = FailingStore()
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path, max_sessions=1), store=store) as client:
            failed = await client.error("session/new", {"cwd": str(session_dir(tmp_path))})
            store.fail_create = False
            session_id = await client.new_session(session_dir(tmp_path))
    assert failed["code"] == -32603
    # The store's own words stay in the log, under the error reference the client is given.
    assert failed["message"].startswith("Failed to persist session: see the server log (ref ")
    assert "database is locked" not in failed["message"]
    ref = failed["message"].rsplit("(ref ", 1)[1].rstrip(")")
    logged = [r for r in caplog.records if f"[ref {ref}]" in r.getMessage()]
    assert len(logged) == 1
    assert "database is locked" in logged[0].getMessage()
    assert list(store.sessions) == [session_id]


async def test_eof_while_a_load_waits_on_the_store_ends_the_connection(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """The input ends mid-load: the server still exits within its shutdown grace."""
    never = trio.Event()

    class StuckStore(FakeStore):
        async def load_session(
            self, session_id: str, *, max_messages: int | None = None
        ) -> StoredSession | None:
            await never.wait()
            raise AssertionError("unreachable")

        async def append_turn(
            self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
        ) -> None:
            raise AssertionError("no turn runs here")

    store = StuckStore()
    provider = ScriptedProvider([])
    with trio.fail_after(server_module.DEFAULT_SHUTDOWN_GRACE_SECS + 5):
        async with open_server(make_config(tmp_path), store=store, provider=provider) as client:
            await client.request("session/load", {"sessionId": "s-1"})
            await client.new_session(session_dir(tmp_path))
        # open_server closed the input and waited for the server to finish.


async def test_a_prompt_right_behind_a_close_never_starts(tmp_path: Path) -> None:
    """session/close and session/prompt sent back to back: the close is decided in arrival
    order, so the prompt is refused with -32000 and the model is never asked. (Which of two
    ready request tasks trio runs first varies, hence a few rounds.)"""
    provider = ScriptedProvider([text_round("should", " not", " run")])
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider) as client:
            for _ in range(8):
                session_id = await client.new_session(session_dir(tmp_path))
                close_id = await client.request("session/close", {"sessionId": session_id})
                prompt_id = await client.prompt_request(session_id, "go")
                closed = await client.wait_response(close_id)
                prompt = await client.wait_response(prompt_id)
                assert closed["result"] == {}
                assert prompt["error"]["code"] == -32000, prompt
                assert len(responses_to(client, prompt_id)) == 1
    assert provider.requests == []


async def test_the_reaper_never_drops_a_session_mid_turn(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """A turn longer than session_timeout_secs keeps its session; idleness counts from
    the turn's end."""
    provider = ScriptedProvider([text_round(*(["x "] * 150))], delay=1.0)
    config = make_config(tmp_path, session_timeout_secs=100)
    with trio.fail_after(1000):
        async with open_server(config, provider=provider, reap_idle_sessions=True) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            long_turn = await client.prompt(session_id, "go")
            await trio.sleep(50)  # idle, but for less than the timeout since the turn ended
            kept = await client.call("session/update", {"sessionId": session_id, "type": "ping"})
    assert long_turn["result"]["stopReason"] == "end_turn"
    assert kept["result"]["status"] == "processed"


async def test_a_load_pipelined_behind_a_stop_sees_the_turn_the_stop_waited_for(
    tmp_path: Path,
) -> None:
    """stop, then load of the same id without waiting: the load must not read the store
    before the stopped session's last turn is saved (it would come back without it, and
    two live copies of one session would write to the store)."""

    class SavingStore(FakeStore):
        async def append_turn(
            self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
        ) -> None:
            await super().append_turn(session_id, turn, epoch=epoch)
            stored = self.sessions[session_id]
            self.sessions[session_id] = StoredSession(
                stored.info, stored.messages + turn.messages, stored.plan
            )

    store = SavingStore()
    gate = trio.Event()
    provider = ScriptedProvider([text_round("slow", " answer")], gate=gate)
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, store=store) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            prompt_id = await client.prompt_request(session_id, "question")
            await client.receive()  # the turn is streaming
            stop_id = await client.request("session/stop", {"sessionId": session_id})
            load_id = await client.request("session/load", {"sessionId": session_id})
            await trio.testing.wait_all_tasks_blocked()  # the load got as far as it can
            gate.set()
            loaded = await client.wait_response(load_id)
            stopped = await client.wait_response(stop_id)
            prompt = await client.wait_response(prompt_id)
    assert prompt["result"]["stopReason"] == "end_turn"
    assert "error" not in stopped
    assert loaded["result"].keys() == {"modes", "configOptions"}
    load_at = client.frames.index(loaded)
    replayed = [
        frame["params"]["update"]
        for frame in client.frames[:load_at]
        if frame.get("method") == "session/update"
        and frame["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]
    assert [update["content"]["text"] for update in replayed] == ["question"]
