"""Every file tool opens the file the jail checked (acp_server/security/beneath.py).

The adversary here is the worst a racing process can be: the directory ``d`` is a real
directory whenever the jail looks at it and a link to outside whenever anything else
does (the jail's checks are wrapped to swap it around them). Every tool that reads,
lists, searches, delivers, stats or writes below ``d`` must then fail or see the inside,
never the outside.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.agent.tools.base import ToolContext, ToolError
from acp_server.agent.tools.deliver import DeliverFileTool
from acp_server.agent.tools.files import FileEditTool, FileReadTool, FileWriteTool
from acp_server.agent.tools.search import ContentSearchTool, GlobSearchTool
from tests.helpers import swapping_directory
from tests.server.tool_context import make_context

SECRET = "outside-secret"


class Swapper:
    """``d`` in the workspace: a real directory or a link to ``outside``, atomically."""

    def __init__(self, workspace: Path, outside: Path) -> None:
        self.path = workspace / "d"
        self.real = workspace / "d.real"
        self.link = workspace / "d.link"
        self.real.mkdir()
        self.link.symlink_to(outside)
        os.rename(self.real, self.path)

    def make_real(self) -> None:
        if self.path.is_symlink():
            os.rename(self.path, self.link)
            os.rename(self.real, self.path)

    def make_link(self) -> None:
        if not self.path.is_symlink():
            os.rename(self.path, self.real)
            os.rename(self.link, self.path)


@pytest.fixture
def raced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ToolContext, Swapper]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("key.txt", f"{SECRET}.txt"):
        (outside / name).write_text(f"{SECRET}\n")
    swapper = Swapper(workspace, outside)
    (swapper.path / "key.txt").write_text("inside\n")
    ctx, _ = make_context(workspace)
    jail = ctx.policy.jail

    def checked_on_the_real_directory(check: Callable[..., Any]) -> Callable[..., Any]:
        def checking(*args: Any, **kwargs: Any) -> Any:
            swapper.make_real()
            try:
                return check(*args, **kwargs)
            finally:
                swapper.make_link()

        return checking

    for name in ("resolve_path", "allows_walked"):
        if hasattr(jail, name):
            monkeypatch.setattr(jail, name, checked_on_the_real_directory(getattr(jail, name)))
    swapper.make_link()
    return ctx, swapper


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (FileReadTool(), {"path": "d/key.txt"}),
        (DeliverFileTool(), {"path": "d/key.txt"}),
        (ContentSearchTool(), {"pattern": "secret|inside", "path": "d"}),
        (ContentSearchTool(), {"pattern": "secret|inside", "path": "d/key.txt"}),
        (FileEditTool(), {"path": "d/key.txt", "old_string": SECRET, "new_string": "x"}),
    ],
)
async def test_no_tool_reaches_outside_through_a_directory_swapped_after_its_check(
    raced: tuple[ToolContext, Swapper], tool: Any, arguments: dict[str, str]
) -> None:
    ctx, _ = raced
    try:
        output = await tool.run(arguments, ctx)
    except ToolError as refused:
        shown = str(refused)
    else:
        shown = output.text
        if output.delivered is not None:
            shown += output.delivered.path.read_text()
    assert SECRET not in shown


async def test_a_write_below_a_swapped_directory_stays_inside(
    raced: tuple[ToolContext, Swapper], tmp_path: Path
) -> None:
    ctx, _ = raced
    with pytest.raises(ToolError, match="symbolic link"):
        await FileWriteTool().run({"path": "d/new.txt", "content": "planted"}, ctx)
    assert not (tmp_path / "outside" / "new.txt").exists()


GLOB_RACES = 6000
"""glob_search's window is a listing between two checks: main listed the outside name in
about one call in a thousand."""


async def test_glob_search_never_lists_outside_while_a_process_swaps_a_directory(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "d.real").mkdir(parents=True)
    (workspace / "d.real" / "inside.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{SECRET}.txt").write_text(SECRET)
    ctx, _ = make_context(workspace)
    listed: set[str] = set()
    with trio.fail_after(120), swapping_directory(workspace, outside, max_secs=120):
        for _ in range(GLOB_RACES):
            output = await GlobSearchTool().run({"pattern": "d/*"}, ctx)
            listed.update(output.text.splitlines())
    assert not [name for name in listed if SECRET in name]
    assert "d/inside.txt" in listed  # the race was real: d was listed as a directory
