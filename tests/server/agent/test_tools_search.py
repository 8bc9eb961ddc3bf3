"""glob_search and content_search: results, caps and the jail."""

from __future__ import annotations

import fnmatch
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.tools import search
from acp_server.agent.tools._matching import glob_to_regex
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.files import FileReadTool
from acp_server.agent.tools.search import ContentSearchTool, GlobSearchTool
from acp_server.config import RiskProfileConfig
from tests.helpers import poll_until
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


async def test_a_catastrophic_regex_costs_one_pass_over_each_line(workspace: Path) -> None:
    (workspace / "long.txt").write_text(("a" * 4000 + "\n") * 50)
    ctx, _ = make_context(workspace)
    # A backtracking engine would not finish this search in any useful time; RE2 is linear.
    with trio.fail_after(60):
        result = await ContentSearchTool().run({"pattern": "(.*.*)*ZZZ"}, ctx)
    assert result.text == "No matches for '(.*.*)*ZZZ'"


async def test_patterns_needing_backtracking_are_refused_with_the_reason(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    for pattern in ("needle(?= docs)", r"(n)eed\1"):
        with pytest.raises(ToolError, match=r"Invalid regular expression .*RE2 syntax"):
            await ContentSearchTool().run({"pattern": pattern}, ctx)


async def test_repeated_recursive_globs_stay_bounded(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    (deep / "/".join(["d"] * 30)).mkdir(parents=True)
    ctx, _ = make_context(deep)
    # Without the walk's bound these patterns would expand exponentially and not finish.
    with trio.fail_after(60):
        result = await GlobSearchTool().run({"pattern": "/".join(["**"] * 8) + "/zz"}, ctx)
        spread = await GlobSearchTool().run({"pattern": "**/d/**/d/**/d/**/d/**/zz"}, ctx)
    assert result.text == "No files match " + "/".join(["**"] * 8) + "/zz"
    assert spread.text.startswith("No files match")
    assert "[search stopped after" in spread.text


async def test_non_utf8_file_names_are_shown_escaped(workspace: Path) -> None:
    (workspace / "src" / os.fsdecode(b"caf\xe9.py")).write_bytes(b"needle = 'latin-1 name'\n")
    ctx, _ = make_context(workspace)
    listed = await GlobSearchTool().run({"pattern": "src/*.py"}, ctx)
    assert listed.text.splitlines() == ["src/app.py", "src/caf\\xe9.py"]
    found = await ContentSearchTool().run({"pattern": "latin-1", "include": "caf?.py"}, ctx)
    assert found.text == "src/caf\\xe9.py:1: needle = 'latin-1 name'"
    everything = await ContentSearchTool().run({"pattern": "needle"}, ctx)
    everything.text.encode("utf-8")  # the turn can send it


_GLOB_CHARS = st.text(alphabet="ab*?[]!-.", max_size=7)
_NAME_CHARS = st.text(alphabet="ab[]!-.", max_size=6)


@given(pattern=_GLOB_CHARS, name=_NAME_CHARS)
def test_glob_translation_agrees_with_fnmatch(pattern: str, name: str) -> None:
    import re2  # type: ignore[import-untyped]

    translated = re2.compile(glob_to_regex(pattern))
    assert (translated.search(name) is not None) == fnmatch.fnmatchcase(name, pattern)


class _WalkProbe:
    """Counts glob walks running in worker threads, and slows each directory listing down
    (a slow disk) so that a walk outlives its call's cancellation."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def wrap(self, walk: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            with self._lock:
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                return walk(*args)
            finally:
                with self._lock:
                    self.running -= 1

        return counted


async def test_cancelled_globs_stop_walking_and_file_tools_keep_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "tree"
    for index in range(400):
        (root / f"dir{index}" / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("still readable\n")
    probe = _WalkProbe()
    monkeypatch.setattr(search, "_glob", probe.wrap(search._glob))
    real_scandir = os.scandir

    def slow_scandir(path: Any) -> Any:
        time.sleep(0.01)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", slow_scandir)
    ctx, _ = make_context(root)
    scopes: list[trio.CancelScope] = []

    async def cancelled_glob() -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            await GlobSearchTool().run({"pattern": "**/nothing-here"}, ctx)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(60):
                nursery.start_soon(cancelled_glob)
            await poll_until(lambda: len(scopes) == 60 and probe.running > 0)
            for scope in scopes:
                scope.cancel()
        read = await FileReadTool().run({"path": "notes.txt"}, ctx)
        assert "still readable" in read.text
        await poll_until(lambda: probe.running == 0, within=5.0)
    assert probe.peak <= search.MAX_SEARCHES_PER_SESSION


@pytest.mark.parametrize(
    "pattern",
    ["*", "**", "**/*", "**/*.py", "src/**", "src/**/*.py", "s?c/[a-p]*", "[!s]*", "**/pkg/*"],
)
async def test_glob_selects_what_pathlib_selects_in_a_plain_tree(
    tmp_path: Path, pattern: str
) -> None:
    root = tmp_path / "plain"
    for relative in ("src/app.py", "src/pkg/util.py", "src/pkg/deep/more.py", "docs/a.md", "x.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("x\n")
    expected = sorted(
        (match.relative_to(root).as_posix() or ".") + ("/" if match.is_dir() else "")
        for match in root.glob(pattern)
    )
    ctx, _ = make_context(root)
    result = await GlobSearchTool().run({"pattern": pattern}, ctx)
    assert result.text.splitlines() == expected
