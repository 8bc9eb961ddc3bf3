"""One live copy across replicas: advisory locks, takeover by NOTIFY, fencing epochs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from acp_server.model import ChatMessage, CompletedTurn
from acp_server.storage import SessionFenced, StoreError, UnknownSession
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.postgres.leases import DEFAULT_TAKEOVER_WAIT_SECS, SessionLeases
from tests.helpers import TIMING_SENSITIVE
from tests.postgres_harness import advisory_lock_holders


class Replica:
    """One replica's store and leases, and the sessions it was told it lost."""

    def __init__(self, url: str) -> None:
        self.store = PostgresSessionStore.open(url)
        self.lost: list[str] = []
        self.lost_epochs: list[int] = []
        self.lost_event = threading.Event()
        self.leases = SessionLeases(self.store, self._on_lost)

    def _on_lost(self, session_id: str, epoch: int) -> None:
        self.lost.append(session_id)
        self.lost_epochs.append(epoch)
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


@TIMING_SENSITIVE
def test_a_takeover_tells_the_old_holder_at_once_and_fences_its_commits(
    replicas: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    epoch_a = a.leases.acquire("s1")
    assert epoch_a == 2  # created at 1, claimed once
    a.store.append_turn("s1", turn("from a"), epoch=epoch_a)
    assert len(advisory_lock_holders(postgres_url)) == 1

    started = time.monotonic()
    epoch_b = b.leases.acquire("s1")
    taken_after = time.monotonic() - started
    assert a.lost_event.wait(5)
    assert (a.lost, a.lost_epochs) == (["s1"], [epoch_a + 1])
    assert taken_after < DEFAULT_TAKEOVER_WAIT_SECS  # a let go; b did not wait it out
    assert (a.leases.held(), b.leases.held()) == (set(), {"s1"})
    assert epoch_b == epoch_a + 1

    with pytest.raises(SessionFenced):
        a.store.append_turn("s1", turn("zombie from a"), epoch=epoch_a)
    b.store.append_turn("s1", turn("from b"), epoch=epoch_b)
    loaded = b.store.load_session("s1")
    assert loaded is not None
    assert [m.content for m in loaded.messages] == ["from a", "from b"]


@TIMING_SENSITIVE
def test_a_dead_holders_lock_is_free_at_once(
    replicas: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    a.leases.acquire("s1")
    [holder] = advisory_lock_holders(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (holder,))  # as if a was kill -9ed
    started = time.monotonic()
    b.leases.acquire("s1", wait_secs=10)
    assert time.monotonic() - started < 2
    assert b.leases.held() == {"s1"}
    assert advisory_lock_holders(postgres_url) != [holder]


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


def test_a_created_session_is_held_without_a_takeover(
    replicas: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    assert a.leases.hold("s1")
    assert a.store.current_epoch("s1") == 1  # no claim: the creator's epoch stands
    assert not b.leases.hold("s1")  # held by a
    assert not b.leases.hold("missing")
    assert (a.leases.held(), b.leases.held()) == ({"s1"}, set())
    epoch_b = b.leases.acquire("s1")
    assert a.lost_event.wait(5)
    assert epoch_b == 2
    assert b.leases.held() == {"s1"}
    assert len(advisory_lock_holders(postgres_url)) == 1


def test_a_notification_older_than_the_held_epoch_is_ignored(
    replicas: tuple[Replica, Replica],
) -> None:
    a, _ = replicas
    a.store.create_session("s1", "default", "/w")
    epoch = a.leases.acquire("s1")
    with psycopg.connect(a.store.url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('zeroclaw_session_taken', %s)", (f"other {epoch} s1",))
        conn.execute("SELECT pg_notify('zeroclaw_session_taken', %s)", (f"other {epoch + 5} s1",))
    assert a.lost_event.wait(5)
    assert a.lost_epochs == [epoch + 5]  # the first one was not newer than a's own claim
    assert a.leases.held() == set()


def test_an_acquire_that_was_claimed_again_meanwhile_is_fenced(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    a.leases.acquire("s1")
    original = b.store.current_epoch

    def claimed_again_first(session_id: str) -> int | None:
        a.store.claim_session(session_id)  # a third copy claims it while b takes the lock
        return original(session_id)

    b.store.current_epoch = claimed_again_first  # type: ignore[method-assign]
    with pytest.raises(SessionFenced):
        b.leases.acquire("s1")
    assert b.leases.held() == set()


def test_notifications_missed_while_the_listener_was_down_are_reported(
    replicas: tuple[Replica, Replica], postgres_url: str
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    a.leases.acquire("s1")
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE pid <> pg_backend_pid() AND query LIKE 'LISTEN%%'"
        )
        # Claimed while a hears nothing: a finds out when it listens again.
        assert b.store.claim_session("s1") == 3
    assert a.lost_event.wait(10)
    assert (a.lost, a.lost_epochs) == (["s1"], [3])


def test_a_lock_that_cannot_be_taken_still_takes_the_session_over(
    replicas: tuple[Replica, Replica], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = replicas
    a.store.create_session("s1", "default", "/w")
    a.leases.acquire("s1")

    def lock_table_full(key: int) -> bool:
        raise StoreError("out of shared memory")

    monkeypatch.setattr(b.leases, "_try_lock", lock_table_full)
    epoch = b.leases.acquire("s1")
    assert epoch == 3
    assert b.leases.held() == set()  # the epoch alone fences a's copy
    assert a.lost_event.wait(5)
    with pytest.raises(SessionFenced):
        a.store.append_turn("s1", turn("late"), epoch=2)
