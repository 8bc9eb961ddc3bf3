"""The shell tool: output, exit codes, policy re-check, and no orphaned processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.shell import ShellTool
from acp_server.config import RiskProfileConfig
from tests.helpers import poll_until
from tests.server.tool_context import make_context, pids_in, process_gone

pytestmark = pytest.mark.e2e  # the shell tool spawns processes

ANYTHING_GOES = RiskProfileConfig(allowed_commands=("*",), block_high_risk_commands=False)


async def _wait_until_gone(pids: list[int]) -> None:
    await poll_until(lambda: all(process_gone(pid) for pid in pids))


async def _read_pids(path: Path, count: int) -> list[int]:
    await poll_until(lambda: len(pids_in(path)) >= count)
    return pids_in(path)[:count]


async def test_runs_in_workspace_and_captures_output(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "marker.txt").write_text("x")
    ctx, _ = make_context(tmp_path)
    with trio.fail_after(10):
        result = await ShellTool().run({"command": "echo hello-from-shell && ls"}, ctx)
    assert result.ok
    assert result.text.splitlines() == ["hello-from-shell", "marker.txt"]
    # Output goes to the tool result, never to our stdout (the protocol channel).
    assert "hello-from-shell" not in capfd.readouterr().out


async def test_stderr_and_exit_code_are_reported(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path)
    with trio.fail_after(10):
        result = await ShellTool().run({"command": "ls no-such-file"}, ctx)
    assert not result.ok
    assert result.text.startswith("Error: Command exited with code 2.")
    assert "no-such-file" in result.text


async def test_empty_output_and_stdin_is_empty(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path)
    with trio.fail_after(10):
        result = await ShellTool().run({"command": "cat"}, ctx)  # would hang on a real stdin
    assert result.ok
    assert result.text == "(no output)"


async def test_secrets_are_not_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-should-not-leak")
    ctx, _ = make_context(tmp_path)
    with trio.fail_after(10):
        result = await ShellTool().run({"command": "echo key=$OPENROUTER_API_KEY"}, ctx)
    assert result.text == "key="


async def test_output_is_capped(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path)
    (tmp_path / "print_a_lot.py").write_text("print('x' * 200000)\n")
    command = "python3 print_a_lot.py"
    with trio.fail_after(10):
        result = await ShellTool().run({"command": command}, ctx)
    assert result.ok
    assert "[output truncated: " in result.text
    assert len(result.text) < 70_000


@pytest.mark.parametrize(
    ("command", "reason"),
    [("rm -rf /", "Command 'rm' is not allowed"), ("cat ../x", "Path escapes workspace")],
)
async def test_policy_is_rechecked_by_the_tool(tmp_path: Path, command: str, reason: str) -> None:
    ctx, _ = make_context(tmp_path)
    with pytest.raises(ToolError, match=reason):
        await ShellTool().run({"command": command}, ctx)


async def test_missing_command_is_an_error(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path)
    with pytest.raises(ToolError, match="'command'"):
        await ShellTool().run({}, ctx)


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path, ANYTHING_GOES, shell_timeout_secs=1)
    command = "sleep 1000 & echo $! > pids; echo $$ >> pids; sleep 1000"
    with trio.fail_after(15):
        result = await ShellTool().run({"command": command}, ctx)
    assert not result.ok
    assert result.text.startswith("Error: Command timed out after 1 s")
    pids = await _read_pids(tmp_path / "pids", 2)
    await _wait_until_gone(pids)


async def test_cancel_kills_the_whole_process_group(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path, ANYTHING_GOES, shell_timeout_secs=600)
    command = "sleep 1000 & echo $! > pids; echo $$ >> pids; sleep 1000"
    pids: list[int] = []
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:

            async def cancel_once_started() -> None:
                pids.extend(await _read_pids(tmp_path / "pids", 2))
                assert not any(process_gone(pid) for pid in pids)
                nursery.cancel_scope.cancel()

            nursery.start_soon(cancel_once_started)
            await ShellTool().run({"command": command}, ctx)
            pytest.fail("the shell tool should have been cancelled")
    await _wait_until_gone(pids)


async def test_background_child_holding_the_pipe_does_not_hang_or_survive(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path, ANYTHING_GOES, shell_timeout_secs=600)
    with trio.fail_after(10):
        result = await ShellTool().run({"command": "sleep 1000 & echo $!"}, ctx)
    assert result.ok
    await _wait_until_gone([int(result.text.strip())])


async def test_missing_workspace_is_a_clear_error(tmp_path: Path) -> None:
    ctx, _ = make_context(tmp_path / "gone")
    with pytest.raises(ToolError, match="Cannot start the shell in"):
        await ShellTool().run({"command": "ls"}, ctx)
