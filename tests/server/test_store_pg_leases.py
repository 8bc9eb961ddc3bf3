"""One live copy across replicas: advisory locks, takeover by NOTIFY, fencing epochs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from acp_server.agent.conversation import ChatMessage, CompletedTurn
from acp_server.storage.pg_leases import DEFAULT_TAKEOVER_WAIT_SECS, SessionLeases
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.records import SessionFenced, UnknownSession


class Replica:
    """One replica's store and leases, and the sessions it was told it lost."""

    def __init__(self, url: str) -> None:
        self.store = PostgresSessionStore.open(url)
        self.lost: list[str] = []
        self.lost_event = threading.Event()
        self.leases = SessionLeases(self.store, self._on_lost)

    def _on_lost(self, session_id: str) -> None:
        self.lost.append(session_id)
        self.lost_event.set()

    def close(self) -> None:
        self.leases.close()
        self.store.close()


@pytest.fixture
def replicas(postgres_url: str) -> Iterator[tuple[Replica, Replica]]:
    first, second = Replica(postgres_url), Replica(postgres_url)
    yield first, second
    first.close()
    second.close()


def turn(text: str) -> CompletedTurn:
    return CompletedTurn(messages=(ChatMessage(role="user", content=text),))


def advisory_holders(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return [int(row[0]) for row in rows]


def test_a_takeover_tells_the_old_holder_at_once_and_fences_its_commits(
    replicas: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    epoch_a = a.leases.acquire("s1")
    assert epoch_a == 2  # created at 1, claimed once
    a.store.append_turn("s1", turn("from a"), epoch=epoch_a)
    assert len(advisory_holders(postgres_url)) == 1

    started = time.monotonic()
    epoch_b = b.leases.acquire("s1")
    taken_after = time.monotonic() - started
    assert a.lost_event.wait(5)
    assert a.lost == ["s1"]
    assert taken_after < DEFAULT_TAKEOVER_WAIT_SECS  # a let go; b did not wait it out
    assert (a.leases.held(), b.leases.held()) == (set(), {"s1"})
    assert epoch_b == epoch_a + 1

    with pytest.raises(SessionFenced):
        a.store.append_turn("s1", turn("zombie from a"), epoch=epoch_a)
    b.store.append_turn("s1", turn("from b"), epoch=epoch_b)
    loaded = b.store.load_session("s1")
    assert loaded is not None
    assert [m.content for m in loaded.messages] == ["from a", "from b"]


def test_a_dead_holders_lock_is_free_at_once(
    replicas: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    a.leases.acquire("s1")
    [holder] = advisory_holders(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (holder,))  # as if a was kill -9ed
    started = time.monotonic()
    b.leases.acquire("s1", wait_secs=10)
    assert time.monotonic() - started < 2
    assert b.leases.held() == {"s1"}
    assert advisory_holders(postgres_url) != [holder]


def test_released_sessions_are_taken_without_waiting(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    a.leases.acquire("s1")
    a.leases.release("s1")
    b.leases.acquire("s1", wait_secs=0)
    assert b.leases.held() == {"s1"}
    assert a.lost == []
    with pytest.raises(UnknownSession):
        b.leases.acquire("nope")
