"""What only the PostgreSQL store has: NUL-safe text, migrations under a lock, a server that
goes away and comes back, fencing epochs, and its start-up failures."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_server.app import open_session_store
from acp_server.config import load_config
from acp_server.model import ChatMessage, CompletedTurn, ToolCall
from acp_server.storage import (
    AsyncSessionStore,
    SessionFenced,
    StoreError,
    StoreUnavailable,
    TurnUnsaved,
    UnknownSession,
)
from acp_server.storage.codec import escape_nul, unescape_nul
from acp_server.storage.postgres import PG_SCHEMA_VERSION, PostgresSessionStore


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[PostgresSessionStore]:
    store = PostgresSessionStore.open(postgres_url)
    yield store
    store.close()


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the probe is closed


# --------------------------------------------------------------------------- NUL bytes

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["\x00", "\x01", "\x010", "a\x00\x01b\x00", "\x01\x01\x00"]
)


@given(TEXT)
def test_nul_escaping_round_trips_and_leaves_ordinary_text_alone(text: str) -> None:
    escaped = escape_nul(text)
    assert "\x00" not in escaped
    assert unescape_nul(escaped) == text
    if "\x00" not in text and "\x01" not in text:
        assert escaped == text


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(output=TEXT, prompt=TEXT, reasoning=TEXT, name=TEXT, title=TEXT)
def test_any_text_round_trips_through_postgres(
    pg_store: PostgresSessionStore, output: str, prompt: str, reasoning: str, name: str, title: str
) -> None:
    """Tool output, prompts, reasoning, tool names and titles may hold NUL (a binary file's
    bytes read as text); PostgreSQL's text type cannot, yet each reads back exactly."""
    session_id = f"s{prompt}\x00{threading.get_ident()}{id(output)}"
    pg_store.create_session(session_id, "default", "/w")
    turn = CompletedTurn(
        messages=(
            user(prompt),
            ChatMessage(
                role="assistant",
                content="",
                reasoning=reasoning,
                tool_calls=(ToolCall(id=f"c{name}", name=name, arguments={"text": output}),),
            ),
            ChatMessage(role="tool", content=output, tool_call_id=f"c{name}", tool_name="shell"),
        )
    )
    pg_store.append_turn(session_id, turn)
    assert pg_store.set_title(session_id, title)
    loaded = pg_store.load_session(session_id)
    assert loaded is not None
    assert loaded.messages == turn.messages
    assert loaded.info.title == title
    assert loaded.info.session_id == session_id
    assert any(info.session_id == session_id for info in pg_store.list_sessions())
    assert pg_store.delete_session(session_id)


# --------------------------------------------------------------------------- schema


def test_replicas_starting_together_migrate_once(postgres_url: str) -> None:
    stores: list[PostgresSessionStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(PostgresSessionStore.open(postgres_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(stores) == 4
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM acp_schema_version").fetchall() == [
            (PG_SCHEMA_VERSION,)
        ]
    for store in stores:
        store.close()


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    PostgresSessionStore.open(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE acp_schema_version SET version = 99")
    with pytest.raises(StoreUnavailable, match="newer"):
        PostgresSessionStore.open(postgres_url)


def test_an_unreachable_server_is_reported_without_the_password() -> None:
    url = f"postgresql://zeroclaw:s3cret-pw@127.0.0.1:{closed_port()}/sessions"
    with pytest.raises(StoreUnavailable) as raised:
        PostgresSessionStore.open(url, connect_timeout_secs=2)
    message = str(raised.value)
    assert "s3cret-pw" not in message
    assert "127.0.0.1" in message
    assert "zeroclaw@" in message


# --------------------------------------------------------------------------- lost server


def _terminate_store_connections(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'zeroclaw' AND pid <> pg_backend_pid()"
        )


async def test_a_lost_connection_keeps_the_turn_and_the_next_commit_writes_it(
    postgres_url: str,
) -> None:
    store = AsyncSessionStore(
        await trio.to_thread.run_sync(PostgresSessionStore.open, postgres_url)
    )
    with trio.fail_after(30):
        await store.create_session("s1", "default", "/w")
        await store.append_turn("s1", CompletedTurn(messages=(user("one"),)))
        _terminate_store_connections(postgres_url)
        with pytest.raises(TurnUnsaved) as raised:
            await store.append_turn("s1", CompletedTurn(messages=(user("two"),)))
        assert raised.value.kept
        await store.append_turn("s1", CompletedTurn(messages=(user("three"),)))
        assert await store.ready()
        loaded = await store.load_session("s1")
        await store.aclose()
    assert loaded is not None
    assert [m.content for m in loaded.messages] == ["one", "two", "three"]


async def test_ready_says_whether_the_database_answers(postgres_url: str) -> None:
    live = AsyncSessionStore(await trio.to_thread.run_sync(PostgresSessionStore.open, postgres_url))
    lost = AsyncSessionStore(
        PostgresSessionStore(f"postgresql://127.0.0.1:{closed_port()}/x", connect_timeout_secs=2)
    )
    with trio.fail_after(30):
        assert await live.ready()
        assert not await lost.ready()
        await live.aclose()
        await lost.aclose()


# --------------------------------------------------------------------------- fencing


def test_a_commit_with_an_old_epoch_is_fenced_off_and_writes_nothing(
    pg_store: PostgresSessionStore,
) -> None:
    pg_store.create_session("s1", "default", "/w")
    assert pg_store.current_epoch("s1") == 1
    pg_store.append_turn("s1", CompletedTurn(messages=(user("first copy"),)), epoch=1)
    assert pg_store.claim_session("s1") == 2  # another replica takes the session over
    with pytest.raises(SessionFenced, match="held by epoch 2") as fenced:
        pg_store.append_turn("s1", CompletedTurn(messages=(user("zombie"),)), epoch=1)
    assert (fenced.value.epoch, fenced.value.current) == (1, 2)
    pg_store.append_turn("s1", CompletedTurn(messages=(user("new owner"),)), epoch=2)
    loaded = pg_store.load_session("s1")
    assert loaded is not None
    assert [m.content for m in loaded.messages] == ["first copy", "new owner"]
    assert loaded.info.turn_count == 2
    assert pg_store.current_epoch("s1") == 2
    assert pg_store.claim_session("nope") is None
    assert pg_store.current_epoch("nope") is None
    with pytest.raises(UnknownSession):
        pg_store.append_turn("nope", CompletedTurn(messages=(user("x"),)), epoch=1)
    assert isinstance(fenced.value, StoreError)


async def test_a_shared_store_answers_an_unsaved_turn_as_lost(
    tmp_path: Path, postgres_url: str
) -> None:
    """On a store other replicas share, a turn that cannot be written is not kept in this
    process (another replica may take the session and would never see it): it is lost
    at once, and the prompt is answered with an error."""
    config = load_config(tmp_path / "none", environ={"ZEROCLAW_STORAGE_URL": postgres_url})
    store = await open_session_store(config)
    assert store is not None
    with trio.fail_after(30):
        await store.create_session("s1", "default", "/w")
        _terminate_store_connections(postgres_url)
        with pytest.raises(TurnUnsaved) as raised:
            await store.append_turn("s1", CompletedTurn(messages=(user("lost"),)))
        assert not raised.value.kept
        await store.append_turn("s1", CompletedTurn(messages=(user("next"),)))
        loaded = await store.load_session("s1")
        await store.aclose()
    assert loaded is not None
    assert [m.content for m in loaded.messages] == ["next"]
