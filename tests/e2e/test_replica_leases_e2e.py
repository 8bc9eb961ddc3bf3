"""One live copy across replicas, through two real `zeroclaw acp` processes on one
PostgreSQL store ([storage] url): a load in one detaches the other's copy at once (its
running turn cancelled, its client told on its next request), the session's lock moves
with it, and a holder killed with SIGKILL leaves the session free at once
(docs/persistence.md, "One live copy across replicas")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import RpcPipeClient, open_session, spawn_acp
from tests.e2e.test_one_live_copy_e2e import SLOW_PROMPT
from tests.e2e.test_one_live_copy_e2e import _until_first_chunk as until_first_chunk
from tests.helpers import echo_config, poll_until, write_config
from tests.jsonrpc_peer import JsonDict
from tests.postgres_harness import advisory_lock_holders
from tests.server.protocol.test_replica_leases import stored_users

pytestmark = pytest.mark.e2e

TIMEOUT = 60
SESSION_NOT_FOUND = -32000
CHUNK_DELAY_MS = 50
"""The slow prompt's forty chunks take two seconds: far longer than a detach."""
DETACHED_WITHIN_SECS = 1.0


def _config(tmp_path: Path, url: str) -> Path:
    document = {**echo_config(chunk_delay_ms=CHUNK_DELAY_MS), "storage": {"url": url}}
    return write_config(tmp_path / "cfg", document)


def _user_texts(client: RpcPipeClient, session_id: str) -> list[str]:
    return [
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "user_message_chunk"
    ]


async def _one_lock_other_than(url: str, previous: list[int]) -> list[int]:
    async def moved() -> bool:
        holders = await trio.to_thread.run_sync(advisory_lock_holders, url)
        return len(holders) == 1 and holders != previous

    await poll_until(moved)
    return await trio.to_thread.run_sync(advisory_lock_holders, url)


def _assert_taken_over(response: JsonDict) -> None:
    assert response.get("error", {}).get("code") == SESSION_NOT_FOUND, response
    assert "taken over" in response["error"]["message"], response


async def test_a_load_in_another_process_cancels_the_holders_turn_at_once(
    tmp_path: Path, postgres_url: str
) -> None:
    config_dir = _config(tmp_path, postgres_url)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as first, spawn_acp(config_dir) as second:
            session_id = await open_session(first, workspace)
            assert (await first.prompt(session_id, "one"))["result"]["stopReason"] == "end_turn"
            first_lock = await _one_lock_other_than(postgres_url, [])
            running = await first.prompt_request(session_id, SLOW_PROMPT)
            await until_first_chunk(first)

            await second.call("initialize", {"protocolVersion": 1})
            loaded = await second.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
            started = time.monotonic()
            answer = await first.wait_response(running)
            assert time.monotonic() - started < DETACHED_WITHIN_SECS
            assert answer["result"]["stopReason"] == "cancelled", answer
            assert _user_texts(second, session_id) == ["one"]
            # The detach alone answers a request that never reads the store.
            _assert_taken_over(await first.call("session/close", {"sessionId": session_id}))
            second_lock = await _one_lock_other_than(postgres_url, first_lock)
            assert second_lock != first_lock

            reply = await second.prompt(session_id, "two")
            assert reply["result"]["stopReason"] == "end_turn", reply
    assert stored_users(postgres_url, session_id) == ["one", "two"]
    assert advisory_lock_holders(postgres_url) == []  # both processes ended: every lock is free


async def test_a_holder_killed_mid_turn_leaves_the_session_free_at_once(
    tmp_path: Path, postgres_url: str
) -> None:
    config_dir = _config(tmp_path, postgres_url)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as taker:
            await taker.call("initialize", {"protocolVersion": 1})
            async with spawn_acp(config_dir) as holder:
                session_id = await open_session(holder, workspace)
                await holder.prompt(session_id, "kept")
                dead_lock = await _one_lock_other_than(postgres_url, [])
                await holder.prompt_request(session_id, SLOW_PROMPT)
                await until_first_chunk(holder)
                holder.process.kill()  # SIGKILL: nothing is released by the process itself
                await holder.process.wait()
            started = time.monotonic()
            loaded = await taker.call("session/load", {"sessionId": session_id})
            took = time.monotonic() - started
            assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
            assert took < 2.0, f"the load waited {took:.2f}s for a dead holder"
            assert _user_texts(taker, session_id) == ["kept"]
            await _one_lock_other_than(postgres_url, dead_lock)
            assert (await taker.prompt(session_id, "after"))["result"]["stopReason"] == "end_turn"
    assert stored_users(postgres_url, session_id) == ["kept", "after"]
