"""A session saved to the SQLite store replays what the client saw live, from the tool
results' structured records; a store written before records existed still replays."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import trio

from acp_core import schema
from acp_server.agent.tools.registry import builtin_tools
from acp_server.model import ChatMessage, DeliveredRecord, ToolCall, ToolRecord
from acp_server.protocol.presentation.replay import history_updates
from acp_server.storage import open_store
from acp_server.storage.sqlite import MIGRATIONS, SessionStore
from tests.e2e.test_store_e2e import as_replayed, coalesce, titles_of
from tests.helpers import make_config
from tests.server.server_harness import (
    ScriptedProvider,
    answer,
    open_server,
    text_round,
    tool_round,
)

TODOS: dict[str, Any] = {
    "todos": [
        {"content": "Read", "status": "completed", "priority": "high"},
        {"content": "Write", "status": "in_progress", "activeForm": "Writing"},
    ]
}
ESCALATION: dict[str, Any] = {"summary": "Need the deploy key", "urgency": "high"}
DELIVERY: dict[str, Any] = {"path": "report.md", "title": "Quarterly"}
PROMPT = "plan, escalate, deliver"


async def test_plan_escalation_and_delivery_replay_from_the_store_as_seen_live(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "report.md").write_text("# Q3\n")
    db = tmp_path / "sessions.db"
    provider = ScriptedProvider(
        [
            tool_round("todo_write", TODOS, "p1"),
            tool_round("escalate_to_human", ESCALATION, "e1"),
            tool_round("deliver_file", DELIVERY, "d1"),
            tool_round("file_read", {"path": "missing.txt"}, "r1"),
            text_round("Done."),
        ]
    )
    config = make_config(tmp_path)
    with trio.fail_after(30):
        store = await open_store(db)
        async with open_server(
            config, provider=provider, tools=builtin_tools(), store=store
        ) as client:
            client.on_request = answer("allow-once")
            session_id = await client.new_session(workspace)
            await client.result("session/prompt", {"sessionId": session_id, "prompt": PROMPT})
            updates = client.updates(session_id)
        await store.aclose()

        # Each call that ran went in_progress once it started; replay shows calls that
        # already ran, so it has no such step: compare without it.
        started = [u for u in updates if u.get("status") == "in_progress"]
        assert [u["toolCallId"] for u in started] == ["p1", "e1", "d1", "r1"]
        live = [u for u in updates if u.get("status") != "in_progress"]

        kinds = [u["sessionUpdate"] for u in coalesce(live)]
        assert kinds == [
            "session_info_update",
            *("tool_call", "plan", "tool_call_update"),
            *("tool_call", "agent_message_chunk", "tool_call_update"),
            *("tool_call", "tool_call_update"),
            *("tool_call", "tool_call_update"),
            "agent_message_chunk",
        ]
        finished = [u for u in coalesce(live) if u["sessionUpdate"] == "tool_call_update"]
        # The failed read ends "failed": the status comes from ToolOutput.ok, not its text.
        assert [u["status"] for u in finished] == ["completed", "completed", "completed", "failed"]
        delivered = coalesce(live)[8]
        assert delivered["title"] == "Quarterly"
        assert delivered["content"][1]["content"]["resource"]["blob"] == "IyBRMwo="  # "# Q3\n"

        reopened = await open_store(db)
        async with open_server(
            config, provider=ScriptedProvider([]), tools=builtin_tools(), store=reopened
        ) as second:
            loaded = await second.result("session/load", {"sessionId": session_id})
            replayed = second.updates(session_id)
        await reopened.aclose()
    assert loaded.keys() == {"modes", "configOptions"}
    assert replayed == as_replayed(PROMPT, live) + titles_of(live)

    # Each result was stored with its structured record and outcome.
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT tool_name, ok, record_json FROM acp_tool_calls"
            " WHERE event_kind = 'out' ORDER BY id"
        ).fetchall()
    assert [(name, ok) for name, ok, _ in rows] == [
        ("todo_write", 1),
        ("escalate_to_human", 1),
        ("deliver_file", 1),
        ("file_read", 0),  # failed: the providers learn it from this flag, not the text
    ]
    assert all(record is not None for _, _, record in rows)


def wire(updates: list[schema.SessionUpdate]) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = msgspec.json.decode(msgspec.json.encode(updates))
    return decoded


def test_replay_reads_the_record_not_the_result_text() -> None:
    """A stored record is what replays, whatever the result text says."""
    record = ToolRecord(
        delivered=DeliveredRecord(
            uri="attachment://deliver/" + "cd" * 32 + ".txt",
            filename="a.txt",
            title="Notes",
            mime_type="text/plain",
            size=2,
        )
    )
    call = ToolCall("d1", "deliver_file", {"path": "a.txt"})
    messages = [
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage(
            "tool", "any wording", tool_call_id="d1", tool_name="deliver_file", record=record
        ),
    ]
    seen: list[tuple[str, str]] = []

    def embed(uri: str, mime_type: str) -> schema.EmbeddedResource:
        seen.append((uri, mime_type))
        return schema.EmbeddedResource(
            resource=schema.BlobResource(uri=uri, mime_type=mime_type, blob="aGk=")
        )

    finished = wire(history_updates(messages, embed=embed))[-1]
    assert finished["title"] == "Notes"
    assert seen == [(record.delivered.uri, "text/plain")]  # type: ignore[union-attr]
    # An empty record (the tool streamed and delivered nothing) replays nothing extra,
    # even when the text reads like a plan update.
    plan_call = ToolCall("p1", "todo_write", TODOS)
    plain = [
        ChatMessage("assistant", "", tool_calls=(plan_call,)),
        ChatMessage(
            "tool", "Plan updated: 2 item(s)", tool_call_id="p1", tool_name="todo_write",
            record=ToolRecord(),
        ),
    ]  # fmt: skip
    assert [u["sessionUpdate"] for u in wire(history_updates(plain))] == [
        "tool_call",
        "tool_call_update",
    ]


def write_schema_2_store(path: Path, workspace: Path) -> None:
    """A store as the previous version wrote it: schema 2, results as plain text."""
    conn = sqlite3.connect(path, isolation_level=None)
    for migrate in MIGRATIONS[:2]:
        migrate(conn)
    conn.execute("PRAGMA user_version = 2")
    now = "2026-01-01T00:00:00+00:00"
    conn.execute(
        "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir, created_at,"
        " last_activity, turn_count) VALUES ('old', 'test', ?, ?, ?, 1)",
        (str(workspace), now, now),
    )
    uri = "attachment://deliver/" + "ab" * 32 + ".md"
    tool_calls = (
        ("p1", "todo_write", msgspec.json.encode(TODOS).decode()),
        ("e1", "escalate_to_human", msgspec.json.encode(ESCALATION).decode()),
        ("d1", "deliver_file", msgspec.json.encode(DELIVERY).decode()),
        ("x1", "file_read", '{"path":"gone.txt"}'),
    )
    results = (
        ("p1", "todo_write", "Plan updated: 2 item(s) (1 completed, 1 in progress, 0 pending)"),
        ("e1", "escalate_to_human", "Escalation shown to the user (high urgency)."),
        ("d1", "deliver_file", f"Delivered report.md (5 bytes)\nuri={uri}"),
        ("x1", "file_read", "Error: File not found: gone.txt"),
    )

    def message(role: str, content: str = "") -> int:
        cursor = conn.execute(
            "INSERT INTO acp_messages (session_id, role, content, created_at, turn_seq)"
            " VALUES (1, ?, ?, ?, 0)",
            (role, content, now),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def tool_row(message_id: int, call_id: str, name: str, kind: str, payload: str) -> None:
        conn.execute(
            "INSERT INTO acp_tool_calls (message_id, tool_call_id, tool_name, event_kind,"
            " payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (message_id, call_id, name, kind, payload, now),
        )

    message("user", PROMPT)
    assistant = message("assistant")
    for call_id, name, arguments in tool_calls:
        tool_row(assistant, call_id, name, "in", arguments)
    for call_id, name, text in results:
        tool_row(message("tool"), call_id, name, "out", text)
    conn.close()


def test_a_store_from_before_records_still_replays(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    write_schema_2_store(db, tmp_path)
    store = SessionStore.open(db)
    try:
        stored = store.load_session("old")
    finally:
        store.close()
    assert stored is not None
    results = [m for m in stored.messages if m.role == "tool"]
    assert [m.record for m in results] == [None] * 4  # written without records
    # The outcome was migrated once: the failed read is a failure for the providers.
    assert [m.ok for m in results] == [True, True, True, False]

    def embed(uri: str, mime_type: str) -> schema.EmbeddedResource:
        return schema.EmbeddedResource(
            resource=schema.BlobResource(uri=uri, mime_type=mime_type, blob="eA==")
        )

    updates = wire(history_updates(stored.messages, embed=embed))
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        *("tool_call", "plan", "tool_call_update"),
        *("tool_call", "agent_message_chunk", "tool_call_update"),
        *("tool_call", "tool_call_update"),
        *("tool_call", "tool_call_update"),
    ]
    assert [entry["content"] for entry in updates[2]["entries"]] == ["Read", "Write"]
    assert "Need the deploy key" in updates[5]["content"]["text"]
    assert updates[8]["title"] == "Quarterly"
    assert updates[8]["content"][1]["content"]["resource"]["mimeType"] == "text/markdown"
