"""file_read, file_write, file_edit: behaviour and the jail."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_server.agent.tools.base import Tool, ToolError
from acp_server.agent.tools.files import FileEditTool, FileReadTool, FileWriteTool
from acp_server.config import RiskProfileConfig
from acp_server.protocol.presentation.permissions import approval_request
from tests.server.tool_context import make_context


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return root


async def test_file_read_numbers_lines(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    result = await FileReadTool().run({"path": "notes.txt"}, ctx)
    assert result.text == "     1\talpha\n     2\tbeta\n     3\tgamma\n     4\tdelta"


async def test_file_read_offset_and_limit_say_where_to_continue(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    result = await FileReadTool().run({"path": "notes.txt", "offset": 2, "limit": 2}, ctx)
    assert result.text.splitlines() == [
        "     2\tbeta",
        "     3\tgamma",
        "[showing lines 2-3; more follow: read on with offset=4]",
    ]
    with pytest.raises(ToolError, match=re.escape("offset 9 is past the end of notes.txt")):
        await FileReadTool().run({"path": "notes.txt", "offset": 9}, ctx)
    with pytest.raises(ToolError, match="'offset'"):
        await FileReadTool().run({"path": "notes.txt", "offset": 0}, ctx)


async def test_file_read_refuses_binary_directories_and_missing_files(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x00data")
    (workspace / "sub").mkdir()
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match="binary file; use deliver_file"):
        await FileReadTool().run({"path": "blob.bin"}, ctx)
    with pytest.raises(ToolError, match="sub is a directory"):
        await FileReadTool().run({"path": "sub"}, ctx)
    with pytest.raises(ToolError, match=re.escape("File not found: missing.txt")):
        await FileReadTool().run({"path": "missing.txt"}, ctx)


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "link", "ABSOLUTE"])
async def test_every_file_tool_refuses_jail_escapes(workspace: Path, path: str) -> None:
    (workspace / "link").symlink_to(workspace.parent / "outside.txt")
    if path == "ABSOLUTE":
        path = str(workspace.parent / "outside.txt")
    ctx, _ = make_context(workspace)
    calls: list[tuple[Tool, dict[str, Any]]] = [
        (FileReadTool(), {"path": path}),
        (FileWriteTool(), {"path": path, "content": "pwned"}),
        (FileEditTool(), {"path": path, "old_string": "secret", "new_string": "pwned"}),
    ]
    for tool, arguments in calls:
        with pytest.raises(ToolError, match="Path escapes workspace directory"):
            await tool.run(arguments, ctx)
    assert (workspace.parent / "outside.txt").read_text() == "secret\n"


async def test_file_write_creates_parents_and_overwrites(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    result = await FileWriteTool().run({"path": "a/b/new.txt", "content": "héllo\n"}, ctx)
    assert result.text == "Wrote 7 bytes to a/b/new.txt"
    assert (workspace / "a" / "b" / "new.txt").read_text() == "héllo\n"
    await FileWriteTool().run({"path": "a/b/new.txt", "content": ""}, ctx)
    assert (workspace / "a" / "b" / "new.txt").read_text() == ""


async def test_file_write_refuses_directories_and_readonly(workspace: Path) -> None:
    (workspace / "dir").mkdir()
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match="it is a directory"):
        await FileWriteTool().run({"path": "dir", "content": "x"}, ctx)
    readonly_ctx, _ = make_context(workspace, RiskProfileConfig(level="readonly"))
    with pytest.raises(ToolError, match="read-only"):
        await FileWriteTool().run({"path": "notes.txt", "content": "x"}, readonly_ctx)
    assert (workspace / "notes.txt").read_text().startswith("alpha")


async def test_file_write_forbidden_path_inside_workspace(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    profile = RiskProfileConfig(forbidden_paths=(str(workspace / ".git"),))
    ctx, _ = make_context(workspace, profile)
    with pytest.raises(ToolError, match="forbidden by security policy"):
        await FileWriteTool().run({"path": ".git/config", "content": "x"}, ctx)
    assert not (workspace / ".git" / "config").exists()


async def test_file_edit_replaces_exactly_one_match(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    args = {"path": "notes.txt", "old_string": "beta\ngamma", "new_string": "BETA"}
    result = await FileEditTool().run(args, ctx)
    assert result.text == "Edited notes.txt: replaced 1 occurrence (2 line(s) → 1 line(s))"
    assert (workspace / "notes.txt").read_text() == "alpha\nBETA\ndelta\n"


async def test_file_edit_refuses_zero_or_several_matches(workspace: Path) -> None:
    (workspace / "dup.txt").write_text("x = 1\nx = 1\n")
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match=re.escape("old_string matches 2 times in dup.txt")):
        await FileEditTool().run({"path": "dup.txt", "old_string": "x = 1", "new_string": ""}, ctx)
    with pytest.raises(ToolError, match=re.escape("old_string not found in dup.txt")):
        await FileEditTool().run({"path": "dup.txt", "old_string": "y", "new_string": "z"}, ctx)
    with pytest.raises(ToolError, match="must not be empty"):
        await FileEditTool().run({"path": "dup.txt", "old_string": "", "new_string": "z"}, ctx)
    assert (workspace / "dup.txt").read_text() == "x = 1\nx = 1\n"


async def test_missing_arguments_name_the_field(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match="'content'"):
        await FileWriteTool().run({"path": "x"}, ctx)
    with pytest.raises(ToolError, match="'path'"):
        await FileReadTool().run({"path": 3}, ctx)


async def test_file_read_cuts_a_huge_single_line(workspace: Path) -> None:
    (workspace / "bundle.min.js").write_text("x" * 5_000_000 + "\nsecond line\n")
    ctx, _ = make_context(workspace)
    result = await FileReadTool().run({"path": "bundle.min.js"}, ctx)
    first, second = result.text.splitlines()
    assert first == "     1\t" + "x" * 2000 + " …[line truncated]"
    assert second == "     2\tsecond line"


def _failing(code: int) -> Callable[..., Any]:
    def fail(*args: Any) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize(("call", "code"), [("write", errno.ENOSPC), ("fsync", errno.EIO)])
async def test_a_failed_write_leaves_the_old_file_intact(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, call: str, code: int
) -> None:
    ctx, _ = make_context(workspace)
    before = sorted(os.listdir(workspace))
    monkeypatch.setattr(os, call, _failing(code))
    with pytest.raises(ToolError, match=re.escape(f"Cannot write notes.txt: {os.strerror(code)}")):
        await FileWriteTool().run({"path": "notes.txt", "content": "replaced\n"}, ctx)
    with pytest.raises(ToolError, match=re.escape(f"Cannot write notes.txt: {os.strerror(code)}")):
        await FileEditTool().run(
            {"path": "notes.txt", "old_string": "beta", "new_string": "BETA"}, ctx
        )
    monkeypatch.undo()
    assert (workspace / "notes.txt").read_text() == "alpha\nbeta\ngamma\ndelta\n"
    assert sorted(os.listdir(workspace)) == before  # no temporary file left behind


async def test_writes_keep_the_file_mode(workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    secret = workspace / "notes.txt"
    secret.chmod(0o600)
    ctx, _ = make_context(workspace)
    await FileWriteTool().run({"path": "run.sh", "content": "echo new\n"}, ctx)
    await FileEditTool().run({"path": "notes.txt", "old_string": "beta", "new_string": "B"}, ctx)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert script.read_text() == "echo new\n"
    assert secret.read_text() == "alpha\nB\ngamma\ndelta\n"


async def test_writing_through_a_hard_link_leaves_the_outside_file_alone(workspace: Path) -> None:
    outside = workspace.parent / "outside.txt"
    os.link(outside, workspace / "linked.txt")
    ctx, _ = make_context(workspace)
    await FileWriteTool().run({"path": "linked.txt", "content": "secret and more\n"}, ctx)
    assert (workspace / "linked.txt").read_text() == "secret and more\n"
    await FileEditTool().run(
        {"path": "linked.txt", "old_string": "more", "new_string": "less"}, ctx
    )
    assert (workspace / "linked.txt").read_text() == "secret and less\n"
    assert outside.read_text() == "secret\n"


@pytest.mark.parametrize("tool", ["file_write", "file_edit"])
async def test_a_directory_swapped_for_a_link_after_the_check_is_not_followed(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "notes.txt").write_text("inside\n")
    elsewhere = workspace.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("outside\n")
    ctx, _ = make_context(workspace)
    check = ctx.policy.resolve_path

    def check_then_swap(path: str, *, for_write: bool = False) -> Path:
        resolved = check(path, for_write=for_write)
        shutil.rmtree(workspace / "sub")
        (workspace / "sub").symlink_to(elsewhere, target_is_directory=True)
        return resolved

    monkeypatch.setattr(ctx.policy, "resolve_path", check_then_swap)
    arguments: dict[str, Any] = {"path": "sub/notes.txt"}
    if tool == "file_write":
        run = FileWriteTool().run
        arguments["content"] = "pwned\n"
    else:
        run = FileEditTool().run
        arguments.update(old_string="outside", new_string="pwned")
    refused = re.escape("Refusing to write through a symbolic link: sub/notes.txt")
    with pytest.raises(ToolError, match=refused):
        await run(arguments, ctx)
    assert (elsewhere / "notes.txt").read_text() == "outside\n"
    assert sorted(os.listdir(elsewhere)) == ["notes.txt"]


async def test_unpaired_surrogates_are_a_tool_error_and_are_shown_escaped(
    workspace: Path,
) -> None:
    ctx, _ = make_context(workspace)
    arguments = {"path": "x\ud800.txt", "content": "ok"}
    with pytest.raises(ToolError, match=r"Invalid 'path': contains the unpaired surrogate \\ud800"):
        await FileWriteTool().run(arguments, ctx)
    request = approval_request("s-test", FileWriteTool.definition, arguments)
    assert request.tool_call.raw_input == {
        "tool": "file_write",
        "summary": "path: x\\ud800.txt, content: ok",
    }
    assert not [name for name in os.listdir(workspace) if name.startswith("x")]
