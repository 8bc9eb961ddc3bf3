"""session/load, session/resume, session/close against the store contract (a fake store)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import trio

from acp_server.agent.limits.spend import MemoryLedger
from acp_server.model import ChatMessage, CompletedTurn, PlanStep, ToolCall
from acp_server.storage import (
    CREATOR_EPOCH,
    AsyncSessionStore,
    SessionFenced,
    SpendEntry,
    SpendTotals,
    StoredSession,
    StoredSessionInfo,
    StoreError,
)
from tests.helpers import make_config, rpc_error, session_dir
from tests.jsonrpc_peer import JsonDict
from tests.server.server_harness import ScriptedProvider, ServerHarness, open_server, text_round


class FakeStore(AsyncSessionStore):
    """An in-memory store (no worker threads, so autojump-free tests stay deterministic)."""

    def __init__(self) -> None:
        self.sessions: dict[str, StoredSession] = {}
        self.turns: dict[str, list[CompletedTurn]] = {}
        self.epochs: dict[str, int] = {}
        self.fail_load = False
        self.fail_append = False
        self.spend = MemoryLedger()
        self.roots: dict[str, tuple[str, ...]] = {}

    def add(
        self,
        session_id: str,
        workspace: Path,
        messages: list[ChatMessage],
        *,
        agent: str = "echo",
        plan: tuple[PlanStep, ...] | None = None,
    ) -> None:
        now = datetime.now(UTC)
        info = StoredSessionInfo(session_id, agent, str(workspace), now, now, len(messages))
        self.sessions[session_id] = StoredSession(info, tuple(messages), plan)
        self.epochs[session_id] = CREATOR_EPOCH

    async def create_session(
        self,
        session_id: str,
        agent_alias: str,
        workspace_dir: str,
        *,
        principal: str | None = None,
    ) -> None:
        self.add(session_id, Path(workspace_dir), [], agent=agent_alias)
        await trio.lowlevel.checkpoint()

    async def claim_session(self, session_id: str) -> int | None:
        await trio.lowlevel.checkpoint()
        if session_id not in self.sessions:
            return None
        self.epochs[session_id] += 1
        return self.epochs[session_id]

    async def current_epoch(self, session_id: str) -> int | None:
        await trio.lowlevel.checkpoint()
        return self.epochs.get(session_id)

    async def append_turn(
        self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
    ) -> None:
        await trio.lowlevel.checkpoint()
        if self.fail_append:
            raise StoreError("disk full")
        current = self.epochs.get(session_id)
        if epoch is not None and current is not None and epoch != current:
            raise SessionFenced(session_id, epoch=epoch, current=current)
        self.turns.setdefault(session_id, []).append(turn)

    async def load_session(
        self, session_id: str, *, max_messages: int | None = None
    ) -> StoredSession | None:
        await trio.lowlevel.checkpoint()
        if self.fail_load:
            raise StoreError("database disk image is malformed")
        return self.sessions.get(session_id)

    async def touch(self, session_id: str) -> None:
        await trio.lowlevel.checkpoint()

    async def record_spend(self, entry: SpendEntry) -> None:
        await self.spend.record_spend(entry)

    async def spend_totals(
        self, day: str, agent_alias: str, principal: str | None = None
    ) -> SpendTotals:
        return await self.spend.spend_totals(day, agent_alias, principal)

    async def set_additional_dirs(self, session_id: str, directories: Sequence[str]) -> bool:
        await trio.lowlevel.checkpoint()
        self.roots[session_id] = tuple(directories)
        return session_id in self.sessions

    async def additional_dirs(self, session_id: str) -> tuple[str, ...]:
        await trio.lowlevel.checkpoint()
        return self.roots.get(session_id, ())

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


HISTORY = [
    ChatMessage("user", "hello"),
    ChatMessage("assistant", "hi there", reasoning="greet back"),
    ChatMessage("assistant", "", tool_calls=(ToolCall("t1", "shell", {"command": "ls"}),)),
    ChatMessage("tool", "a.txt", tool_call_id="t1", tool_name="shell"),
]


async def test_initialize_with_a_store_advertises_persistence(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), store=FakeStore()) as client:
            caps = (await client.result("initialize", {}))["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["sessionCapabilities"] == {
        "resume": {},
        "close": {},
        "list": {},
        "delete": {},
        "additionalDirectories": {},
        "fork": {},
    }


async def test_new_sessions_and_completed_turns_are_persisted(tmp_path: Path) -> None:
    store = FakeStore()
    provider = ScriptedProvider([text_round("one"), text_round("two")])
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, store=store) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            await client.result("session/prompt", {"sessionId": session_id, "prompt": "a"})
            store.fail_append = True  # a store failure only logs: the turn still succeeds
            second = await client.result("session/prompt", {"sessionId": session_id, "prompt": "b"})
    assert store.sessions[session_id].info.workspace_dir == str(session_dir(tmp_path))
    [turn] = store.turns[session_id]
    assert [(m.role, m.content) for m in turn.messages] == [("user", "a"), ("assistant", "one")]
    assert second["content"] == "two"


async def test_load_replays_history_then_answers(tmp_path: Path) -> None:
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), HISTORY)
    provider = ScriptedProvider([text_round("next")])
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), provider=provider, store=store) as client:
            request_id = await client.request("session/load", {"session_id": "s-1"})
            response = await client.wait_response(request_id)
            await client.result("session/prompt", {"sessionId": "s-1", "prompt": "more"})
    assert response["result"].keys() == {"modes", "configOptions"}
    updates = client.updates("s-1")[:5]
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
    ]
    assert updates[3]["status"] == "completed"
    assert updates[4]["rawOutput"] == "a.txt"
    # The agent was seeded with the stored history.
    assert [m.content for m in provider.requests[0].messages][:2] == ["hello", "hi there"]


async def test_resume_sends_no_update_before_answering(tmp_path: Path) -> None:
    """ACP: session/resume does not replay; not even the plan goes out."""
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), HISTORY, plan=(PlanStep("ship it"),))
    store.add("s-2", session_dir(tmp_path), HISTORY)
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), store=store) as client:
            assert (await client.result("session/resume", {"sessionId": "s-1"})).keys() == {
                "modes",
                "configOptions",
            }
            assert (await client.result("session/resume", {"sessionId": "s-2"})).keys() == {
                "modes",
                "configOptions",
            }
    assert client.updates() == []


async def test_restore_errors_in_zeroclaw_order(tmp_path: Path) -> None:
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), HISTORY)
    store.add("s-2", session_dir(tmp_path), HISTORY)
    config = make_config(tmp_path, max_sessions=2)
    with trio.fail_after(5):
        async with open_server(config) as client:
            no_store = await client.error("session/load", {"sessionId": "s-1"})
        async with open_server(config, store=store) as client:
            missing = await client.error("session/resume", {})
            unknown = await client.error("session/load", {"sessionId": "nope"})
            store.fail_load = True
            broken = await client.error("session/load", {"sessionId": "s-1"})
            broken_again = await client.error(
                "session/resume", {"sessionId": "s-1"}
            )  # slot released
            store.fail_load = False
            await client.result("session/load", {"sessionId": "s-1"})
            active = await client.error("session/resume", {"sessionId": "s-1"})
            await client.result("session/resume", {"sessionId": "s-2"})
            limit = await client.error(
                "session/load", {"sessionId": "s-1"}
            )  # limit before "active"
            assert await client.result("session/close", {"sessionId": "s-1"}) == {}
            reloaded = await client.call("session/load", {"sessionId": "s-1"})
    assert no_store == rpc_error(-32000, "Session not found: s-1")
    assert missing == rpc_error(-32602, "Missing required parameter: sessionId")
    assert unknown == rpc_error(-32000, "Session not found: nope")
    assert broken["code"] == broken_again["code"] == -32603
    assert broken["message"].startswith("Failed to load session")
    assert active == rpc_error(-32602, "Session already active: s-1. Call session/close first.")
    assert limit == rpc_error(-32001, "Maximum session limit reached (2)")
    assert reloaded["result"].keys() == {"modes", "configOptions"}


async def test_restore_falls_back_when_the_owner_is_disabled(tmp_path: Path) -> None:
    agents = {
        "old": {"enabled": False},
        "new": {},
    }
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), HISTORY, agent="old")
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path, agents=agents), store=store) as client:
            assert (await client.result("session/resume", {"sessionId": "s-1"})).keys() == {
                "modes",
                "configOptions",
            }


async def pipelined(client: ServerHarness, *calls: tuple[str, str]) -> list[JsonDict]:
    """Send every (method, sessionId) call at once, then read each response in order."""
    ids = [await client.request(method, {"sessionId": sid}) for method, sid in calls]
    return [await client.wait_response(request_id) for request_id in ids]


async def test_a_close_pipelined_behind_a_load_closes_the_loaded_session(tmp_path: Path) -> None:
    store = FakeStore()
    store.add("s-1", session_dir(tmp_path), HISTORY)
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), store=store) as client:
            loaded, closed = await pipelined(
                client, ("session/load", "s-1"), ("session/close", "s-1")
            )
            prompt = await client.error(
                "session/prompt", {"sessionId": "s-1", "prompt": [{"type": "text", "text": "hi"}]}
            )
            stopped, reloaded = await pipelined(
                client, ("session/stop", "s-1"), ("session/load", "s-1")
            )
    assert loaded["result"].keys() == {"modes", "configOptions"}
    assert closed["result"] == {}
    assert prompt["code"] == -32000  # closed: no longer live
    assert stopped["error"]["code"] == -32000  # nothing to stop: the load came after it
    assert reloaded["result"].keys() == {"modes", "configOptions"}  # the close freed the id


async def test_a_stop_behind_a_failing_load_is_not_found(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(make_config(tmp_path), store=FakeStore()) as client:
            loaded, stopped = await pipelined(
                client, ("session/load", "s-9"), ("session/stop", "s-9")
            )
    assert loaded["error"]["code"] == -32000
    assert stopped["error"] == rpc_error(-32000, "Session not found: s-9")
