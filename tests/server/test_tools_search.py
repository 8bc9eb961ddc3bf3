"""glob_search and content_search: results, caps and the jail."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.search import ContentSearchTool, GlobSearchTool
from acp_server.config import RiskProfileConfig
from tests.server.tool_context import make_context


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\nTOKEN = 'needle'\n")
    (root / "src" / "pkg" / "util.py").write_text("def Needle():\n    return 1\n")
    (root / "src" / "view.ts").write_text("const needle = 1;\n")
    (root / "README.md").write_text("# needle docs\n")
    (root / ".git").mkdir()
    (root / ".git" / "config.py").write_text("needle = 'git internals'\n")
    (root / "image.bin").write_bytes(b"needle\x00\x01binary")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("needle = 'outside'\n")
    (root / "linked_dir").symlink_to(outside)
    (root / "linked.py").symlink_to(outside / "leak.py")
    return root


async def test_glob_lists_matches_relative_and_sorted(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    result = await GlobSearchTool().run({"pattern": "**/*.py"}, ctx)
    assert result.text.splitlines() == ["src/app.py", "src/pkg/util.py"]
    braces = await GlobSearchTool().run({"pattern": "src/*.{py,ts}"}, ctx)
    assert braces.text.splitlines() == ["src/app.py", "src/view.ts"]
    dirs = await GlobSearchTool().run({"pattern": "src/*"}, ctx)
    assert "src/pkg/" in dirs.text.splitlines()


async def test_glob_never_lists_outside_the_jail(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    through_link = await GlobSearchTool().run({"pattern": "linked*/*"}, ctx)
    assert "leak.py" not in through_link.text
    top = await GlobSearchTool().run({"pattern": "*.py"}, ctx)
    assert top.text == "No files match *.py"  # linked.py points outside
    for pattern in ("../*", "/etc/*", "src/../../*"):
        with pytest.raises(ToolError, match="Pattern escapes workspace directory"):
            await GlobSearchTool().run({"pattern": pattern}, ctx)


async def test_glob_skips_vcs_directories_unless_named(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    everything = await GlobSearchTool().run({"pattern": "**/config.py"}, ctx)
    assert everything.text == "No files match **/config.py"
    named = await GlobSearchTool().run({"pattern": ".git/*.py"}, ctx)
    assert named.text == ".git/config.py"


async def test_content_search_finds_lines_and_skips_binary_vcs_and_outside(
    workspace: Path,
) -> None:
    ctx, _ = make_context(workspace)
    result = await ContentSearchTool().run({"pattern": "needle"}, ctx)
    assert result.text.splitlines() == [
        "README.md:1: # needle docs",
        "src/app.py:2: TOKEN = 'needle'",
        "src/view.ts:1: const needle = 1;",
    ]


async def test_content_search_options(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    insensitive = await ContentSearchTool().run(
        {"pattern": "needle", "case_sensitive": False, "include": "*.py"}, ctx
    )
    assert insensitive.text.splitlines() == [
        "src/app.py:2: TOKEN = 'needle'",
        "src/pkg/util.py:1: def Needle():",
    ]
    scoped = await ContentSearchTool().run({"pattern": r"return \d", "path": "src/pkg"}, ctx)
    assert scoped.text == "src/pkg/util.py:2:     return 1"
    capped = await ContentSearchTool().run({"pattern": "needle", "max_results": 1}, ctx)
    assert capped.text.splitlines() == [
        "README.md:1: # needle docs",
        "[first 1 matches shown; narrow the pattern]",
    ]
    none = await ContentSearchTool().run({"pattern": "haystack"}, ctx)
    assert none.text == "No matches for 'haystack'"


async def test_content_search_errors(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match="Invalid regular expression"):
        await ContentSearchTool().run({"pattern": "("}, ctx)
    with pytest.raises(ToolError, match="Path escapes workspace directory"):
        await ContentSearchTool().run({"pattern": "x", "path": ".."}, ctx)
    with pytest.raises(ToolError, match="Path escapes workspace directory"):
        await ContentSearchTool().run({"pattern": "x", "path": "linked_dir"}, ctx)
    with pytest.raises(ToolError, match="'max_results'"):
        await ContentSearchTool().run({"pattern": "x", "max_results": 0}, ctx)


async def test_content_search_skips_forbidden_directories_inside_workspace(
    workspace: Path,
) -> None:
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.txt").write_text("needle-secret\n")
    profile = RiskProfileConfig(forbidden_paths=(str(workspace / "secrets"),))
    ctx, _ = make_context(workspace, profile)
    result = await ContentSearchTool().run({"pattern": "needle-secret"}, ctx)
    assert result.text == "No matches for 'needle-secret'"
    listed = await GlobSearchTool().run({"pattern": "secrets/*"}, ctx)
    assert listed.text == "No files match secrets/*"
