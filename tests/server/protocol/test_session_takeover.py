"""One live copy per session, in one process: two connections on one ``AcpApp`` (as two
WebSocket clients of one gateway), and a second store connection standing in for another
process on the same SQLite file."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock

from acp_server.errors import SessionTakenOver, rpc_error_for
from acp_server.model import CompletedTurn
from acp_server.protocol.services.ownership import LiveSessions
from acp_server.protocol.services.session_table import SessionTable
from acp_server.storage import AsyncSessionStore, open_store
from acp_server.storage.sqlite import SessionStore
from tests.helpers import make_config, poll_until, session_dir
from tests.jsonrpc_peer import JsonDict
from tests.server.protocol.test_server_restore import FakeStore
from tests.server.server_harness import (
    ScriptedProvider,
    ServerHarness,
    harness_app,
    open_server,
    text_round,
)

SESSION_NOT_FOUND = -32000
TIMEOUT = 20


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions" / "acp-sessions.db"


@asynccontextmanager
async def two_connections(
    tmp_path: Path, db_path: Path, provider: ScriptedProvider
) -> AsyncIterator[tuple[ServerHarness, ServerHarness, AsyncSessionStore, LiveSessions]]:
    config = make_config(tmp_path / "cfg")
    store = await open_store(db_path)
    app = harness_app(config, provider=provider, store=store)
    try:
        async with open_server(config, app=app) as first, open_server(config, app=app) as second:
            await first.result("initialize", {})
            await second.result("initialize", {})
            yield first, second, store, app.live_sessions
    finally:
        with trio.CancelScope(shield=True):
            await store.aclose()


def user_texts(updates: list[JsonDict]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]


def stored_users(db_path: Path, session_id: str) -> list[str]:
    store = SessionStore.open(db_path)
    try:
        stored = store.load_session(session_id)
    finally:
        store.close()
    assert stored is not None
    return [m.content for m in stored.messages if m.role == "user"]


def test_the_registry_names_one_holder_and_only_the_holder_releases() -> None:
    live = LiveSessions()
    first, second = SessionTable(4, live), SessionTable(4, live)
    assert live.claim("s", first) is None
    assert live.claim("s", first) is None  # claiming again what it holds: no previous
    assert live.claim("s", second) is first
    live.release("s", first)  # no longer the holder: nothing happens
    assert live.holds("s", second)
    assert live.holder("s") is second
    live.release("s", second)
    assert live.holder("s") is None
    assert len(live) == 0


async def test_a_load_on_another_connection_takes_the_session_over(
    tmp_path: Path, db_path: Path
) -> None:
    provider = ScriptedProvider([text_round("answer")])
    with trio.fail_after(TIMEOUT):
        async with two_connections(tmp_path, db_path, provider) as (first, second, _, live):
            session_id = await first.new_session(session_dir(tmp_path))
            assert (await first.prompt(session_id, "one"))["result"]["stopReason"] == "end_turn"
            assert (await second.result("session/load", {"sessionId": session_id})).keys() == {
                "modes",
                "configOptions",
            }
            assert user_texts(second.updates(session_id)) == ["one"]

            # The first copy is gone, and every request for it says why.
            for method, params in (
                ("session/prompt", {"sessionId": session_id, "prompt": "two"}),
                ("session/close", {"sessionId": session_id}),
                ("session/update", {"sessionId": session_id, "type": "ping"}),
            ):
                error = await first.error(method, params)
                assert error["code"] == SESSION_NOT_FOUND, (method, error)
                assert "taken over by another connection" in error["message"], error
            requests_before = len(provider.requests)

            reply = await second.prompt(session_id, "three")
            assert reply["result"]["stopReason"] == "end_turn", reply
            assert len(provider.requests) == requests_before + 1  # the refused ones never ran

            # The first connection can take it back with a load of its own.
            assert (await first.result("session/resume", {"sessionId": session_id})).keys() == {
                "modes",
                "configOptions",
            }
            error = await second.error("session/prompt", {"sessionId": session_id, "prompt": "x"})
            assert "taken over" in error["message"]
            assert (await first.prompt(session_id, "four"))["result"]["stopReason"] == "end_turn"
            assert live.holder(session_id) is not None
        # Both connections ended: the registry keeps nothing of them.
        assert len(live) == 0
    assert stored_users(db_path, session_id) == ["one", "three", "four"]


async def test_a_takeover_mid_turn_cancels_that_turn_and_saves_nothing_of_it(
    tmp_path: Path, db_path: Path
) -> None:
    provider = ScriptedProvider([text_round("done"), text_round("slow ", "words")])
    with trio.fail_after(TIMEOUT):
        async with two_connections(tmp_path, db_path, provider) as (first, second, _, _live):
            session_id = await first.new_session(session_dir(tmp_path))
            await first.prompt(session_id, "saved")
            provider.gate = trio.Event()  # the next turn stops after its first chunk
            running = await first.prompt_request(session_id, "interrupted")
            chunk = await first.receive()
            assert chunk["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            assert (await second.result("session/load", {"sessionId": session_id})).keys() == {
                "modes",
                "configOptions",
            }
            answer = await first.wait_response(running)
            assert answer["result"]["stopReason"] == "cancelled", answer
            assert user_texts(second.updates(session_id)) == ["saved"]
            error = await first.error("session/prompt", {"sessionId": session_id, "prompt": "x"})
            assert error["code"] == SESSION_NOT_FOUND
            assert "taken over" in error["message"]
    assert stored_users(db_path, session_id) == ["saved"]


async def test_a_takeover_waits_for_the_turn_being_committed_and_shows_it(
    tmp_path: Path, db_path: Path
) -> None:
    """A takeover never loses the detached copy's last answered turn: a load that arrives
    while that turn is being written waits for the commit, and its replay shows the turn."""
    provider = ScriptedProvider([text_round("answer")])
    committing = threading.Event()
    release = threading.Event()
    with trio.fail_after(TIMEOUT):
        async with two_connections(tmp_path, db_path, provider) as (first, second, store, live):
            original = store.sync.append_turn

            def slow_append(
                session_id: str, turn: CompletedTurn, *, epoch: int | None = None
            ) -> None:
                committing.set()
                release.wait(10)
                original(session_id, turn, epoch=epoch)

            store.sync.append_turn = slow_append  # type: ignore[method-assign]
            session_id = await first.new_session(session_dir(tmp_path))
            answered = await first.prompt_request(session_id, "last words")
            await trio.to_thread.run_sync(committing.wait)
            first_copy = live.holder(session_id)
            loading = await second.request("session/load", {"sessionId": session_id})
            # The load has begun its takeover (it holds the id now) while the commit waits.
            await poll_until(lambda: live.holder(session_id) is not first_copy)
            release.set()
            answer = await first.wait_response(answered)
            assert answer["result"]["stopReason"] == "end_turn", answer
            loaded = await second.wait_response(loading)
            assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
            assert user_texts(second.updates(session_id)) == ["last words"]
    assert stored_users(db_path, session_id) == ["last words"]


async def test_a_claim_from_another_process_refuses_the_next_prompt_before_the_model(
    tmp_path: Path, db_path: Path
) -> None:
    provider = ScriptedProvider([text_round("answer")])
    with trio.fail_after(TIMEOUT):
        async with two_connections(tmp_path, db_path, provider) as (first, _, _store, _):
            session_id = await first.new_session(session_dir(tmp_path))
            await first.prompt(session_id, "one")
            other_process = SessionStore.open(db_path)
            assert other_process.claim_session(session_id) == 2
            other_process.close()
            requests_before = len(provider.requests)
            error = await first.error("session/prompt", {"sessionId": session_id, "prompt": "x"})
            assert error["code"] == SESSION_NOT_FOUND
            assert "taken over" in error["message"]
            assert len(provider.requests) == requests_before  # refused before any model call
            assert first.updates(session_id)[-1]["sessionUpdate"] != "user_message_chunk"
            # Loading it again here takes it back.
            assert (await first.result("session/resume", {"sessionId": session_id})).keys() == {
                "modes",
                "configOptions",
            }
            assert (await first.prompt(session_id, "two"))["result"]["stopReason"] == "end_turn"
    assert stored_users(db_path, session_id) == ["one", "two"]


async def test_a_turn_fenced_off_mid_way_is_answered_with_an_error_that_says_so(
    tmp_path: Path, db_path: Path
) -> None:
    provider = ScriptedProvider([text_round("slow ", "answer")])
    with trio.fail_after(TIMEOUT):
        async with two_connections(tmp_path, db_path, provider) as (first, _, _store, _):
            session_id = await first.new_session(session_dir(tmp_path))
            provider.gate = trio.Event()
            running = await first.prompt_request(session_id, "never saved")
            await first.receive()  # the turn streams its first chunk
            other_process = SessionStore.open(db_path)
            other_process.claim_session(session_id)
            other_process.close()
            provider.gate.set()
            answer = await first.wait_response(running)
            assert answer["error"]["code"] == SESSION_NOT_FOUND, answer
            message = answer["error"]["message"]
            assert "The turn was not saved" in message
            assert "open elsewhere" in message
            error = await first.error("session/prompt", {"sessionId": session_id, "prompt": "x"})
            assert "taken over" in error["message"]
    assert stored_users(db_path, session_id) == []


async def test_a_reaped_session_claimed_elsewhere_is_not_taken_back_by_a_prompt(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    store = FakeStore()
    provider = ScriptedProvider([text_round("answer")])
    config = make_config(tmp_path, session_timeout_secs=100)
    with trio.fail_after(1000):
        async with open_server(
            config, provider=provider, store=store, reap_idle_sessions=True
        ) as client:
            kept = await client.new_session(session_dir(tmp_path))
            claimed = await client.new_session(session_dir(tmp_path))
            await trio.sleep(200)  # both idle past the timeout: the reaper drops them
            store.epochs[claimed] += 1  # another process loaded this one meanwhile
            answered = await client.prompt(kept, "restored by its prompt")
            refused = await client.error(
                "session/prompt", {"sessionId": claimed, "prompt": "not here"}
            )
    assert answered["result"]["stopReason"] == "end_turn", answered
    assert refused["code"] == SESSION_NOT_FOUND
    assert "taken over" in refused["message"]
    assert len(store.turns[kept]) == 1
    assert claimed not in store.turns


def test_taken_over_is_the_session_not_found_code_with_its_reason() -> None:
    plain = rpc_error_for(SessionTakenOver("s-1"), method="session/prompt")
    assert plain.code == SESSION_NOT_FOUND
    assert plain.message.startswith("Session s-1 was taken over by another connection")
    unsaved = SessionTakenOver("s-1", turn_unsaved=True)
    acp = rpc_error_for(unsaved, method="session/prompt", acp_codes=True)
    assert acp.code == -32002  # ACP's code for a missing resource
    assert acp.message.startswith("The turn was not saved: session s-1 is now open elsewhere")


async def test_loads_racing_on_two_connections_leave_exactly_one_live_copy(
    tmp_path: Path, db_path: Path
) -> None:
    provider = ScriptedProvider([text_round("answer")])
    with trio.fail_after(TIMEOUT):
        async with two_connections(tmp_path, db_path, provider) as (first, second, store, live):
            session_id = await first.new_session(session_dir(tmp_path))
            await first.prompt(session_id, "one")
            await first.result("session/close", {"sessionId": session_id})
            assert live.holder(session_id) is None
            loads = [
                await peer.request("session/load", {"sessionId": session_id})
                for peer in (first, second)
            ]
            answers = [
                await peer.wait_response(request)
                for peer, request in zip((first, second), loads, strict=True)
            ]
            assert "result" in answers[1], answers  # the later load always wins
            # The earlier one either lost before it opened anything, or opened and was
            # taken over right after.
            assert "result" in answers[0] or "taken over" in answers[0]["error"]["message"]
            replies = [
                await peer.call("session/prompt", {"sessionId": session_id, "prompt": "two"})
                for peer in (first, second)
            ]
            assert "taken over" in replies[0]["error"]["message"], replies
            assert replies[1]["result"]["stopReason"] == "end_turn", replies
            assert await store.current_epoch(session_id) == 3  # the creator's 1, two claims
    assert stored_users(db_path, session_id) == ["one", "two"]
