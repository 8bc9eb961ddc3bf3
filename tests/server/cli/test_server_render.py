"""The terminal rendering of a turn (`zeroclaw prompt`, `zeroclaw demo`)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from acp_server.cli.render import TurnRenderer, terminal_safe, tool_input_summary


def render(*updates: dict[str, Any]) -> tuple[str, TurnRenderer]:
    out: list[str] = []
    renderer = TurnRenderer(out.append, color=False)
    for update in updates:
        renderer.update({"sessionId": "s", "update": update})
    return "".join(out), renderer


def chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_text_thoughts_tools_and_plans() -> None:
    text, renderer = render(
        chunk("agent_thought_chunk", "pondering"),
        chunk("agent_message_chunk", "Hello"),
        chunk("agent_message_chunk", " world"),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "shell",
            "kind": "execute",
            "rawInput": {"command": "ls -la", "approved": True},
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "rawOutput": "\n".join(f"line {i}" for i in range(12)),
        },
        chunk("agent_message_chunk", "\n\nDone."),
        {"sessionUpdate": "plan", "entries": [{"content": "ship", "status": "completed"}]},
    )
    assert text.startswith("thinking: pondering\n\nHello world\n⚙ shell (execute) ls -la\n")
    assert "  ✓ shell completed\n  │ line 0\n" in text
    assert "  │ … 4 more lines\n" in text
    assert "\n\nDone." in text
    assert text.endswith("plan:\n  [x] ship\n")
    assert renderer.chunks == 3
    assert renderer.tool_calls == 1


def test_failures_cancellation_and_deliveries() -> None:
    text, _ = render(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "file_read",
            "rawInput": {"path": "../x"},
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "rawOutput": "Error: escapes",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t2",
            "status": "failed",
            "title": "Report",
            "rawOutput": "Delivered",
            "content": [
                {
                    "type": "content",
                    "content": {
                        "type": "resource",
                        "resource": {"uri": "attachment://deliver/ab.pdf"},
                    },
                }
            ],
        },
    )
    assert "  • file_read completed" not in text
    assert "file_read completed\n  │ Error: escapes" in text
    assert "  ✗ Report failed" in text
    assert "⇩ delivered attachment://deliver/ab.pdf" in text


def test_permission_box_lists_the_options() -> None:
    out: list[str] = []
    renderer = TurnRenderer(out.append, color=False)
    options = renderer.permission_box(
        {
            "toolCall": {
                "title": "`ls`",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "command: ls"}}
                ],
            },
            "options": [
                {"optionId": "allow-once", "name": "Allow once"},
                {"optionId": "reject-once", "name": "Reject"},
            ],
        }
    )
    assert [o["optionId"] for o in options] == ["allow-once", "reject-once"]
    assert "".join(out) == "? Allow `ls`?\n  command: ls\n  1) Allow once\n  2) Reject\n"


def test_tool_input_summary() -> None:
    assert tool_input_summary({"command": "git status"}) == "git status"
    assert tool_input_summary({"path": "a.txt", "content": "x"}) == "a.txt"
    assert tool_input_summary({"x": 1, "approved": True}) == '{"x": 1}'
    assert tool_input_summary("raw") == ""


@given(st.text())
def test_terminal_safe_leaves_no_control_character_but_tab_and_newline(text: str) -> None:
    cleaned = terminal_safe(text)
    assert not [c for c in cleaned if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F]


@given(st.text(alphabet=st.characters(exclude_categories=["Cc"])))
def test_terminal_safe_keeps_printable_text_as_it_is(text: str) -> None:
    assert terminal_safe(text) == text


def test_rendered_updates_and_permission_boxes_carry_no_control_sequences() -> None:
    written: list[str] = []
    renderer = TurnRenderer(written.append, color=False)
    hostile = "a\x1b]0;title\x07b\x1b]52;c;aGk=\x1b\\c\rd"
    renderer.update(
        {
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": hostile},
            }
        }
    )
    renderer.update(
        {
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "t",
                "title": hostile,
                "rawInput": {"command": hostile},
            }
        }
    )
    renderer.update(
        {
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "status": "completed",
                "rawOutput": hostile,
            }
        }
    )
    renderer.update(
        {
            "update": {
                "sessionUpdate": "plan",
                "entries": [{"content": hostile, "status": "pending"}],
            }
        }
    )
    renderer.permission_box(
        {
            "toolCall": {
                "title": hostile,
                "content": [{"type": "content", "content": {"type": "text", "text": hostile}}],
            },
            "options": [{"name": hostile}],
        }
    )
    out = "".join(written)
    assert "abcd" in out
    for control in ("\x1b", "\x07", "\r", "title", "aGk="):
        assert control not in out
