"""The session row's fencing epoch: ``claim_session``, ``current_epoch`` and commits that
carry an epoch (one store connection per process, several processes on one file)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_server.model import ChatMessage, CompletedTurn
from acp_server.storage import (
    CREATOR_EPOCH,
    AsyncSessionStore,
    SessionFenced,
    TurnUnsaved,
    UnknownSession,
)
from acp_server.storage.sqlite import SCHEMA_VERSION, SessionStore
from tests.server.storage.test_store_principals import undo_principals_step


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions" / "acp-sessions.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SessionStore]:
    opened = SessionStore.open(db_path)
    yield opened
    opened.close()


def turn(text: str) -> CompletedTurn:
    return CompletedTurn(messages=(ChatMessage("user", text), ChatMessage("assistant", "ok")))


def users(store: SessionStore, session_id: str) -> list[str]:
    stored = store.load_session(session_id)
    assert stored is not None
    return [m.content for m in stored.messages if m.role == "user"]


def test_a_new_session_is_held_by_its_creator_and_each_claim_bumps_the_epoch(
    store: SessionStore,
) -> None:
    store.create_session("s1", "default", "/w")
    assert store.current_epoch("s1") == CREATOR_EPOCH == 1
    assert store.claim_session("s1") == 2
    assert store.claim_session("s1") == 3
    assert store.current_epoch("s1") == 3
    assert store.claim_session("nope") is None
    assert store.current_epoch("nope") is None


def test_a_commit_of_an_older_epoch_writes_nothing(store: SessionStore) -> None:
    store.create_session("s1", "default", "/w")
    store.append_turn("s1", turn("by the creator"), epoch=1)
    store.claim_session("s1")
    with pytest.raises(SessionFenced) as fenced:
        store.append_turn("s1", turn("by the old copy"), epoch=1)
    assert (fenced.value.epoch, fenced.value.current) == (1, 2)
    with pytest.raises(SessionFenced):
        store.append_turns("s1", [turn("batch a"), turn("batch b")], epoch=1)
    store.append_turn("s1", turn("by the new copy"), epoch=2)
    store.append_turn("s1", turn("unfenced"))  # no epoch: no check (administrative writes)
    assert users(store, "s1") == ["by the creator", "by the new copy", "unfenced"]
    stored = store.load_session("s1")
    assert stored is not None
    assert stored.info.turn_count == 3


def test_a_commit_for_a_session_that_is_gone_is_unknown_not_fenced(store: SessionStore) -> None:
    with pytest.raises(UnknownSession):
        store.append_turn("gone", turn("x"), epoch=1)


def test_a_claim_by_another_process_fences_this_one(store: SessionStore, db_path: Path) -> None:
    store.create_session("s1", "default", "/w")
    other = SessionStore.open(db_path)
    try:
        assert other.claim_session("s1") == 2
        assert store.current_epoch("s1") == 2  # seen at once by every connection
        with pytest.raises(SessionFenced):
            store.append_turn("s1", turn("stale"), epoch=1)
        other.append_turn("s1", turn("fresh"), epoch=2)
    finally:
        other.close()
    assert users(store, "s1") == ["fresh"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["claim", "old", "new"]), max_size=12))
def test_only_the_latest_claimer_ever_writes(
    tmp_path_factory: pytest.TempPathFactory, steps: list[str]
) -> None:
    path = tmp_path_factory.mktemp("epochs") / "acp-sessions.db"
    store = SessionStore.open(path)
    try:
        store.create_session("s", "default", "/w")
        held, previous, expected = 1, 0, []
        for index, step in enumerate(steps):
            if step == "claim":
                claimed = store.claim_session("s")
                assert claimed == held + 1
                previous, held = held, claimed
                continue
            epoch = held if step == "new" else previous
            text = f"{index}"
            if epoch == held:
                store.append_turn("s", turn(text), epoch=epoch)
                expected.append(text)
            else:
                with pytest.raises(SessionFenced):
                    store.append_turn("s", turn(text), epoch=epoch)
        assert users(store, "s") == expected
    finally:
        store.close()


def test_a_store_from_before_epochs_starts_every_session_at_one(db_path: Path) -> None:
    store = SessionStore.open(db_path)
    store.create_session("old", "default", "/w")
    store.close()
    conn = sqlite3.connect(db_path, isolation_level=None)
    undo_principals_step(conn)
    conn.execute("ALTER TABLE acp_sessions DROP COLUMN owner_epoch")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 2}")  # the step before epochs
    conn.close()
    reopened = SessionStore.open(db_path)
    try:
        assert reopened.current_epoch("old") == 1
        assert reopened.claim_session("old") == 2
    finally:
        reopened.close()


async def test_unsaved_turns_follow_their_epoch(db_path: Path) -> None:
    """A turn kept unsaved is written by a claim in the same process (the claiming copy
    then holds it), and dropped when another process claimed the session first."""
    sync = SessionStore.open(db_path, busy_timeout_ms=10, lock_retry_deadline_secs=0.05)
    store = AsyncSessionStore(sync)
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    with trio.fail_after(30):
        for session_id in ("here", "elsewhere"):
            await store.create_session(session_id, "default", "/w")
        blocker.execute("BEGIN IMMEDIATE")  # the store cannot write, as with a full disk
        for session_id in ("here", "elsewhere"):
            with pytest.raises(TurnUnsaved):
                await store.append_turn(session_id, turn("kept"), epoch=1)
        blocker.execute("ROLLBACK")
        other = SessionStore.open(db_path)
        assert other.claim_session("elsewhere") == 2
        other.close()
        assert await store.claim_session("here") == 2  # writes the kept turn first
        with pytest.raises(SessionFenced):
            await store.append_turn("elsewhere", turn("late"), epoch=1)
        assert await store.current_epoch("here") == 2
        await store.aclose()
    blocker.close()
    reopened = SessionStore.open(db_path)
    try:
        assert users(reopened, "here") == ["kept"]
        assert users(reopened, "elsewhere") == []
    finally:
        reopened.close()
