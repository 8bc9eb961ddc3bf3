"""MCP servers as agent tools, against a real stdio MCP server built with the ``mcp`` SDK."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import psutil
import pytest
import trio

from acp_core import schema
from acp_core.tools import tool_kind
from acp_server.agent.tools.base import ToolContext, ToolOutput
from acp_server.agent.tools.mcp import (
    MAX_TOOL_NAME_CHARS,
    McpToolset,
    mcp_tool_name,
    open_mcp_tools,
    start_mcp_tools,
)
from acp_server.agent.tools.mcp_servers import select_mcp_servers
from acp_server.config import AgentConfig, McpServerConfig, RiskProfileConfig
from acp_server.model import PlanStep
from acp_server.security import Approval, SecurityPolicy

pytestmark = pytest.mark.e2e  # spawns MCP server processes

FIXTURE = Path(__file__).with_name("mcp_fixture_server.py")
CEILING_SECS = 30


def fixture_server(name: str = "fixture", *extra_args: str, **env: str) -> McpServerConfig:
    return McpServerConfig(
        name=name, command=sys.executable, args=(str(FIXTURE), *extra_args), env=env
    )


async def _no_choice(question: str, choices: Sequence[str]) -> int | None:
    return None


async def _ignore_text(text: str) -> None:
    return None


async def _ignore_plan(entries: Sequence[PlanStep]) -> None:
    return None


def tool_context(workspace: Path) -> ToolContext:
    return ToolContext(
        session_id="s-test",
        workspace=workspace,
        policy=SecurityPolicy(RiskProfileConfig(), workspace),
        shell_timeout_secs=10,
        ask_choice=_no_choice,
        send_text=_ignore_text,
        set_plan=_ignore_plan,
    )


async def call(
    toolset: McpToolset, tool_name: str, workspace: Path, /, **arguments: object
) -> ToolOutput:
    return await toolset.tools[tool_name].run(dict(arguments), tool_context(workspace))


async def test_remote_tools_are_prefixed_approved_like_builtins_and_callable(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools([fixture_server()], cwd=tmp_path) as toolset:
            # session/new must not wait for servers: nothing has even started yet.
            assert not toolset.ready
            await toolset.wait_ready()
            assert set(toolset.tools) == {
                "mcp__fixture__echo",
                "mcp__fixture__make_file",
                "mcp__fixture__fail",
                "mcp__fixture__crash",
                "mcp__fixture__pid",
                "mcp__fixture__environment",
                "mcp__fixture__getenv",
                "mcp__fixture__header",
                "mcp__fixture__wait_for_cancel",
            }
            echo = toolset.tools["mcp__fixture__echo"]
            assert echo.description == "[MCP server fixture] Repeat the text back."
            assert echo.parameters["required"] == ["text"]
            assert echo.side_effects is True
            assert tool_kind(echo.name) == "other"
            output = await call(toolset, "mcp__fixture__echo", tmp_path, text="hi there")
    assert output == ToolOutput(text="echo: hi there")
    assert toolset.problems == []


def test_supervised_sessions_ask_before_mcp_tools_unless_auto_approved(tmp_path: Path) -> None:
    supervised = SecurityPolicy(RiskProfileConfig(level="supervised"), tmp_path)
    decision = supervised.decide("mcp__fixture__echo", {"text": "x"}, side_effects=True)
    assert decision.approval is Approval.ASK
    trusted = SecurityPolicy(
        RiskProfileConfig(level="supervised", auto_approve=("mcp__fixture__echo",)), tmp_path
    )
    decision = trusted.decide("mcp__fixture__echo", {"text": "x"}, side_effects=True)
    assert decision.approval is Approval.ALLOW


@pytest.mark.parametrize(
    ("filename", "mime_type", "marker"),
    [
        ("notes.md", "text/markdown", "[Document: notes.md] {path}"),
        ("shot.png", "image/png", "[IMAGE:{path}]"),
    ],
)
async def test_blob_results_are_saved_under_uploads(
    tmp_path: Path, filename: str, mime_type: str, marker: str
) -> None:
    content = "# MCP made this\n"
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools([fixture_server()], cwd=tmp_path) as toolset:
            await toolset.wait_ready()
            output = await call(
                toolset,
                "mcp__fixture__make_file",
                tmp_path,
                name=filename,
                content=content,
                mime_type=mime_type,
            )
    digest = hashlib.sha256(content.encode()).hexdigest()
    stored = tmp_path / "uploads" / f"{digest}.{filename.rsplit('.', 1)[1]}"
    assert stored.read_text() == content
    assert output.ok
    assert output.text == f"made {filename}\n\n" + marker.format(path=stored)


async def test_tool_errors_reach_the_model_as_errors(tmp_path: Path) -> None:
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools([fixture_server()], cwd=tmp_path) as toolset:
            await toolset.wait_ready()
            output = await call(toolset, "mcp__fixture__fail", tmp_path, reason="disk is full")
    assert not output.ok
    assert output.text.startswith("Error: ")
    assert output.text.endswith("disk is full")


async def test_server_dying_mid_call_is_a_tool_error_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools(
            [fixture_server("flaky"), fixture_server("steady")], cwd=tmp_path
        ) as toolset:
            await toolset.wait_ready()
            crashed = await call(toolset, "mcp__flaky__crash", tmp_path)
            after = await call(toolset, "mcp__flaky__echo", tmp_path, text="again?")
            steady = await call(toolset, "mcp__steady__echo", tmp_path, text="still here")
    assert not crashed.ok
    assert "MCP server 'flaky' exited while running `crash`" in crashed.text
    assert not after.ok
    assert "MCP server 'flaky' has exited" in after.text
    assert steady == ToolOutput(text="echo: still here")
    assert any("'flaky' has exited" in problem for problem in toolset.problems)


async def test_servers_that_cannot_start_are_reported_not_fatal(tmp_path: Path) -> None:
    broken = fixture_server("broken", "--exit-at-start")
    missing = McpServerConfig(name="missing", command=str(tmp_path / "no-such-mcp-server"))
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools([broken, missing, fixture_server()], cwd=tmp_path) as toolset:
            await toolset.wait_ready()
            tools = set(toolset.tools)
            problems = toolset.problems
    assert "mcp__fixture__echo" in tools
    assert all(name.startswith("mcp__fixture__") for name in tools)
    assert len(problems) == 2
    assert problems[0].startswith("MCP server 'broken' could not be started: ")
    assert problems[1] == (
        f"MCP server 'missing' could not be started: command not found: {tmp_path / 'no-such-mcp-server'}"
    )


async def test_slow_server_times_out_at_startup(tmp_path: Path) -> None:
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools(
            # Reads its stdin and never answers; exits when the session closes stdin.
            [McpServerConfig(name="mute", command="sh", args=("-c", "cat > /dev/null"))],
            cwd=tmp_path,
            startup_timeout_secs=0.5,
        ) as toolset:
            await toolset.wait_ready()
            problems = toolset.problems
    assert problems == [
        "MCP server 'mute' could not be started: it did not finish starting within 0.5 s"
    ]


async def test_environment_and_workspace_are_passed_and_processes_end_with_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-must-not-leak")
    server = fixture_server("envy", FIXTURE_GREETING="bonjour")
    with trio.fail_after(CEILING_SECS):
        async with open_mcp_tools([server], cwd=tmp_path) as toolset:
            await toolset.wait_ready()
            environment = await call(toolset, "mcp__envy__environment", tmp_path)
            leaked = await call(toolset, "mcp__envy__getenv", tmp_path, name="ANTHROPIC_API_KEY")
            assert leaked.text == "<unset>"
            pid = int((await call(toolset, "mcp__envy__pid", tmp_path)).text)
            assert psutil.pid_exists(pid)
    assert environment.text == f"bonjour in {tmp_path}"
    assert not psutil.pid_exists(pid)


async def test_servers_started_in_a_connection_nursery_end_when_the_session_closes(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with trio.open_nursery() as connection_nursery:
            toolset = start_mcp_tools([fixture_server()], nursery=connection_nursery, cwd=tmp_path)
            await toolset.wait_ready()
            pid = int((await call(toolset, "mcp__fixture__pid", tmp_path)).text)
            await toolset.aclose()  # session/close: the connection (and its nursery) lives on
            assert not psutil.pid_exists(pid)
            after = await call(toolset, "mcp__fixture__echo", tmp_path, text="hi")
    assert after == ToolOutput(
        text="Error: MCP server 'fixture' was stopped because the session ended.", ok=False
    )


def test_tool_names_are_safe_unique_and_short() -> None:
    taken: set[str] = set()
    first = mcp_tool_name("my server", "read.file", taken)
    second = mcp_tool_name("my server!", "read file", taken)
    long_name = mcp_tool_name("s" * 80, "t" * 80, taken)
    assert first == "mcp__my_server__read_file"
    assert second == "mcp__my_server__read_file_2"
    assert len(long_name) == MAX_TOOL_NAME_CHARS
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) for name in taken)


def test_mcp_is_off_unless_the_agent_enables_it() -> None:
    requested: list[schema.McpServer] = [
        schema.McpServerStdio(name="client", command="client-mcp", args=["--stdio"])
    ]
    configured = McpServerConfig(name="docs", command="docs-mcp")
    disabled = AgentConfig(alias="a", mcp_servers=(configured,))
    assert select_mcp_servers(disabled, requested) == ()
    enabled = AgentConfig(alias="a", acp_enable_mcp=True, mcp_servers=(configured,))
    assert select_mcp_servers(enabled, requested) == (
        configured,
        McpServerConfig(name="client", command="client-mcp", args=("--stdio",), env={}),
    )


def test_connection_closed_code_matches_the_sdk() -> None:
    import mcp_types

    from acp_server.agent.tools.mcp import CONNECTION_CLOSED

    assert mcp_types.CONNECTION_CLOSED == CONNECTION_CLOSED
