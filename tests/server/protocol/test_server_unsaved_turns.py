"""A turn the store cannot write is never a silent gap: the client is told, and the turn is
written with the next commit that succeeds (or the client gets an error when it is lost)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from acp_server.storage import AsyncSessionStore
from acp_server.storage.sqlite import SessionStore
from tests.helpers import make_config, session_dir
from tests.jsonrpc_peer import JsonDict
from tests.server.server_harness import ServerHarness, open_server


async def prompt(client: ServerHarness, session_id: str, text: str) -> JsonDict:
    response: JsonDict = await client.call(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )
    return response


def agent_text(client: ServerHarness, session_id: str) -> str:
    return "".join(
        update["content"]["text"]
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "agent_message_chunk"
    )


async def test_an_unsaved_turn_is_announced_and_written_with_the_next_commit(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "store" / "acp-sessions.db"
    sync = SessionStore.open(db_path, busy_timeout_ms=10, lock_retry_deadline_secs=0.05)
    store = AsyncSessionStore(sync, max_unsaved_turns=1)
    blocker = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    with trio.fail_after(20):
        async with open_server(make_config(tmp_path), store=store) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            first = await prompt(client, session_id, "one")
            assert "warning" not in agent_text(client, session_id)
            blocker.execute("BEGIN IMMEDIATE")  # the store cannot write, as on a full disk
            kept = await prompt(client, session_id, "two")
            warned = agent_text(client, session_id)
            lost = await prompt(client, session_id, "three")
            blocker.execute("ROLLBACK")
            after = await prompt(client, session_id, "four")
        await store.aclose()
    blocker.close()
    assert first["result"]["stopReason"] == kept["result"]["stopReason"] == "end_turn"
    assert kept["result"]["content"] == "two"
    assert "[warning: this turn is not saved" in warned
    assert "written with the next turn that can be saved" in warned
    assert lost["error"]["code"] == -32603
    assert "could not be saved and is lost" in lost["error"]["message"]
    assert "result" in after
    reopened = SessionStore.open(db_path)
    stored = reopened.load_session(session_id)
    reopened.close()
    assert stored is not None
    users = [message.content for message in stored.messages if message.role == "user"]
    assert users == ["one", "two", "four"]  # the kept turn, in order; the lost one said so
