"""One live copy across replicas: two ``AcpApp`` instances (two replicas) on one
PostgreSQL database, each locking its live sessions (protocol/services/replica_leases.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import trio

from acp_server.app import SHARED_STORE_MAX_UNSAVED_TURNS
from acp_server.protocol.services.ownership import LiveSessions
from acp_server.protocol.services.replica_leases import ReplicaLeases, open_replica_leases
from acp_server.storage import AsyncSessionStore
from acp_server.storage.postgres import PostgresSessionStore
from tests.helpers import TIMING_SENSITIVE, make_config, poll_until, session_dir
from tests.server.protocol.test_session_takeover import user_texts
from tests.server.server_harness import (
    ScriptedProvider,
    ServerHarness,
    harness_app,
    open_server,
    text_round,
)

SESSION_NOT_FOUND = -32000
TIMEOUT = 30
DETACHED_WITHIN_SECS = 1.0


@dataclass
class Replica:
    client: ServerHarness
    leases: ReplicaLeases
    live: LiveSessions
    provider: ScriptedProvider


@asynccontextmanager
async def replica(tmp_path: Path, url: str, name: str) -> AsyncIterator[Replica]:
    config = make_config(tmp_path / name)
    backend = await trio.to_thread.run_sync(PostgresSessionStore.open, url)
    store = AsyncSessionStore(backend, max_unsaved_turns=SHARED_STORE_MAX_UNSAVED_TURNS)
    provider = ScriptedProvider([text_round("answer")])
    app = harness_app(config, provider=provider, store=store, launch_dir=tmp_path)
    try:
        async with (
            open_replica_leases(app.live_sessions, app.store) as leases,
            open_server(config, app=app) as client,
        ):
            await client.result("initialize", {})
            yield Replica(client, leases, app.live_sessions, provider)
    finally:
        with trio.CancelScope(shield=True):
            await store.aclose()


@asynccontextmanager
async def two_replicas(tmp_path: Path, url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(replica(tmp_path, url, "a"))
        b = await stack.enter_async_context(replica(tmp_path, url, "b"))
        yield a, b


def stored_users(url: str, session_id: str) -> list[str]:
    store = PostgresSessionStore.open(url)
    try:
        stored = store.load_session(session_id)
    finally:
        store.close()
    assert stored is not None
    return [m.content for m in stored.messages if m.role == "user"]


async def lock_held(replica: Replica, session_id: str) -> None:
    await poll_until(lambda: replica.leases.leases.held() == {session_id})


async def test_a_load_on_another_replica_detaches_the_copy_at_once(
    tmp_path: Path, postgres_url: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with two_replicas(tmp_path, postgres_url) as (a, b):
            session_id = await a.client.new_session(session_dir(tmp_path))
            await lock_held(a, session_id)  # a created it: its lock is a's
            assert (await a.client.prompt(session_id, "one"))["result"]["stopReason"] == "end_turn"

            assert (await b.client.result("session/load", {"sessionId": session_id})).keys() == {
                "modes",
                "configOptions",
            }
            assert user_texts(b.client.updates(session_id)) == ["one"]
            # a hears of it from the database alone and lets its copy go.
            await poll_until(lambda: a.live.holder(session_id) is None, within=DETACHED_WITHIN_SECS)
            assert a.leases.leases.held() == set()
            await lock_held(b, session_id)

            # Requests that never read the store: the detach alone answers them.
            for method, params in (
                ("session/update", {"sessionId": session_id, "type": "ping"}),
                ("session/close", {"sessionId": session_id}),
            ):
                error = await a.client.error(method, params)
                assert error["code"] == SESSION_NOT_FOUND, (method, error)
                assert "taken over" in error["message"], error

            reply = await b.client.prompt(session_id, "two")
            assert reply["result"]["stopReason"] == "end_turn", reply
            # a takes it back the same way.
            assert (await a.client.result("session/resume", {"sessionId": session_id})).keys() == {
                "modes",
                "configOptions",
            }
            await poll_until(lambda: b.live.holder(session_id) is None, within=DETACHED_WITHIN_SECS)
            await lock_held(a, session_id)
            assert (await a.client.prompt(session_id, "three"))["result"][
                "stopReason"
            ] == "end_turn"
    assert stored_users(postgres_url, session_id) == ["one", "two", "three"]


async def test_a_turn_running_on_the_old_replica_is_cancelled_and_not_stored(
    tmp_path: Path, postgres_url: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with two_replicas(tmp_path, postgres_url) as (a, b):
            a.provider.rounds = [text_round("done"), text_round("slow ", "words")]
            session_id = await a.client.new_session(session_dir(tmp_path))
            await a.client.prompt(session_id, "saved")
            a.provider.gate = trio.Event()  # the next turn stops after its first chunk
            running = await a.client.prompt_request(session_id, "interrupted")
            chunk = await a.client.receive()
            assert chunk["params"]["update"]["sessionUpdate"] == "agent_message_chunk"

            await b.client.result("session/load", {"sessionId": session_id})
            with trio.fail_after(DETACHED_WITHIN_SECS):
                answer = await a.client.wait_response(running)
            assert answer["result"]["stopReason"] == "cancelled", answer
            assert user_texts(b.client.updates(session_id)) == ["saved"]
            await lock_held(b, session_id)
            error = await a.client.error("session/prompt", {"sessionId": session_id, "prompt": "x"})
            assert "taken over" in error["message"]
            assert (await b.client.prompt(session_id, "next"))["result"]["stopReason"] == "end_turn"
    assert stored_users(postgres_url, session_id) == ["saved", "next"]


async def test_a_closed_session_frees_its_lock_and_the_next_load_tells_nobody(
    tmp_path: Path, postgres_url: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with two_replicas(tmp_path, postgres_url) as (a, b):
            session_id = await a.client.new_session(session_dir(tmp_path))
            await lock_held(a, session_id)
            await a.client.result("session/close", {"sessionId": session_id})
            await poll_until(lambda: a.leases.leases.held() == set())
            await b.client.result("session/load", {"sessionId": session_id})
            await lock_held(b, session_id)
            # a had let it go: it is not "taken over" there, just not live.
            error = await a.client.error("session/close", {"sessionId": session_id})
            assert "taken over" not in error["message"], error


@TIMING_SENSITIVE
async def test_a_holder_whose_lock_connection_died_is_taken_over_at_once(
    tmp_path: Path, postgres_url: str
) -> None:
    """As after a ``kill -9`` of the holder: PostgreSQL frees the lock with the connection,
    so the load does not wait for a lock nobody will give up."""
    with trio.fail_after(TIMEOUT):
        async with two_replicas(tmp_path, postgres_url) as (a, b):
            session_id = await a.client.new_session(session_dir(tmp_path))
            await lock_held(a, session_id)
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks"
                    " WHERE locktype = 'advisory' AND granted"
                )
            started = trio.current_time()
            await b.client.result("session/load", {"sessionId": session_id})
            assert trio.current_time() - started < 2
            await lock_held(b, session_id)
            await poll_until(lambda: a.live.holder(session_id) is None, within=DETACHED_WITHIN_SECS)
