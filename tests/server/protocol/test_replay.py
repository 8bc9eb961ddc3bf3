"""History replay: stored messages → the exact ``session/update`` wire objects."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from acp_core import schema
from acp_server.model import (
    CallView,
    ChatMessage,
    FileDiff,
    FileLocation,
    PlanStep,
    ToolCall,
    ToolRecord,
)
from acp_server.protocol.presentation.replay import history_updates, plan_update
from acp_server.storage.codec import record_from_json, record_to_json


def wire(updates: list[schema.SessionUpdate]) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = msgspec.json.decode(msgspec.json.encode(updates))
    return decoded


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def test_chat_messages_in_order() -> None:
    messages = [
        ChatMessage(role="system", content="never shown"),
        ChatMessage(role="user", content="hi ✓"),
        ChatMessage(role="assistant", content="hello", reasoning="greet back"),
        ChatMessage(role="user", content="again"),
        ChatMessage(role="assistant", content="", reasoning=None),
    ]
    assert wire(history_updates(messages)) == [
        {"sessionUpdate": "user_message_chunk", "content": text("hi ✓")},
        {"sessionUpdate": "agent_thought_chunk", "content": text("greet back")},
        {"sessionUpdate": "agent_message_chunk", "content": text("hello")},
        {"sessionUpdate": "user_message_chunk", "content": text("again")},
    ]


def test_tool_calls_and_results() -> None:
    messages = [
        ChatMessage(role="user", content="run it"),
        ChatMessage(
            role="assistant",
            content="Running.",
            tool_calls=(
                ToolCall(id="toolu_1", name="shell", arguments={"command": "ls"}),
                ToolCall(id="toolu_2", name="mcp__weather__get", arguments={}),
            ),
        ),
        ChatMessage(role="tool", content="a.txt\n", tool_call_id="toolu_1", tool_name="shell"),
        ChatMessage(role="tool", content="sunny", tool_call_id="toolu_2", tool_name=None),
        ChatMessage(role="assistant", content="Done."),
    ]
    assert wire(history_updates(messages)) == [
        {"sessionUpdate": "user_message_chunk", "content": text("run it")},
        {"sessionUpdate": "agent_message_chunk", "content": text("Running.")},
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "toolu_1",
            "title": "`ls`",
            "kind": "execute",
            "status": "completed",
            "rawInput": {"command": "ls"},
            "name": "shell",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "toolu_1",
            "status": "completed",
            "rawOutput": "a.txt\n",
            "name": "shell",
            "title": "`ls`",
            "kind": "execute",
            "body": "a.txt\n",
            "content": [{"type": "content", "content": text("a.txt\n")}],
        },
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "toolu_2",
            "title": "mcp__weather__get",
            "kind": "other",
            "status": "completed",
            "rawInput": {},
            "name": "mcp__weather__get",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "toolu_2",
            "status": "completed",
            "rawOutput": "sunny",
            "body": "sunny",
            "content": [{"type": "content", "content": text("sunny")}],
        },
        {"sessionUpdate": "agent_message_chunk", "content": text("Done.")},
    ]


def test_file_edits_use_acp_diff_fields() -> None:
    calls = (
        ToolCall(
            id="e1",
            name="file_edit",
            arguments={"path": "src/a.py", "old_string": "x = 1", "new_string": "x = 2"},
        ),
        ToolCall(id="w1", name="file_write", arguments={"path": "b.md", "content": "# B\n"}),
    )
    updates = wire(history_updates([ChatMessage(role="assistant", content="", tool_calls=calls)]))
    assert updates == [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "e1",
            "title": "Edit `src/a.py`",
            "kind": "edit",
            "status": "completed",
            "rawInput": {"path": "src/a.py", "old_string": "x = 1", "new_string": "x = 2"},
            "name": "file_edit",
            "content": [
                {"type": "diff", "path": "src/a.py", "oldText": "x = 1", "newText": "x = 2"}
            ],
        },
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "w1",
            "title": "Write `b.md`",
            "kind": "edit",
            "status": "completed",
            "rawInput": {"path": "b.md", "content": "# B\n"},
            "name": "file_write",
            "content": [{"type": "diff", "path": "b.md", "oldText": None, "newText": "# B\n"}],
        },
    ]


def test_tool_message_without_a_call_id_is_not_replayed() -> None:
    assert history_updates([ChatMessage(role="tool", content="orphan")]) == []


PLAN_WIRE: dict[str, Any] = {
    "sessionUpdate": "plan",
    "entries": [
        {"content": "read", "status": "completed", "priority": "high"},
        {
            "content": "edit",
            "status": "in_progress",
            "priority": "medium",
            "_meta": {"zeroclaw": {"activeForm": "Editing"}},
        },
    ],
}


def test_plan_update() -> None:
    plan = (
        PlanStep(content="read", status="completed", priority="high"),
        PlanStep(content="edit", status="in_progress", active_form="Editing"),
    )
    assert wire([plan_update(plan)]) == [PLAN_WIRE]
    assert wire([plan_update(())]) == [{"sessionUpdate": "plan", "entries": []}]


def test_successful_todo_write_replays_its_plan_between_call_and_result() -> None:
    todos = {
        "todos": [
            {"content": " read ", "status": "completed", "priority": "high"},
            {"content": "edit", "status": "in_progress", "activeForm": "Editing"},
        ]
    }
    messages = [
        ChatMessage(
            role="assistant",
            content="",
            tool_calls=(
                ToolCall(id="p1", name="todo_write", arguments=todos),
                ToolCall(id="p2", name="todo_write", arguments={"todos": "nonsense"}),
            ),
        ),
        ChatMessage(
            role="tool",
            content="Plan updated: 2 item(s) (1 completed, 1 in progress, 0 pending)",
            tool_call_id="p1",
            tool_name="todo_write",
        ),
        ChatMessage(
            role="tool",
            content="Error: Missing or invalid 'todos': expected a list of items",
            tool_call_id="p2",
            tool_name="todo_write",
        ),
    ]
    kinds = [u["sessionUpdate"] for u in wire(history_updates(messages))]
    # As live: each call's announcement, what it streamed, its result; then the next call.
    assert kinds == ["tool_call", "plan", "tool_call_update", "tool_call", "tool_call_update"]
    plan = wire(history_updates(messages))[1]
    assert plan == PLAN_WIRE


def test_denied_todo_write_replays_no_plan() -> None:
    call = ToolCall(id="p1", name="todo_write", arguments={"todos": [{"content": "x"}]})
    messages = [
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(
            role="tool", content="Denied by user.", tool_call_id="p1", tool_name="todo_write"
        ),
    ]
    kinds = [u["sessionUpdate"] for u in wire(history_updates(messages))]
    assert kinds == ["tool_call", "tool_call_update"]


def test_escalation_text_replays_between_its_call_and_result() -> None:
    shown = ToolCall(id="e1", name="escalate_to_human", arguments={"summary": "Stuck"})
    refused = ToolCall(id="e2", name="escalate_to_human", arguments={"summary": ""})
    messages = [
        ChatMessage(role="assistant", content="", tool_calls=(shown, refused)),
        ChatMessage(
            role="tool",
            content="Escalation shown to the user (medium urgency).",
            tool_call_id="e1",
            tool_name="escalate_to_human",
        ),
        ChatMessage(
            role="tool",
            content="Error: 'summary' must not be empty",
            tool_call_id="e2",
            tool_name="escalate_to_human",
        ),
    ]
    updates = wire(history_updates(messages))
    assert [u["sessionUpdate"] for u in updates] == [
        "tool_call",
        "agent_message_chunk",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
    ]
    assert updates[1]["content"] == text("\n\n**Escalation (medium urgency):** Stuck\n\n")


DIGEST = "ab" * 32
DELIVERED_URI = f"attachment://deliver/{DIGEST}.md"


def delivery_history(title: str | None = "Quarterly") -> list[ChatMessage]:
    arguments: dict[str, Any] = {"path": "r.md"}
    if title is not None:
        arguments["title"] = title
    call = ToolCall(id="d1", name="deliver_file", arguments=arguments)
    return [
        ChatMessage(role="assistant", content="", tool_calls=(call,)),
        ChatMessage(
            role="tool",
            content=f"Delivered r.md (3 bytes)\nuri={DELIVERED_URI}",
            tool_call_id="d1",
            tool_name="deliver_file",
        ),
    ]


def embedded(uri: str, mime_type: str) -> schema.EmbeddedResource:
    return schema.EmbeddedResource(
        resource=schema.BlobResource(uri=uri, mime_type=mime_type, blob="YWJj")
    )


def test_delivered_file_replays_with_its_title_and_blob() -> None:
    seen: list[tuple[str, str]] = []

    def embed(uri: str, mime_type: str) -> schema.EmbeddedResource:
        seen.append((uri, mime_type))
        return embedded(uri, mime_type)

    update = wire(history_updates(delivery_history(), embed=embed))[-1]
    assert seen == [(DELIVERED_URI, "text/markdown")]
    assert update["title"] == "Quarterly"
    assert update["status"] == "completed"
    assert update["content"][1] == {
        "type": "content",
        "content": {
            "type": "resource",
            "resource": {"uri": DELIVERED_URI, "mimeType": "text/markdown", "blob": "YWJj"},
        },
    }
    assert "YWJj" not in update["rawOutput"]


def test_delivered_file_that_is_gone_replays_as_failed() -> None:
    update = wire(history_updates(delivery_history(title=None), embed=lambda _u, _m: None))[-1]
    assert update["status"] == "failed"
    assert update["title"] == "r.md"
    assert len(update["content"]) == 1


def test_replay_embeds_delivered_files_within_a_byte_budget() -> None:
    history = delivery_history() * 3  # three 3-byte deliveries
    updates = wire(history_updates(history, embed=embedded, max_embed_bytes=7))
    finished = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert [len(u["content"]) for u in finished] == [2, 2, 1]
    assert all(u["status"] == "completed" for u in finished)


def test_a_call_replays_the_diffs_and_locations_its_cards_showed() -> None:
    """Replay shows the stored view (the file as it was then), not the arguments' paths,
    and the record survives the store's codec."""
    arguments = {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}
    view = CallView(
        diffs=(FileDiff("/ws/a.py", "x = 1\ny = 0\n", "x = 2\ny = 0\n"),),
        locations=(FileLocation("/ws/a.py", 1),),
    )
    record = ToolRecord(view=view, found=(FileLocation("/ws/b.py", 7),))
    assert record_from_json(record_to_json(record)) == record
    assert record_from_json(record_to_json(ToolRecord())) == ToolRecord()
    messages = [
        ChatMessage(
            role="assistant",
            content="",
            tool_calls=(ToolCall(id="e1", name="file_edit", arguments=arguments),),
        ),
        ChatMessage(
            role="tool",
            content="Edited a.py",
            tool_call_id="e1",
            tool_name="file_edit",
            record=record_from_json(record_to_json(record)),
        ),
    ]
    started, finished = wire(history_updates(messages))
    diff = {
        "type": "diff",
        "path": "/ws/a.py",
        "oldText": "x = 1\ny = 0\n",
        "newText": "x = 2\ny = 0\n",
    }
    assert started["rawInput"] == arguments
    assert started["content"] == [diff]
    assert started["locations"] == [{"path": "/ws/a.py", "line": 1}]
    assert finished["content"][0] == diff
    assert finished["locations"] == [{"path": "/ws/b.py", "line": 7}]


_paths = st.text(min_size=1, max_size=20).map(lambda tail: "/ws/" + tail)
_locations = st.builds(FileLocation, _paths, st.none() | st.integers(min_value=1, max_value=10**6))
_records = st.builds(
    ToolRecord,
    view=st.none()
    | st.builds(
        CallView,
        diffs=st.lists(
            st.builds(FileDiff, _paths, st.none() | st.text(max_size=30), st.text(max_size=30)),
            max_size=2,
        ).map(tuple),
        locations=st.lists(_locations, max_size=3).map(tuple),
    ),
    found=st.lists(_locations, max_size=3).map(tuple),
)


@given(_records)
def test_a_record_with_its_view_survives_the_store_codec(record: ToolRecord) -> None:
    assert record_from_json(record_to_json(record)) == record
