"""History replay: stored messages → the exact ``session/update`` wire objects."""

from __future__ import annotations

from typing import Any

import msgspec

from acp_core import schema
from acp_server.conversation import ChatMessage, PlanEntry, ToolCall
from acp_server.replay import history_updates, plan_update


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
            "title": "shell",
            "kind": "execute",
            "status": "completed",
            "rawInput": {"command": "ls"},
            "name": "shell",
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
            "toolCallId": "toolu_1",
            "status": "completed",
            "rawOutput": "a.txt\n",
            "name": "shell",
            "title": "shell",
            "kind": "execute",
            "body": "a.txt\n",
            "content": [{"type": "content", "content": text("a.txt\n")}],
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
            "title": "file_edit",
            "kind": "edit",
            "status": "completed",
            "rawInput": {"path": "src/a.py", "oldText": "x = 1", "newText": "x = 2"},
            "name": "file_edit",
            "content": [
                {"type": "diff", "path": "src/a.py", "oldText": "x = 1", "newText": "x = 2"}
            ],
        },
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "w1",
            "title": "file_write",
            "kind": "edit",
            "status": "completed",
            "rawInput": {"path": "b.md", "newText": "# B\n"},
            "name": "file_write",
            "content": [{"type": "diff", "path": "b.md", "newText": "# B\n"}],
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
            "activeForm": "Editing",
        },
    ],
}


def test_plan_update() -> None:
    plan = (
        PlanEntry(content="read", status="completed", priority="high"),
        PlanEntry(content="edit", status="in_progress", active_form="Editing"),
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
    assert kinds == ["tool_call", "tool_call", "plan", "tool_call_update", "tool_call_update"]
    plan = wire(history_updates(messages))[2]
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
