"""glob_search and content_search: find files and text inside the session jail.

Both walk the workspace in a worker thread. content_search checks for cancellation file
by file (``trio.from_thread.check_cancelled``); glob_search's walk happens inside
``Path.glob``, which yields only matches, so a cancelled turn abandons that thread (it only
reads) instead of waiting for a match-less walk of a big tree to end.
Symbolic links are never descended into; a linked file is searched only when its target
passes the policy. Results are capped and say so when they are.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Final

import trio

from acp_server.agent.tools._args import optional_bool, optional_int, optional_str, required_str
from acp_server.agent.tools.base import (
    DEFAULT_MAX_TOOL_OUTPUT_BYTES,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.agent.tools.files import BINARY_SNIFF_BYTES, display_path, looks_binary, resolve
from acp_server.security import PathArgument, SecurityPolicy, ToolRules, expand_braces

DEFAULT_MAX_GLOB_RESULTS: Final = 500
DEFAULT_MAX_SEARCH_RESULTS: Final = 100
MAX_SEARCH_RESULTS_LIMIT: Final = 1000
DEFAULT_MAX_SEARCH_FILE_BYTES: Final = 4 * 1024 * 1024
"""Files larger than this are skipped by content_search (logs, bundles, data dumps)."""
DEFAULT_MAX_SEARCH_FILES: Final = 50_000
"""content_search stops after scanning this many files and says so."""
DEFAULT_MAX_MATCH_LINE_CHARS: Final = 300
# Directories nobody means when searching a project; named explicitly they are searched.
SKIPPED_DIRECTORIES: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache",
     ".ruff_cache"}
)  # fmt: skip
_CANCEL_CHECK_EVERY: Final = 256


def _skipped(relative: PurePosixPath, pattern: str) -> bool:
    named = set(PurePosixPath(pattern).parts)
    return any(part in SKIPPED_DIRECTORIES and part not in named for part in relative.parts[:-1])


def _glob(policy: SecurityPolicy, patterns: list[str], limit: int) -> tuple[list[str], bool]:
    found: set[str] = set()
    truncated = False
    for pattern in patterns:
        for match in policy.workspace.glob(pattern):
            relative = PurePosixPath(match.relative_to(policy.workspace).as_posix())
            if _skipped(relative, pattern) or not policy.is_allowed_path(match):
                continue
            if len(found) >= limit:
                truncated = True
                break
            found.add(f"{relative}/" if match.is_dir() else str(relative))
        if truncated:
            break
    return sorted(found), truncated


class GlobSearchTool:
    definition: Final = ToolDefinition(name="glob_search", kind="other")
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
        try:
            matches, truncated = await trio.to_thread.run_sync(
                _glob,
                ctx.policy,
                expand_braces(pattern),
                DEFAULT_MAX_GLOB_RESULTS,
                abandon_on_cancel=True,
            )
        except ValueError as exc:  # pathlib: "Unacceptable pattern"
            raise ToolError(f"Invalid glob pattern {pattern!r}: {exc}") from None
        if not matches:
            return ToolOutput(f"No files match {pattern}")
        text = "\n".join(matches)
        if truncated:
            text += f"\n[first {DEFAULT_MAX_GLOB_RESULTS} matches shown; narrow the pattern]"
        return ToolOutput(text)


def _walk_files(policy: SecurityPolicy, root: Path) -> Iterator[Path]:
    if not root.is_dir():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        # Prune in place: skipped names, and forbidden directories inside the workspace.
        dirnames[:] = sorted(
            name
            for name in dirnames
            if name not in SKIPPED_DIRECTORIES and policy.is_allowed_path(base / name)
        )
        for name in sorted(filenames):
            yield base / name


def _matches_include(relative: str, includes: list[str]) -> bool:
    if not includes:
        return True
    name = relative.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(name, inc) or fnmatch.fnmatchcase(relative, inc) for inc in includes
    )


def _search(
    policy: SecurityPolicy, root: Path, regex: re.Pattern[str], includes: list[str], limit: int
) -> tuple[list[str], str | None]:
    results: list[str] = []
    size = 0
    scanned = 0
    for path in _walk_files(policy, root):
        scanned += 1
        if scanned % _CANCEL_CHECK_EVERY == 0:
            trio.from_thread.check_cancelled()
        if scanned > DEFAULT_MAX_SEARCH_FILES:
            return (
                results,
                f"search stopped after {DEFAULT_MAX_SEARCH_FILES} files; narrow path or include",
            )
        shown = display_path(policy, path)
        if not _matches_include(shown, includes):
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
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line) is None:
                continue
            if len(line) > DEFAULT_MAX_MATCH_LINE_CHARS:
                line = line[:DEFAULT_MAX_MATCH_LINE_CHARS] + " …"
            entry = f"{shown}:{number}: {line}"
            size += len(entry) + 1
            if len(results) >= limit or size > DEFAULT_MAX_TOOL_OUTPUT_BYTES:
                return results, f"first {len(results)} matches shown; narrow the pattern"
            results.append(entry)
    return results, None


class ContentSearchTool:
    definition: Final = ToolDefinition(
        name="content_search", kind="other", rules=ToolRules(path_argument=PathArgument())
    )
    name = definition.name
    description = (
        "Search file contents in the workspace with a regular expression (Python syntax). "
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
        try:
            regex = re.compile(pattern, 0 if case_sensitive in (None, True) else re.IGNORECASE)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}") from None
        root = resolve(ctx, raw_path)
        if not root.exists():
            raise ToolError(f"Path not found: {raw_path}")
        includes = expand_braces(include) if include else []
        results, note = await trio.to_thread.run_sync(
            _search, ctx.policy, root, regex, includes, limit
        )
        if not results:
            return ToolOutput(f"No matches for {pattern!r}")
        text = "\n".join(results)
        if note:
            text += f"\n[{note}]"
        return ToolOutput(text)
