"""Session persistence through real `zeroclaw acp` processes.

Restart survival, crash safety under SIGKILL, two processes sharing one store, and the
in-memory fallback when the store cannot be opened.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.model import ChatMessage, CompletedTurn
from acp_server.storage import DEFAULT_MAX_RESTORED_MESSAGES
from acp_server.storage.sqlite import SessionStore
from tests.e2e.helpers import (
    JsonDict,
    RpcPipeClient,
    allow_once,
    child_env,
    console_script,
    open_session,
    spawn_acp,
    unprivileged_prefix,
)
from tests.helpers import TIMING_SENSITIVE, echo_config, session_dir, write_config
from tests.server.storage.test_store import damage_pages

pytestmark = pytest.mark.e2e

SESSION_NOT_FOUND = -32000
INVALID_PARAMS = -32602


def store_file(config_dir: Path) -> Path:
    """echo_config sets no workspace_dir: the default is <config_dir>/data."""
    return config_dir / "data" / "sessions" / "acp-sessions.db"


def config_and_workspace(tmp_path: Path, *, chunk_delay_ms: int = 0) -> tuple[Path, Path]:
    """An echo-provider config dir and an empty workspace with one file in it."""
    config_dir = write_config(tmp_path / "cfg", echo_config(chunk_delay_ms=chunk_delay_ms))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hi\n")
    return config_dir, workspace


def coalesce(updates: Sequence[JsonDict]) -> list[JsonDict]:
    """Merge runs of text chunks of one kind: live text streams word by word, replay sends
    one chunk per message, and clients append chunks, so both render the same."""
    merged: list[JsonDict] = []
    for update in updates:
        kind = update["sessionUpdate"]
        previous = merged[-1] if merged else None
        if kind.endswith("_chunk") and previous is not None and previous["sessionUpdate"] == kind:
            text = previous["content"]["text"] + update["content"]["text"]
            merged[-1] = {**previous, "content": {"type": "text", "text": text}}
        else:
            merged.append(update)
    return merged


def as_replayed(prompt: str, live: Sequence[JsonDict]) -> list[JsonDict]:
    """What session/load must send for a turn the client saw live: its prompt as a
    user_message_chunk, then the same updates; an announced call replays as completed
    (a call that already ran has no in_progress step). The session's title is not part of a
    turn's replay (``titles_of``), nor is its token usage (``usage_update``)."""
    expected: list[JsonDict] = [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": prompt}}
    ]
    for update in coalesce(live):
        if update.get("status") == "in_progress" or update["sessionUpdate"] in (
            "session_info_update",
            "usage_update",
        ):
            continue
        if update["sessionUpdate"] == "tool_call":
            update = {**update, "status": "completed"}
        expected.append(update)
    return expected


def titles_of(live: Sequence[JsonDict]) -> list[JsonDict]:
    """The session_info_update a turn streamed (the first prompt names the session):
    session/load sends it once, after the whole history."""
    return [update for update in live if update["sessionUpdate"] == "session_info_update"]


async def prompt_turn(client: RpcPipeClient, session_id: str, prompt: str) -> list[JsonDict]:
    """Run one turn to end_turn; returns the updates it streamed."""
    before = len(client.notifications)
    response = await client.prompt(session_id, prompt, on_request=allow_once)
    assert response.get("result", {}).get("stopReason") == "end_turn", response
    return [
        note["params"]["update"]
        for note in client.notifications[before:]
        if note["method"] == "session/update" and note["params"]["sessionId"] == session_id
    ]


TURN_PROMPTS = (
    "/think Plan first.\nHello, restart survival ✓",
    'Listing now\n/tool shell {"command": "ls"}',
    '/tool file_write {"path": "notes.md", "content": "# Notes\\n"}',
    "/tool todo_write "
    '{"todos": [{"content": "Read", "status": "completed", "priority": "high"},'
    ' {"content": "Write", "status": "in_progress", "activeForm": "Writing"}]}',
    "And a plain last turn.",
)


async def test_session_survives_a_restart_and_replays_what_the_client_saw(
    tmp_path: Path,
) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    expected: list[JsonDict] = []
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as first:
            session_id = await open_session(first, workspace)
            for prompt in TURN_PROMPTS:
                expected += as_replayed(prompt, await prompt_turn(first, session_id, prompt))
        assert first.process.returncode == 0

        async with spawn_acp(config_dir) as second:
            init = await second.call("initialize", {"protocolVersion": 1})
            capabilities = init["result"]["agentCapabilities"]
            assert capabilities["loadSession"] is True
            assert capabilities["sessionCapabilities"] == {
                "resume": {},
                "close": {},
                "list": {},
                "delete": {},
                "additionalDirectories": {},
                "fork": {},
            }
            loaded = await second.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}
            assert second.updates(session_id) == expected
            # Loaded means active: it takes prompts, and a second load is refused.
            again = await second.call("session/load", {"session_id": session_id})
            assert again["error"]["code"] == INVALID_PARAMS
            assert "session/close" in again["error"]["message"]
            await prompt_turn(second, session_id, "one more after the restart")
            closed = await second.call("session/close", {"sessionId": session_id})
            assert closed["result"] == {}
            # Closed is not deleted: the same process can load it again, new turn included.
            before = len(second.notifications)
            reloaded = await second.call("session/load", {"sessionId": session_id})
            assert reloaded["result"].keys() == {"modes", "configOptions"}
            replayed = [note["params"]["update"] for note in second.notifications[before:]]
            assert replayed[: len(expected)] == expected
            assert replayed[len(expected)]["content"]["text"] == "one more after the restart"
            await second.call("session/close", {"sessionId": session_id})

        async with spawn_acp(config_dir) as third:
            await third.call("initialize", {"protocolVersion": 1})
            resumed = await third.call("session/resume", {"sessionId": session_id})
            assert resumed["result"].keys() == {"modes", "configOptions"}
            # Resume replays nothing (ACP), not even the latest stored plan.
            assert third.updates(session_id) == []
            assert third.titles(session_id) == []
            missing = await third.call("session/load", {"sessionId": "no-such-session"})
            assert missing["error"]["code"] == SESSION_NOT_FOUND

    stored = SessionStore.open(store_file(config_dir))
    loaded_session = stored.load_session(session_id)
    stored.close()
    assert loaded_session is not None
    assert loaded_session.info.workspace_dir == str(workspace.resolve())
    assert loaded_session.info.turn_count == len(TURN_PROMPTS) + 1
    user_texts = [m.content for m in loaded_session.messages if m.role == "user"]
    assert user_texts == [*TURN_PROMPTS, "one more after the restart"]


async def test_store_failure_on_load_is_internal_error_and_releases_the_slot(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(max_sessions=1))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            await prompt_turn(client, session_id, "stored")
            await client.call("session/close", {"sessionId": session_id})
            # Break the store under the running server: the next read fails in SQLite.
            with sqlite3.connect(store_file(config_dir)) as conn:
                conn.execute("DROP TABLE acp_tool_calls")
            for _ in range(2):  # the same error again: nothing is left reserved
                failed = await client.call("session/load", {"sessionId": session_id})
                assert failed["error"]["code"] == -32603, failed
                assert "Failed to load session" in failed["error"]["message"]
            # max_sessions is 1 and the failed loads hold no slot.
            new = await client.call("session/new", {"cwd": str(workspace)})
            assert "result" in new, new


async def test_restoring_a_huge_session_keeps_the_newest_turns_and_says_so(
    tmp_path: Path,
) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    store = SessionStore.open(store_file(config_dir))
    store.create_session("huge", "echo", str(workspace))
    turns = DEFAULT_MAX_RESTORED_MESSAGES // 2 + 1  # two messages a turn: one turn too many
    for number in range(turns):
        store.append_turn(
            "huge",
            CompletedTurn(
                messages=(
                    ChatMessage(role="user", content=f"question {number}"),
                    ChatMessage(role="assistant", content=f"answer {number}"),
                )
            ),
        )
    store.close()
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            loaded = await client.call("session/load", {"sessionId": "huge"}, within=50)
            assert loaded["result"].keys() == {"modes", "configOptions"}
            notice, *replay = client.notifications
            assert notice == {
                "jsonrpc": "2.0",
                "method": "_zeroclaw/history_trimmed",
                "params": {
                    "sessionId": "huge",
                    "droppedMessages": 2,
                    "keptTurns": turns - 1,
                    "reason": notice["params"]["reason"],
                },
            }
            assert len(replay) == DEFAULT_MAX_RESTORED_MESSAGES
            first = replay[0]["params"]["update"]
            assert first["content"]["text"] == "question 1"  # question 0 was the one dropped
            last = replay[-1]["params"]["update"]
            assert last["content"]["text"] == f"answer {turns - 1}"


# --------------------------------------------------------------------------- crash safety


def check_store_after_crash(
    path: Path, session_id: str, answered: list[str], in_flight: str | None
) -> None:
    """Integrity ok; every answered turn is present in full; nothing partial."""
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = conn.execute(
            "SELECT m.turn_seq, m.role FROM acp_messages AS m"
            " JOIN acp_sessions AS s ON s.id = m.session_id"
            " WHERE s.session_uuid = ? ORDER BY m.id",
            (session_id,),
        ).fetchall()
    store = SessionStore.open(path)
    stored = store.load_session(session_id)
    store.close()
    assert stored is not None
    turns: dict[int, list[ChatMessage]] = {}
    for (turn_seq, _role), message in zip(rows, stored.messages, strict=True):
        turns.setdefault(turn_seq, []).append(message)
    assert sorted(turns) == list(range(len(turns)))
    prompts = []
    for messages in turns.values():
        # A whole turn: the prompt, then model rounds, every call answered, a final answer.
        assert messages[0].role == "user"
        prompts.append(messages[0].content)
        calls = [call.id for m in messages for call in m.tool_calls]
        results = [m.tool_call_id for m in messages if m.role == "tool"]
        assert calls == results
        assert messages[-1].role == "assistant"
        assert not messages[-1].tool_calls
        assert messages[-1].content
    # Answered turns in order; at most the in-flight one after them (it may have committed
    # in the instant before the kill).
    assert prompts[: len(answered)] == answered
    assert prompts[len(answered) :] in ([], [in_flight])


ATTEMPT_DEADLINE_SECS = 30


async def test_sigkill_at_any_point_never_loses_or_tears_a_turn(tmp_path: Path) -> None:
    config_dir, workspace = config_and_workspace(tmp_path, chunk_delay_ms=3)
    rng = random.Random(5)
    session_id: str | None = None
    answered: list[str] = []
    kills = 15
    for attempt in range(kills):
        # A deadline per start, turn and kill (each takes well under a second on a quiet
        # machine): the sum of fifteen depends on how loaded the machine is, a hang does not.
        with trio.fail_after(ATTEMPT_DEADLINE_SECS):
            async with spawn_acp(config_dir) as client:
                if session_id is None:
                    session_id = await open_session(client, workspace)
                else:
                    await client.call("initialize", {"protocolVersion": 1})
                    loaded = await client.call("session/load", {"sessionId": session_id})
                    assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
                # One answered turn, then one killed part-way.
                prompt = f'turn {attempt} answered\n/tool file_read {{"path": "hello.txt"}}'
                await prompt_turn(client, session_id, prompt)
                answered.append(prompt)
                in_flight = (
                    f"turn {attempt} killed with some words to stream\n"
                    '/tool shell {"command": "ls"}'
                )
                request_id = await client.prompt_request(session_id, in_flight)
                if await kill_part_way(client, request_id, rng, attempt):
                    answered.append(in_flight)  # its response arrived: it must be stored
            check_store_after_crash(store_file(config_dir), session_id, answered, in_flight)
            # An in-flight turn that committed before the kill counts as answered.
            stored = SessionStore.open(store_file(config_dir))
            done = stored.load_session(session_id)
            stored.close()
            assert done is not None
            if sum(m.role == "user" for m in done.messages) > len(answered):
                answered.append(in_flight)


async def kill_part_way(
    client: RpcPipeClient, request_id: int, rng: random.Random, attempt: int
) -> bool:
    """SIGKILL the server somewhere in the turn: right away, after some streamed chunks,
    on the permission request (mid-tool), in the window around the commit, or just after
    the answer. Returns whether the turn's response had arrived."""
    mode = attempt % 5
    answered = False
    if mode == 0:
        await trio.sleep(rng.uniform(0, 0.01))  # the kill's timing is the point, not a wait
    else:
        chunks_before_kill = rng.randint(0, 6)
        seen = 0
        while True:
            message = await client.receive()
            if message.get("method") == "session/request_permission":
                if mode == 2:
                    break  # mid-tool: the call is announced but never runs
                await client.send(
                    {"jsonrpc": "2.0", "id": message["id"], "result": allow_once(message)}
                )
                if mode == 3:
                    # The tool runs, its summary streams, the turn commits: kill in there.
                    await trio.sleep(rng.uniform(0.0, 0.04))
                    break
            elif message.get("method") == "session/update":
                seen += 1
                if mode == 1 and seen > chunks_before_kill:
                    break
            elif message.get("id") == request_id:
                answered = True
                break
    client.process.kill()
    await client.process.wait()
    assert client.process.returncode == -9
    return answered


# --------------------------------------------------------------------------- two processes


async def test_two_processes_share_one_store_without_losing_turns(tmp_path: Path) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    sessions_per_process, turns_per_session = 3, 6
    created: list[str] = []

    async def drive(client: RpcPipeClient, session_id: str, tag: str) -> None:
        for turn in range(turns_per_session):
            # Requests of one connection may interleave; pair each with its own id.
            request_id = await client.request(
                "session/prompt", {"sessionId": session_id, "prompt": f"{tag} turn {turn}"}
            )
            response = await client.wait_response(request_id)
            assert response["result"]["stopReason"] == "end_turn", response

    async def one_process(index: int) -> None:
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            ids = []
            for _ in range(sessions_per_process):
                new = await client.call("session/new", {"cwd": str(workspace)})
                ids.append(new["result"]["sessionId"])
            created.extend(ids)
            for number, session_id in enumerate(ids):
                # Sequential per connection: the helper reads one stream.
                await drive(client, session_id, f"p{index}s{number}")

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one_process, 0)
            nursery.start_soon(one_process, 1)

    assert len(set(created)) == 2 * sessions_per_process
    store = SessionStore.open(store_file(config_dir))
    try:
        infos = {info.session_id: info for info in store.list_sessions()}
        assert set(infos) == set(created)
        for session_id in created:
            stored = store.load_session(session_id)
            assert stored is not None
            prompts = [m.content for m in stored.messages if m.role == "user"]
            assert len(prompts) == turns_per_session
            assert prompts == [f"{prompts[0][:-1]}{n}" for n in range(turns_per_session)]
    finally:
        store.close()


# --------------------------------------------------------------------------- fallback


async def assert_in_memory_only(config_dir: Path, workspace: Path, prefix: list[str]) -> str:
    """Serve one in-memory session through a real `zeroclaw acp`; returns its one warning."""
    process = await trio.lowlevel.open_process(
        [*prefix, str(console_script("zeroclaw")), "acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(config_dir),
    )
    client = RpcPipeClient(process)
    stderr = b""
    try:
        init = await client.call("initialize", {"protocolVersion": 1})
        capabilities: dict[str, Any] = init["result"]["agentCapabilities"]
        assert capabilities["loadSession"] is False
        assert not capabilities.get("sessionCapabilities")
        new = await client.call("session/new", {"cwd": str(workspace)})
        session_id = new["result"]["sessionId"]
        await prompt_turn(client, session_id, "still works in memory")
        for method in ("session/load", "session/resume"):
            failed = await client.call(method, {"sessionId": session_id})
            assert failed["error"]["code"] == SESSION_NOT_FOUND, failed
    finally:
        await client.close_stdin()
        assert process.stderr is not None
        async with process.stderr:
            while chunk := await process.stderr.receive_some(65536):
                stderr += chunk
        await process.wait()
    assert process.returncode == 0
    warnings = [line for line in stderr.decode().splitlines() if "session store" in line]
    assert len(warnings) == 1, stderr.decode()
    return warnings[0]


async def test_read_only_store_directory_falls_back_to_memory(tmp_path: Path) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    sessions = store_file(config_dir).parent
    sessions.mkdir(parents=True)
    prefix = unprivileged_prefix()
    sessions.chmod(0o555)
    try:
        with trio.fail_after(30):
            await assert_in_memory_only(config_dir, workspace, prefix)
    finally:
        sessions.chmod(0o755)
    assert list(sessions.iterdir()) == []


async def test_corrupt_store_falls_back_to_memory_and_is_kept(tmp_path: Path) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    path = store_file(config_dir)
    path.parent.mkdir(parents=True)
    garbage = b"not a database, but somebody's data\n" * 200
    path.write_bytes(garbage)
    with trio.fail_after(30):
        await assert_in_memory_only(config_dir, workspace, [])
    assert path.read_bytes() == garbage


async def test_store_failing_quick_check_falls_back_to_memory_and_is_not_written(
    tmp_path: Path,
) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    path = store_file(config_dir)
    store = SessionStore.open(path)
    store.create_session("s1", "echo", str(workspace))
    for n in range(40):
        store.append_turn("s1", CompletedTurn(messages=(ChatMessage("user", f"turn {n} " * 60),)))
    store.close()
    damage_pages(path)
    damaged = path.read_bytes()
    with trio.fail_after(30):
        warning = await assert_in_memory_only(config_dir, workspace, [])
    assert "damaged" in warning
    assert path.read_bytes() == damaged


@TIMING_SENSITIVE
async def test_a_store_locked_by_another_process_falls_back_within_seconds(
    tmp_path: Path,
) -> None:
    config_dir, workspace = config_and_workspace(tmp_path)
    path = store_file(config_dir)
    SessionStore.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # this test process holds the write lock throughout
    try:
        with trio.fail_after(15):  # startup, a turn and EOF; the lock used to cost 30 s
            warning = await assert_in_memory_only(config_dir, workspace, [])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked by another process" in warning
    assert f"pid {os.getpid()} " in warning  # the holder is named


# --------------------------------------------------------------------------- unwritten turns


async def test_cancelled_and_failed_turns_are_not_written(tmp_path: Path) -> None:
    """Only completed turns are persisted; a cancelled or failed one leaves no
    trace in the store, so a later load replays exactly the turns that ended normally."""
    config_dir, workspace = config_and_workspace(tmp_path, chunk_delay_ms=20)
    long_prompt = " ".join(f"word{n}" for n in range(200))
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            prompt_id = await client.prompt_request(session_id, long_prompt)
            while True:  # cancel once the turn is visibly streaming
                message = await client.receive()
                if message.get("method") == "session/update":
                    break
            await client.notify("session/cancel", {"sessionId": session_id})
            cancelled = await client.wait_response(prompt_id)
            assert cancelled["result"]["stopReason"] == "cancelled", cancelled
            failed = await client.prompt(session_id, "/fail the model broke")
            assert failed["error"]["code"] == -32603, failed
            assert "the model broke" in failed["error"]["message"]
            await prompt_turn(client, session_id, "the turn that counts")

        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            loaded = await client.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
            replayed = client.updates(session_id)
    texts = [(u["sessionUpdate"], u["content"]["text"]) for u in coalesce(replayed)]
    assert texts == [
        ("user_message_chunk", "the turn that counts"),
        ("agent_message_chunk", "the turn that counts"),
    ]


async def test_persistence_turned_off_writes_no_file_and_offers_no_load(tmp_path: Path) -> None:
    """`[acp] session_persistence = false`: in-memory sessions by choice, no store file."""
    document = echo_config()
    document["acp"] = {"session_persistence": False}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            init = await client.call("initialize", {"protocolVersion": 1})
            capabilities = init["result"]["agentCapabilities"]
            assert capabilities["loadSession"] is False
            assert not capabilities.get("sessionCapabilities")
            new = await client.call("session/new", {"cwd": str(session_dir(tmp_path))})
            session_id = new["result"]["sessionId"]
            await prompt_turn(client, session_id, "kept in memory")
            failed = await client.call("session/load", {"sessionId": session_id})
            assert failed["error"]["code"] == SESSION_NOT_FOUND, failed
    assert not store_file(config_dir).parent.exists()


async def test_escalations_and_delivered_files_replay_as_seen_live(tmp_path: Path) -> None:
    """What a tool streamed (an escalation's text) and a delivered file's title and
    embedded blob come back on session/load; a delivery whose uploads/ copy changed since
    replays as `failed`, as it would have live."""
    config_dir, workspace = config_and_workspace(tmp_path)
    (workspace / "report.md").write_text("# Report\n")
    prompts = (
        '/tool escalate_to_human {"summary": "Need the deploy key", "context": "Ask ops.",'
        ' "urgency": "high"}',
        '/tool deliver_file {"path": "hello.txt", "title": "Greeting"}',
        '/tool deliver_file {"path": "report.md"}',
    )
    live: list[list[JsonDict]] = []
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as first:
            session_id = await open_session(first, workspace)
            for prompt in prompts:
                live.append(await prompt_turn(first, session_id, prompt))
        escalation = [u for u in live[0] if u["sessionUpdate"] == "agent_message_chunk"]
        assert "Need the deploy key" in escalation[0]["content"]["text"]
        greeting = next(
            u
            for u in live[1]
            if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
        )
        assert greeting["title"] == "Greeting"
        assert greeting["content"][1]["content"]["resource"]["blob"] == "aGkK"  # "hi\n"
        report = next(
            u
            for u in live[2]
            if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
        )
        report_uri = report["content"][1]["content"]["resource"]["uri"]
        # The delivered copy changes while no process runs.
        copy = workspace / "uploads" / report_uri.removeprefix("attachment://deliver/")
        copy.unlink()
        copy.write_text("# Tampered\n")

        expected: list[JsonDict] = []
        for prompt, updates in zip(prompts, live, strict=True):
            expected += as_replayed(prompt, updates)
        failed = {
            **report,
            "status": "failed",
            "content": report["content"][:1],  # the text, no blob
        }
        assert report in expected
        expected = [failed if update == report else update for update in expected]
        async with spawn_acp(config_dir) as second:
            await second.call("initialize", {"protocolVersion": 1})
            loaded = await second.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}
            assert second.updates(session_id) == expected
