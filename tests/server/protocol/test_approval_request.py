"""What a permission request shows: the whole command, or plainly how much was left out."""

from __future__ import annotations

from typing import Any

import msgspec

from acp_server.agent.tools.base import ToolDefinition
from acp_server.agent.tools.registry import definition_for
from acp_server.cli.render import TurnRenderer, reveal_padding
from acp_server.protocol.presentation.permissions import DEFAULT_MAX_SUMMARY_CHARS, approval_request


def prompt_of(definition: ToolDefinition, arguments: dict[str, Any]) -> dict[str, Any]:
    shown: dict[str, Any] = msgspec.to_builtins(
        approval_request("s", definition, arguments).tool_call
    )
    return shown


def test_a_shell_command_is_never_cut() -> None:
    command = "ls" + " " * (DEFAULT_MAX_SUMMARY_CHARS * 3) + "; echo tail"
    prompt = prompt_of(definition_for("shell"), {"command": command})
    assert prompt["rawInput"] == {"tool": "shell", "summary": command}
    assert prompt["content"] == [
        {"type": "content", "content": {"type": "text", "text": f"command: {command}"}}
    ]


def test_other_long_arguments_say_how_much_was_left_out() -> None:
    arguments = {"query": "q" * (DEFAULT_MAX_SUMMARY_CHARS + 500)}
    prompt = prompt_of(ToolDefinition.fallback("mcp__srv__lookup"), arguments)
    [block] = prompt["content"]
    text = block["content"]["text"]
    left_out = len("query: ") + DEFAULT_MAX_SUMMARY_CHARS + 500 - DEFAULT_MAX_SUMMARY_CHARS
    assert text.endswith(
        f"\n[shortened by {left_out} characters: the full arguments are in rawInput.arguments]"
    )
    assert prompt["rawInput"] == {
        "tool": "mcp__srv__lookup",
        "summary": text,
        "arguments": arguments,
    }
    short = prompt_of(ToolDefinition.fallback("mcp__srv__lookup"), {"query": "q"})
    assert short["rawInput"] == {"tool": "mcp__srv__lookup", "summary": "query: q"}


def test_permission_box_draws_every_line_and_counts_padding() -> None:
    out: list[str] = []
    renderer = TurnRenderer(out.append, color=False)
    text = "command: ls" + " " * 500 + "; echo tail\nsecond line " + "x" * 300
    renderer.permission_box(
        {
            "toolCall": {
                "title": "`ls`",
                "content": [{"type": "content", "content": {"type": "text", "text": text}}],
            },
            "options": [{"optionId": "reject-once", "name": "Reject"}],
        }
    )
    assert "".join(out) == (
        "? Allow `ls`?\n"
        "  command: ls⟨500 blanks⟩; echo tail\n"
        f"  second line {'x' * 300}\n"
        "  1) Reject\n"
    )
    assert reveal_padding("a       b") == "a       b"  # seven blanks stay as they are
