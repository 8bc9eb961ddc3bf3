"""The session store: schema, round trips, atomicity, failures, concurrency.

Tests that take ``backend`` run on SQLite and on PostgreSQL (tests/server/store_backends.py);
the others are about SQLite's own file, locks and schema."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from acp_server.model import ChatMessage, CompletedTurn, PlanStep, ToolCall, Usage
from acp_server.storage import (
    AsyncSessionStore,
    BadCursor,
    DuplicateSession,
    SessionBackend,
    StoreError,
    StoreUnavailable,
    TurnUnsaved,
    UnknownSession,
    open_store,
)
from acp_server.storage.sqlite import (
    DEFAULT_CREATE_LOCK_DEADLINE_SECS,
    SCHEMA_VERSION,
    SessionStore,
)
from tests.helpers import TIMING_SENSITIVE
from tests.server.store_backends import Backend, backend

__all__ = ["backend"]  # the fixture, parametrized over both backends


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions" / "acp-sessions.db"


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionBackend]:
    opened = backend.open()
    yield opened
    opened.close()


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def tool_turn(prefix: str) -> CompletedTurn:
    """A turn with every message kind: text, reasoning, tool calls, results."""
    return CompletedTurn(
        messages=(
            user(f"{prefix}: edit the file"),
            ChatMessage(
                role="assistant",
                content="",
                reasoning="I should read it first.",
                tool_calls=(
                    ToolCall(id=f"{prefix}-c1", name="file_read", arguments={"path": "a.txt"}),
                    ToolCall(
                        id=f"{prefix}-c2",
                        name="file_edit",
                        arguments={"path": "a.txt", "old_string": "x", "new_string": "ÿ ✓"},
                    ),
                ),
            ),
            ChatMessage(
                role="tool", content="x\n", tool_call_id=f"{prefix}-c1", tool_name="file_read"
            ),
            ChatMessage(
                role="tool", content="", tool_call_id=f"{prefix}-c2", tool_name="file_edit"
            ),
            ChatMessage(role="assistant", content=f"{prefix}: done ✓", reasoning="All good."),
        ),
        plan=(
            PlanStep(content="read", status="completed", priority="high"),
            PlanStep(content="edit", status="in_progress", active_form="Editing"),
        ),
        usage=Usage(input_tokens=10, output_tokens=5, reasoning_tokens=2),
    )


# --------------------------------------------------------------------------- schema


def test_new_store_is_wal_and_at_the_current_schema(db_path: Path) -> None:
    SessionStore.open(db_path).close()
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"acp_sessions", "acp_messages", "acp_tool_calls", "acp_session_events"} <= tables


def test_reopening_keeps_data_and_schema(backend: Backend) -> None:
    first = backend.open()
    first.create_session("s1", "default", "/w")
    first.append_turn("s1", tool_turn("t1"))
    first.close()
    second = backend.open()
    loaded = second.load_session("s1")
    second.close()
    assert loaded is not None
    assert loaded.messages == tool_turn("t1").messages


def _older_zeroclaw_database(path: Path) -> None:
    """A database as an older ZeroClaw build left it: user_version 0, no plan_json/killed_at,
    tool results attached to the assistant message as 'out' rows."""
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE acp_sessions (id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_uuid TEXT NOT NULL UNIQUE, agent_alias TEXT NOT NULL,
                workspace_dir TEXT NOT NULL, token_count INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL, last_activity TEXT NOT NULL);
            CREATE TABLE acp_messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id INTEGER NOT NULL REFERENCES acp_sessions(id) ON DELETE CASCADE,
                role TEXT NOT NULL, content TEXT NOT NULL, reasoning_content TEXT,
                created_at TEXT NOT NULL);
            CREATE TABLE acp_tool_calls (id INTEGER PRIMARY KEY AUTOINCREMENT,
                message_id INTEGER NOT NULL REFERENCES acp_messages(id) ON DELETE CASCADE,
                tool_call_id TEXT NOT NULL, tool_name TEXT NOT NULL, event_kind TEXT NOT NULL,
                payload TEXT NOT NULL, outcome TEXT, created_at TEXT NOT NULL);
            INSERT INTO acp_sessions VALUES
                (1, 'old', 'coder', '/proj', 7, '2026-01-02T03:04:05+00:00',
                 '2026-01-02T03:05:00+00:00');
            INSERT INTO acp_messages VALUES (1, 1, 'user', 'list files', NULL, 't');
            INSERT INTO acp_messages VALUES (2, 1, 'assistant', 'Listing.', NULL, 't');
            INSERT INTO acp_tool_calls VALUES (1, 2, 'call_1', 'shell', 'in', '{"command":"ls"}',
                NULL, 't');
            INSERT INTO acp_tool_calls VALUES (2, 2, 'call_1', 'shell', 'out', 'a.txt', 'unknown',
                't');
            INSERT INTO acp_messages VALUES (3, 1, 'assistant', 'One file.', NULL, 't');
            """
        )


def test_older_zeroclaw_database_is_migrated_and_readable(db_path: Path) -> None:
    _older_zeroclaw_database(db_path)
    store = SessionStore.open(db_path)
    loaded = store.load_session("old")
    assert loaded is not None
    assert loaded.info.agent_alias == "coder"
    assert loaded.info.token_count == 7
    assert loaded.plan is None
    assert loaded.messages == (
        user("list files"),
        ChatMessage(
            role="assistant",
            content="Listing.",
            tool_calls=(ToolCall(id="call_1", name="shell", arguments={"command": "ls"}),),
        ),
        ChatMessage(role="tool", content="a.txt", tool_call_id="call_1", tool_name="shell"),
        ChatMessage(role="assistant", content="One file."),
    )
    # New turns go on after the old ones; a bounded restore drops the old rows first.
    store.append_turn("old", CompletedTurn(messages=(user("more"),)))
    reloaded = store.load_session("old")
    bounded = store.load_session("old", max_messages=2)
    store.close()
    assert reloaded is not None
    assert reloaded.messages[-1] == user("more")
    assert bounded is not None
    assert bounded.messages == (user("more"),)
    assert (
        bounded.dropped_messages == 3
    )  # stored rows: ZeroClaw's implementation kept results on its call row
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_newer_schema_is_refused_and_left_untouched(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with sqlite3.connect(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = db_path.read_bytes()
    with pytest.raises(StoreUnavailable, match="newer"):
        SessionStore.open(db_path)
    assert db_path.read_bytes() == before


# --------------------------------------------------------------------------- round trips


def test_every_message_kind_round_trips(store: SessionBackend) -> None:
    odd_messages = (
        ChatMessage(role="system", content="be brief"),
        user("multi\nline ✓ 🙂"),
        ChatMessage(
            role="assistant",
            content="text and a call",
            tool_calls=(
                ToolCall(
                    id="c9", name="mcp__x__y", arguments={"nested": {"a": [1, 2.5, None, True]}}
                ),
            ),
        ),
        ChatMessage(role="tool", content="result without name", tool_call_id="c9"),
        ChatMessage(role="tool", content="result without id"),
        ChatMessage(role="assistant", content=""),
    )
    store.create_session("s1", "default", "/w")
    store.append_turn("s1", tool_turn("t1"))
    store.append_turn("s1", CompletedTurn(messages=odd_messages))
    loaded = store.load_session("s1")
    assert loaded is not None
    assert loaded.messages == tool_turn("t1").messages + odd_messages
    assert loaded.info.message_count == len(loaded.messages)
    assert loaded.info.turn_count == 2
    assert loaded.info.token_count == 15  # input + output; reasoning is part of output


def test_latest_plan_is_kept(store: SessionBackend) -> None:
    store.create_session("s1", "default", "/w")
    store.append_turn("s1", tool_turn("t1"))
    store.append_turn("s1", CompletedTurn(messages=(user("no plan this time"),)))
    loaded = store.load_session("s1")
    assert loaded is not None
    assert loaded.plan == tool_turn("t1").plan
    store.append_turn("s1", CompletedTurn(messages=(user("cleared"),), plan=()))
    cleared = store.load_session("s1")
    assert cleared is not None
    assert cleared.plan == ()


def test_restore_is_bounded_by_whole_turns(store: SessionBackend) -> None:
    store.create_session("s1", "default", "/w")
    turns = [tool_turn(f"t{n}") for n in range(4)]  # 5 messages each
    for turn in turns:
        store.append_turn("s1", turn)
    everything = store.load_session("s1", max_messages=None)
    assert everything is not None
    assert len(everything.messages) == 20
    assert (everything.dropped_messages, everything.kept_turns) == (0, 4)

    bounded = store.load_session("s1", max_messages=12)
    assert bounded is not None
    assert bounded.messages == turns[2].messages + turns[3].messages
    assert (bounded.dropped_messages, bounded.kept_turns) == (10, 2)
    assert bounded.info.message_count == 20  # what is stored, not what was restored
    assert bounded.plan == turns[3].plan

    # A single turn larger than the bound is still restored whole.
    newest_only = store.load_session("s1", max_messages=1)
    assert newest_only is not None
    assert newest_only.messages == turns[3].messages
    assert newest_only.dropped_messages == 15


def test_session_metadata(store: SessionBackend) -> None:
    store.create_session("s1", "coder", "/proj/a")
    fresh = store.load_session("s1")
    assert fresh is not None
    assert fresh.messages == ()
    assert fresh.plan is None
    assert (fresh.info.agent_alias, fresh.info.workspace_dir) == ("coder", "/proj/a")
    assert fresh.info.created_at == fresh.info.last_activity
    store.touch("s1")
    touched = store.load_session("s1")
    assert touched is not None
    assert touched.info.last_activity > fresh.info.last_activity
    assert touched.info.created_at == fresh.info.created_at


def test_list_and_delete(store: SessionBackend, backend: Backend) -> None:
    store.create_session("a", "default", "/w")
    store.create_session("b", "other", "/v")
    store.append_turn("a", tool_turn("t1"))
    listed = store.list_sessions()
    assert [info.session_id for info in listed] == ["a", "b"]  # most recent activity first
    assert [info.message_count for info in listed] == [5, 0]
    assert store.delete_session("a") is True
    assert store.delete_session("a") is False
    assert store.load_session("a") is None
    assert [info.session_id for info in store.list_sessions()] == ["b"]
    # the conversation went with it
    assert (backend.count("acp_messages"), backend.count("acp_tool_calls")) == (0, 0)


def test_list_pages_newest_first_once_each_and_by_workspace(store: SessionBackend) -> None:
    ids = [f"s{index:03}" for index in range(123)]
    for index, session_id in enumerate(ids):
        store.create_session(session_id, "default", "/a" if index % 3 else "/b")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = store.list_page(workspace_dir=None, cursor=cursor)
        seen += [info.session_id for info in page.sessions]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(reversed(ids))
    assert pages == 3  # DEFAULT_PAGE_SIZE 50
    only_b = store.list_page(workspace_dir="/b", cursor=None)
    assert [info.session_id for info in only_b.sessions] == list(reversed(ids[::3]))
    assert only_b.next_cursor is None
    with pytest.raises(BadCursor):
        store.list_page(workspace_dir=None, cursor="not-a-cursor")


def test_unknown_and_duplicate_sessions(store: SessionBackend) -> None:
    assert store.load_session("nope") is None
    with pytest.raises(UnknownSession, match="nope"):
        store.append_turn("nope", tool_turn("t1"))
    with pytest.raises(UnknownSession):
        store.touch("nope")
    store.create_session("s1", "default", "/w")
    with pytest.raises(DuplicateSession):
        store.create_session("s1", "default", "/elsewhere")
    loaded = store.load_session("s1")
    assert loaded is not None
    assert loaded.info.workspace_dir == "/w"


def test_closed_store_raises(backend: Backend) -> None:
    store = backend.open()
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.load_session("s1")


# --------------------------------------------------------------------------- atomicity


def test_failure_mid_transaction_writes_nothing(store: SessionBackend, backend: Backend) -> None:
    store.create_session("s1", "default", "/w")
    store.append_turn("s1", tool_turn("t1"))
    before = backend.snapshot()
    # Fail inside the transaction, after the user and assistant rows were inserted: on the
    # second tool call's row.
    backend.fail_inserts_of_tool_call("t2-c2")
    with pytest.raises(StoreError, match="injected"):
        store.append_turn("s1", tool_turn("t2"))
    assert backend.snapshot() == before
    # The store is still usable.
    backend.stop_failing()
    store.append_turn("s1", tool_turn("t2"))
    loaded = store.load_session("s1")
    assert loaded is not None
    assert loaded.messages == tool_turn("t1").messages + tool_turn("t2").messages


def test_unencodable_turn_writes_nothing(store: SessionBackend, backend: Backend) -> None:
    store.create_session("s1", "default", "/w")
    before = backend.snapshot()
    bad = CompletedTurn(
        messages=(
            user("hi"),
            ChatMessage(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="c1", name="shell", arguments={"x": object()}),),
            ),
        )
    )
    with pytest.raises(StoreError, match="c1"):
        store.append_turn("s1", bad)
    assert backend.snapshot() == before


# --------------------------------------------------------------------------- unavailable


def test_directory_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data directory should be")
    with pytest.raises(StoreUnavailable, match="directory"):
        SessionStore.open(blocker / "sessions" / "acp-sessions.db")
    assert blocker.read_text() == "a file where the data directory should be"


def test_corrupt_file_is_refused_and_kept(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    garbage = b"definitely not SQLite\n" * 500
    db_path.write_bytes(garbage)
    with pytest.raises(StoreUnavailable, match=str(db_path)):
        SessionStore.open(db_path)
    assert db_path.read_bytes() == garbage


def damage_pages(path: Path) -> None:
    """Scribble over the start of every page after the first (the header stays valid)."""
    data = bytearray(path.read_bytes())
    page_size = 4096
    for page in range(2, len(data) // page_size):
        data[page * page_size : page * page_size + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))


def test_a_store_failing_quick_check_is_refused_and_not_written(db_path: Path) -> None:
    store = SessionStore.open(db_path)
    store.create_session("s1", "default", "/w")
    for n in range(40):
        store.append_turn("s1", tool_turn(f"t{n}"))
    store.close()
    damage_pages(db_path)
    damaged = db_path.read_bytes()
    with pytest.raises(StoreUnavailable, match="damaged"):
        SessionStore.open(db_path)
    assert db_path.read_bytes() == damaged


# --------------------------------------------------------------------------- concurrency


def test_concurrent_writers_on_two_connections(db_path: Path) -> None:
    stores = [SessionStore.open(db_path), SessionStore.open(db_path)]
    stores[0].create_session("shared", "default", "/w")
    turns_per_writer = 40
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        own = stores[index]
        try:
            own.create_session(f"own-{index}", "default", "/w")
            for n in range(turns_per_writer):
                own.append_turn(f"own-{index}", tool_turn(f"w{index}-{n}"))
                own.append_turn("shared", CompletedTurn(messages=(user(f"w{index}-{n}"),)))
                own.load_session("shared")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    for index in range(2):
        own = stores[0].load_session(f"own-{index}")
        assert own is not None
        expected = tuple(
            m for n in range(turns_per_writer) for m in tool_turn(f"w{index}-{n}").messages
        )
        assert own.messages == expected
    shared = stores[1].load_session("shared")
    assert shared is not None
    for index in range(2):  # each writer's turns, in its own order
        mine = [m.content for m in shared.messages if m.content.startswith(f"w{index}-")]
        assert mine == [f"w{index}-{n}" for n in range(turns_per_writer)]
    for opened in stores:
        opened.close()


def test_writer_waits_out_a_lock_longer_than_the_busy_timeout(db_path: Path) -> None:
    store = SessionStore.open(db_path, busy_timeout_ms=20)
    store.create_session("s1", "default", "/w")
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, blocker.execute, args=("COMMIT",))
    release.start()
    try:
        store.append_turn("s1", CompletedTurn(messages=(user("after the lock"),)))
    finally:
        release.join()
        blocker.close()
    loaded = store.load_session("s1")
    store.close()
    assert loaded is not None
    assert loaded.messages == (user("after the lock"),)


def test_lock_held_past_the_deadline_is_a_store_error(db_path: Path) -> None:
    store = SessionStore.open(db_path, busy_timeout_ms=10, lock_retry_deadline_secs=0.1)
    store.create_session("s1", "default", "/w")
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked"):
            store.append_turn("s1", CompletedTurn(messages=(user("never"),)))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    loaded = store.load_session("s1")
    store.close()
    assert loaded is not None
    assert loaded.messages == ()


# --------------------------------------------------------------------------- async


async def test_async_store_serializes_calls_on_a_worker_thread(backend: Backend) -> None:
    store = AsyncSessionStore(await trio.to_thread.run_sync(backend.open))
    main_thread = threading.get_ident()
    seen_threads: set[int] = set()
    original = store.sync.append_turn

    def recording_append(session_id: str, turn: CompletedTurn, *, epoch: int | None = None) -> None:
        seen_threads.add(threading.get_ident())
        original(session_id, turn, epoch=epoch)

    store.sync.append_turn = recording_append  # type: ignore[method-assign]
    with trio.fail_after(30):
        await store.create_session("s1", "default", "/w")
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(store.append_turn, "s1", CompletedTurn(messages=(user(str(n)),)))
        loaded = await store.load_session("s1")
        listed = await store.list_sessions()
        assert await store.delete_session("s1") is True
        await store.aclose()
    assert main_thread not in seen_threads
    assert loaded is not None
    assert sorted(int(m.content) for m in loaded.messages) == list(range(20))
    assert [info.message_count for info in listed] == [20]


async def test_async_open_reports_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("")
    with trio.fail_after(10), pytest.raises(StoreUnavailable):
        await open_store(blocker / "sessions" / "acp-sessions.db")


async def test_a_cancelled_caller_still_gets_its_turn_committed(backend: Backend) -> None:
    """Cancelling the task that awaits a commit never abandons the commit half-way: the
    turn is in the store afterwards, and the cancellation is still delivered."""
    store = AsyncSessionStore(await trio.to_thread.run_sync(backend.open))
    entered = threading.Event()
    release = threading.Event()
    original = store.sync.append_turn

    def slow_append(session_id: str, turn: CompletedTurn, *, epoch: int | None = None) -> None:
        entered.set()
        release.wait(10)
        original(session_id, turn, epoch=epoch)

    store.sync.append_turn = slow_append  # type: ignore[method-assign]
    with trio.fail_after(30):
        await store.create_session("s1", "default", "/w")
        cancelled = False
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def cancel_once_committing() -> None:
                    await trio.to_thread.run_sync(entered.wait)
                    scope.cancel()
                    release.set()

                nursery.start_soon(cancel_once_committing)
                try:
                    await store.append_turn("s1", CompletedTurn(messages=(user("kept"),)))
                except trio.Cancelled:
                    cancelled = True
                    raise
        loaded = await store.load_session("s1")
        await store.aclose()
    assert cancelled
    assert loaded is not None
    assert [m.content for m in loaded.messages] == ["kept"]


async def test_closing_the_async_store_ends_its_worker_thread(db_path: Path) -> None:
    store = await open_store(db_path)
    with trio.fail_after(10):
        await store.create_session("s1", "default", "/w")
        worker = store._worker._thread
        assert worker is not None
        assert worker.is_alive()
        assert worker.name == "zeroclaw-session-store"
        await store.aclose()
        await trio.to_thread.run_sync(worker.join, 5)
    assert not worker.is_alive()
    assert store._worker._thread is None


@TIMING_SENSITIVE
def test_open_gives_up_on_a_held_lock_within_its_deadline_and_names_the_holder(
    db_path: Path,
) -> None:
    SessionStore.open(db_path).close()
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable, match="locked by another process") as raised:
            SessionStore.open(db_path, open_lock_deadline_secs=0.3)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert time.monotonic() - started < 3
    # The holder is this very process: a process never names itself, so nothing is named.
    assert "open in" not in str(raised.value)


@TIMING_SENSITIVE
def test_creating_a_session_waits_a_couple_of_seconds_at_most(db_path: Path) -> None:
    store = SessionStore.open(db_path)  # default busy timeout (5 s) and turn deadline (30 s)
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    try:
        with pytest.raises(StoreError, match="locked"):
            store.create_session("s1", "default", "/w")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert time.monotonic() - started < DEFAULT_CREATE_LOCK_DEADLINE_SECS + 1.5
    store.create_session("s1", "default", "/w")  # the normal busy timeout is back
    store.close()


async def test_unsaved_turns_are_kept_and_written_in_order_by_the_next_commit(
    db_path: Path,
) -> None:
    sync = SessionStore.open(db_path, busy_timeout_ms=10, lock_retry_deadline_secs=0.05)
    store = AsyncSessionStore(sync, max_unsaved_turns=3)
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    with trio.fail_after(30):
        await store.create_session("s1", "default", "/w")
        await store.append_turn("s1", CompletedTurn(messages=(user("saved"),)))
        blocker.execute("BEGIN IMMEDIATE")  # the store cannot write (as with a full disk)
        outcomes = []
        for text in ("kept 1", "kept 2", "kept 3", "lost"):
            with pytest.raises(TurnUnsaved) as raised:
                await store.append_turn("s1", CompletedTurn(messages=(user(text),)))
            outcomes.append((raised.value.kept, raised.value.pending))
        while_locked = await store.load_session("s1")  # reads still work: the kept turns too
        blocker.execute("ROLLBACK")
        await store.append_turn("s1", CompletedTurn(messages=(user("after"),)))
        await store.aclose()
    blocker.close()
    assert outcomes == [(True, 1), (True, 2), (True, 3), (False, 3)]
    assert while_locked is not None
    assert [m.content for m in while_locked.messages] == ["saved", "kept 1", "kept 2", "kept 3"]
    reopened = SessionStore.open(db_path)
    stored = reopened.load_session("s1")
    reopened.close()
    assert stored is not None
    assert [m.content for m in stored.messages] == ["saved", "kept 1", "kept 2", "kept 3", "after"]
    assert stored.info.turn_count == 5


async def test_closing_the_store_writes_the_turns_still_unsaved(db_path: Path) -> None:
    sync = SessionStore.open(db_path, busy_timeout_ms=10, lock_retry_deadline_secs=0.05)
    store = AsyncSessionStore(sync)
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    with trio.fail_after(30):
        await store.create_session("s1", "default", "/w")
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(TurnUnsaved):
            await store.append_turn("s1", CompletedTurn(messages=(user("kept"),)))
        blocker.execute("ROLLBACK")
        await store.aclose()
    blocker.close()
    reopened = SessionStore.open(db_path)
    stored = reopened.load_session("s1")
    reopened.close()
    assert stored is not None
    assert [m.content for m in stored.messages] == ["kept"]
