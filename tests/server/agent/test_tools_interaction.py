"""ask_user, escalate_to_human, todo_write and the tool registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.agent.tools.base import ToolContext, ToolError, ToolOutput
from acp_server.agent.tools.interaction import AskUserTool, EscalateToHumanTool, TodoWriteTool
from acp_server.agent.tools.registry import build_tools, tool_specs
from acp_server.model import PlanStep
from tests.server.tool_context import Recorder, make_context


async def test_ask_user_with_choices_asks_the_client(tmp_path: Path) -> None:
    ctx, recorder = make_context(tmp_path, recorder=Recorder(answer=1))
    args = {"question": "Which database?", "choices": ["sqlite", "postgres"]}
    result = await AskUserTool().run(args, ctx)
    assert recorder.questions == [("Which database?", ["sqlite", "postgres"])]
    assert result.ok
    assert result.text == "The user chose: postgres"


async def test_ask_user_dismissed_is_a_failed_result(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path, recorder=Recorder(answer=None))
    result = await AskUserTool().run({"question": "Go?", "choices": ["yes", "no"]}, ctx)
    assert not result.ok
    assert result.text.startswith("Error: The user did not pick a choice")


@pytest.mark.parametrize("args", [{"question": "Why?"}, {"question": "Why?", "choices": []}])
async def test_ask_user_without_choices_fails_fast(tmp_path: Path, args: dict[str, Any]) -> None:
    ctx, recorder = make_context(tmp_path)
    with pytest.raises(ToolError, match="elicitation RFD"):
        await AskUserTool().run(args, ctx)
    assert recorder.questions == []


async def test_ask_user_rejects_malformed_choices(tmp_path: Path) -> None:
    ctx, recorder = make_context(tmp_path)
    with pytest.raises(ToolError, match="'choices'"):
        await AskUserTool().run({"question": "?", "choices": ["ok", 3]}, ctx)
    assert recorder.questions == []


async def test_escalate_to_human_streams_text(tmp_path: Path) -> None:
    ctx, recorder = make_context(tmp_path)
    args = {"summary": "Deploy key expired", "context": "CI fails at push.", "urgency": "high"}
    result = await EscalateToHumanTool().run(args, ctx)
    assert result.text == "Escalation shown to the user (high urgency)."
    [text] = recorder.texts
    assert "**Escalation (high urgency):** Deploy key expired" in text
    assert "CI fails at push." in text


async def test_escalate_to_human_cannot_wait_for_a_reply(tmp_path: Path) -> None:
    ctx, recorder = make_context(tmp_path)
    with pytest.raises(ToolError, match="wait_for_response is not supported"):
        await EscalateToHumanTool().run({"summary": "help", "wait_for_response": True}, ctx)
    with pytest.raises(ToolError, match="'urgency'"):
        await EscalateToHumanTool().run({"summary": "help", "urgency": "meh"}, ctx)
    assert recorder.texts == []


async def test_todo_write_sets_the_plan(tmp_path: Path) -> None:
    ctx, recorder = make_context(tmp_path)
    todos = [
        {"content": "Write tests", "status": "completed", "priority": "high"},
        {"content": "Fix bug", "status": "in_progress", "activeForm": "Fixing bug"},
        {"content": "Ship", "status": "pending", "priority": "low"},
    ]
    result = await TodoWriteTool().run({"todos": todos}, ctx)
    assert recorder.plans == [
        [
            PlanStep("Write tests", "completed", "high"),
            PlanStep("Fix bug", "in_progress", "medium", "Fixing bug"),
            PlanStep("Ship", "pending", "low"),
        ]
    ]
    assert result.text == "Plan updated: 3 item(s) (1 completed, 1 in progress, 1 pending)"


async def test_todo_write_validates_items(tmp_path: Path) -> None:
    ctx, recorder = make_context(tmp_path)
    with pytest.raises(ToolError, match=r"todos\[1\]\.status"):
        await TodoWriteTool().run(
            {"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}]},
            ctx,
        )
    with pytest.raises(ToolError, match="'todos'"):
        await TodoWriteTool().run({"todos": "a, b"}, ctx)
    assert recorder.plans == []


class _FakeMcpTool:
    def __init__(self, name: str) -> None:
        self.name = name
        self.description = "from an MCP server"
        self.parameters: dict[str, Any] = {"type": "object"}
        self.side_effects = True

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("mcp")


def test_registry_has_exactly_the_builtin_tools_and_no_memory_tools() -> None:
    tools = build_tools()
    assert set(tools) == {
        "shell", "file_read", "file_write", "file_edit", "glob_search", "content_search",
        "deliver_file", "ask_user", "escalate_to_human", "todo_write", "web_fetch",
        "http_request",
    }  # fmt: skip
    assert not any(name.startswith("memory_") for name in tools)
    specs = tool_specs(tools)
    assert [spec.name for spec in specs] == list(tools)
    for spec in specs:
        assert spec.description
        assert spec.parameters["type"] == "object"
        assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])


def test_registry_adds_mcp_tools_but_never_shadows_builtins() -> None:
    mcp_weather = _FakeMcpTool("weather")
    tools = build_tools(include_mcp=[mcp_weather, _FakeMcpTool("shell")])
    assert tools["weather"] is mcp_weather
    assert type(tools["shell"]).__name__ == "ShellTool"
