"""glob_search and content_search: find files and text inside the session jail.

Both walk the workspace in a worker thread that checks a stop flag at every directory
entry, file and batch of lines: a cancelled turn sets it, so the thread ends at once
instead of walking on. Each session runs at most ``MAX_SEARCHES_PER_SESSION`` such
threads at a time (an abandoned one holds its slot until it has really ended). Patterns
are matched in linear time (``_matching``: RE2), and every walk stops after a bounded
number of entries, saying so.
Symbolic links are never descended into; a linked file is searched only when its target
passes the policy. Results are capped and say so when they are. File names that are not
UTF-8 are shown with the bad bytes escaped (``\\xff``).
"""

from __future__ import annotations

import os
import stat
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final, TypeVar

import trio

from acp_server.agent.conversation import FileLocation
from acp_server.agent.tools._args import optional_bool, optional_int, optional_str, required_str
from acp_server.agent.tools._matching import GlobPattern, LinePattern, has_wildcards
from acp_server.agent.tools._text import shown_name
from acp_server.agent.tools._titles import target_title
from acp_server.agent.tools.base import (
    DEFAULT_MAX_TOOL_OUTPUT_BYTES,
    MAX_CARD_LOCATIONS,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    absolute_name,
)
from acp_server.agent.tools.files import BINARY_SNIFF_BYTES, looks_binary, relative_path, resolve
from acp_server.security import PathArgument, SecurityPolicy, ToolRules, expand_braces

DEFAULT_MAX_GLOB_RESULTS: Final = 500
DEFAULT_MAX_GLOB_ENTRIES: Final = 100_000
"""glob_search stops after looking at this many directory entries and says so."""
DEFAULT_MAX_SEARCH_RESULTS: Final = 100
MAX_SEARCH_RESULTS_LIMIT: Final = 1000
DEFAULT_MAX_SEARCH_FILE_BYTES: Final = 4 * 1024 * 1024
"""Files larger than this are skipped by content_search (logs, bundles, data dumps)."""
DEFAULT_MAX_SEARCH_FILES: Final = 50_000
"""content_search stops after scanning this many files and says so."""
DEFAULT_MAX_MATCH_LINE_CHARS: Final = 300
MAX_SEARCHES_PER_SESSION: Final = 4
"""Search threads one session may have running at once; more calls wait for a slot."""
# Directories nobody means when searching a project; named explicitly they are searched.
SKIPPED_DIRECTORIES: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache",
     ".ruff_cache"}
)  # fmt: skip
_LINES_PER_STOP_CHECK: Final = 1024
_Result = TypeVar("_Result")


class SearchStopped(Exception):
    """Raised inside a search thread once its call was cancelled."""


# One slot pool per session, keyed by the session's policy (it lives as long as the session).
_SESSION_SLOTS: Final[weakref.WeakKeyDictionary[SecurityPolicy, trio.CapacityLimiter]] = (
    weakref.WeakKeyDictionary()
)


def _session_slots(policy: SecurityPolicy) -> trio.CapacityLimiter:
    slots = _SESSION_SLOTS.get(policy)
    if slots is None:
        slots = _SESSION_SLOTS[policy] = trio.CapacityLimiter(MAX_SEARCHES_PER_SESSION)
    return slots


async def run_stoppable(ctx: ToolContext, work: Callable[[threading.Event], _Result]) -> _Result:
    """Run ``work(stop)`` in a worker thread of the session's pool. On cancel the call
    returns at once and ``stop`` is set; ``work`` must check it often and return (or raise
    ``SearchStopped``). The thread holds its pool slot until it has ended."""
    stop = threading.Event()
    try:
        return await trio.to_thread.run_sync(
            work, stop, limiter=_session_slots(ctx.policy), abandon_on_cancel=True
        )
    finally:
        stop.set()


@dataclass(slots=True)
class _GlobWalk:
    """One glob_search walk: its budget of directory entries and its stop flag."""

    policy: SecurityPolicy
    stop: threading.Event
    named: frozenset[str]
    entries_left: int = DEFAULT_MAX_GLOB_ENTRIES
    exhausted: bool = False
    # Patterns with several "**" list the same directories again: each is read once.
    _listings: dict[Path, list[str]] = field(default_factory=dict)
    _descend: dict[Path, bool] = field(default_factory=dict)

    def visit(self) -> bool:
        """Count one entry looked at; False once the budget is spent."""
        if self.stop.is_set():
            raise SearchStopped
        if self.entries_left <= 0:
            self.exhausted = True
            return False
        self.entries_left -= 1
        return True

    def may_descend(self, path: Path, name: str) -> bool:
        """A real directory (not a link) that is neither skipped nor forbidden."""
        if name in SKIPPED_DIRECTORIES and name not in self.named:
            return False
        known = self._descend.get(path)
        if known is None:
            try:
                known = stat.S_ISDIR(os.lstat(path).st_mode) and self.policy.is_allowed_path(path)
            except OSError:
                known = False
            self._descend[path] = known
        return known

    def children(self, directory: Path) -> list[str]:
        names = self._listings.get(directory)
        if names is None:
            try:
                with os.scandir(directory) as listing:
                    names = sorted(entry.name for entry in listing)
            except OSError:
                names = []
            self._listings[directory] = names
        return names

    def subdirectories(self, directory: Path) -> Iterator[Path]:
        """``directory`` and every directory below it, depth first, within the budget."""
        yield directory
        for name in self.children(directory):
            if not self.visit():
                return
            child = directory / name
            if self.may_descend(child, name):
                yield from self.subdirectories(child)


_RECURSIVE: Final = "**"
_Selector = str | GlobPattern  # "**", a literal name, or a wildcard pattern


def _selectors(pattern: str) -> list[_Selector]:
    selectors: list[_Selector] = []
    for part in PurePosixPath(pattern).parts:
        if part == _RECURSIVE:
            if selectors and selectors[-1] == _RECURSIVE:
                continue  # "**/**" selects what "**" does
            selectors.append(part)
        else:
            selectors.append(GlobPattern(part) if has_wildcards(part) else part)
    return selectors


def _select(walk: _GlobWalk, directory: Path, selectors: Sequence[_Selector]) -> Iterator[Path]:
    """The paths under ``directory`` that ``selectors`` pick (``pathlib`` glob semantics:
    ``**`` is zero or more directories; a pattern ending in ``**`` picks directories)."""
    selector, rest = selectors[0], selectors[1:]
    if selector == _RECURSIVE:
        for below in walk.subdirectories(directory):
            yield from _select(walk, below, rest) if rest else (below,)
        return
    if isinstance(selector, str):
        names = [selector] if os.path.lexists(directory / selector) else []
    else:
        names = [name for name in walk.children(directory) if selector.matches(name)]
    for name in names:
        if not walk.visit():
            return
        path = directory / name
        if not rest:
            yield path
        elif walk.may_descend(path, name):
            yield from _select(walk, path, rest)


def _glob(
    policy: SecurityPolicy, patterns: list[str], limit: int, stop: threading.Event
) -> tuple[list[str], str | None]:
    found: set[str] = set()
    selected = [_selectors(pattern) for pattern in patterns]
    for pattern, selectors in zip(patterns, selected, strict=True):
        if not selectors:
            raise ToolError(f"Invalid glob pattern {pattern!r}: it selects nothing")
        walk = _GlobWalk(policy, stop, frozenset(PurePosixPath(pattern).parts))
        for match in _select(walk, policy.workspace, selectors):
            if not policy.is_allowed_path(match):
                continue
            if len(found) >= limit:
                return sorted(found), f"first {limit} matches shown; narrow the pattern"
            relative = shown_name(match.relative_to(policy.workspace).as_posix())
            found.add(f"{relative}/" if match.is_dir() else relative)
        if walk.exhausted:
            note = f"search stopped after {DEFAULT_MAX_GLOB_ENTRIES} entries; narrow the pattern"
            return sorted(found), note
    return sorted(found), None


class GlobSearchTool:
    definition: Final = ToolDefinition(
        name="glob_search", kind="other", title=target_title("Find", "pattern")
    )
    name = definition.name
    description = (
        "Find files in the workspace by glob pattern, e.g. '**/*.py' or 'src/*.{ts,tsx}'. "
        "Patterns are relative to the workspace; directories are listed with a trailing '/'."
    )
    side_effects = False

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Glob pattern relative to the workspace.",
                },
            },
            "required": ["pattern"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern = required_str(arguments, "pattern")
        if "\x00" in pattern:
            raise ToolError("Pattern contains a NUL byte")
        pure = PurePosixPath(pattern)
        if pure.is_absolute() or pattern.startswith("~") or ".." in pure.parts:
            raise ToolError(
                f"Pattern escapes workspace directory: {pattern} "
                "(glob_search patterns are relative to the workspace; no '..' or absolute paths)"
            )
        patterns = expand_braces(pattern)
        for expanded in patterns:
            _selectors(expanded)  # a bad pattern is refused before any thread starts
        matches, note = await run_stoppable(
            ctx, lambda stop: _glob(ctx.policy, patterns, DEFAULT_MAX_GLOB_RESULTS, stop)
        )
        text = "\n".join(matches) if matches else f"No files match {pattern}"
        if note:
            text += f"\n[{note}]"
        found = tuple(
            FileLocation(absolute_name(ctx.policy.workspace / match.rstrip("/")))
            for match in matches[:MAX_CARD_LOCATIONS]
        )
        return ToolOutput(text, locations=found)


def _walk_files(policy: SecurityPolicy, root: Path, stop: threading.Event) -> Iterator[Path]:
    if not root.is_dir():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if stop.is_set():
            raise SearchStopped
        base = Path(dirpath)
        # Prune in place: skipped names, and forbidden directories inside the workspace.
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in SKIPPED_DIRECTORIES and policy.is_allowed_path(base / name)
        )
        for name in sorted(filenames):
            yield base / name


def _matches_include(relative: str, includes: Sequence[GlobPattern]) -> bool:
    if not includes:
        return True
    name = relative.rsplit("/", 1)[-1]
    return any(include.matches(name) or include.matches(relative) for include in includes)


@dataclass(frozen=True, slots=True)
class _Query:
    policy: SecurityPolicy
    root: Path
    pattern: LinePattern
    includes: Sequence[GlobPattern]
    limit: int


def _search(
    query: _Query, stop: threading.Event, found: list[FileLocation]
) -> tuple[list[str], str | None]:
    """The matching lines as ``path:line: text`` and why the search stopped early (None
    when it did not); the first ``MAX_CARD_LOCATIONS`` matches go to ``found``."""
    policy = query.policy
    results: list[str] = []
    size = 0
    scanned = 0
    for path in _walk_files(policy, query.root, stop):
        scanned += 1
        if scanned > DEFAULT_MAX_SEARCH_FILES:
            return (
                results,
                f"search stopped after {DEFAULT_MAX_SEARCH_FILES} files; narrow path or include",
            )
        relative = relative_path(policy, path)
        if not _matches_include(relative, query.includes):
            continue
        try:
            if not policy.is_allowed_path(path):
                continue
            info = path.stat()
            if not path.is_file() or info.st_size > DEFAULT_MAX_SEARCH_FILE_BYTES:
                continue
            with open(path, "rb") as handle:
                data = handle.read(DEFAULT_MAX_SEARCH_FILE_BYTES + 1)
        except OSError:
            continue  # unreadable or vanished: not an error for a search
        if looks_binary(data[:BINARY_SNIFF_BYTES]):
            continue
        shown = shown_name(relative)
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if number % _LINES_PER_STOP_CHECK == 0 and stop.is_set():
                raise SearchStopped
            if not query.pattern.found_in(line):
                continue
            if len(line) > DEFAULT_MAX_MATCH_LINE_CHARS:
                line = line[:DEFAULT_MAX_MATCH_LINE_CHARS] + " …"
            entry = f"{shown}:{number}: {line}"
            size += len(entry) + 1
            if len(results) >= query.limit or size > DEFAULT_MAX_TOOL_OUTPUT_BYTES:
                return results, f"first {len(results)} matches shown; narrow the pattern"
            results.append(entry)
            if len(found) < MAX_CARD_LOCATIONS:
                found.append(FileLocation(absolute_name(path), number))
    return results, None


class ContentSearchTool:
    definition: Final = ToolDefinition(
        name="content_search",
        kind="other",
        rules=ToolRules(path_argument=PathArgument()),
        title=target_title("Search", "pattern"),
    )
    name = definition.name
    description = (
        "Search file contents in the workspace with a regular expression (RE2 syntax: like "
        "Python's, without lookaround or backreferences). "
        "Returns 'path:line: text' for each matching line. Binary and very large files are "
        "skipped, as are .git and node_modules unless searched explicitly."
    )
    side_effects = False

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression to search for."},
                "path": {"type": "string", "description": "File or directory to search (default: workspace)."},
                "include": {"type": "string", "description": "Only files matching this glob, e.g. '*.py' or '*.{ts,tsx}'."},
                "case_sensitive": {"type": "boolean", "description": "Default true."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS_LIMIT, "description": f"Default {DEFAULT_MAX_SEARCH_RESULTS}."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        }  # fmt: skip

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern = required_str(arguments, "pattern")
        raw_path = optional_str(arguments, "path") or "."
        include = optional_str(arguments, "include")
        case_sensitive = optional_bool(arguments, "case_sensitive")
        limit = (
            optional_int(arguments, "max_results", minimum=1, maximum=MAX_SEARCH_RESULTS_LIMIT)
            or DEFAULT_MAX_SEARCH_RESULTS
        )
        line_pattern = LinePattern(pattern, case_sensitive=case_sensitive in (None, True))
        root = resolve(ctx, raw_path)
        if not root.exists():
            raise ToolError(f"Path not found: {raw_path}")
        includes = [GlobPattern(each) for each in expand_braces(include)] if include else []
        query = _Query(ctx.policy, root, line_pattern, includes, limit)
        found: list[FileLocation] = []
        results, note = await run_stoppable(ctx, lambda stop: _search(query, stop, found))
        text = "\n".join(results) if results else f"No matches for {pattern!r}"
        if note:
            text += f"\n[{note}]"
        return ToolOutput(text, locations=tuple(found))
