"""glob_search and content_search: find files and text inside the session jail.

Both walk the workspace in a worker thread that checks a stop flag at every directory
entry, file and batch of lines: a cancelled turn sets it, so the thread ends at once
instead of walking on. Each session runs at most ``MAX_SEARCHES_PER_SESSION`` such
threads at a time (an abandoned one holds its slot until it has really ended). Patterns
are matched in linear time (``_matching``: RE2), and every walk stops after a bounded
number of entries, saying so.
Both walks reach each directory from the jail root following no link, holding one
descriptor per level (acp_server/security/beneath.py), and open each file relative to its
directory's descriptor, so what they list and read is where the jail checked it: a
directory swapped for a link mid-walk is not entered. Symbolic links are never descended
into; a linked file is searched only when its target passes the policy. Walks stop
``MAX_WALK_DEPTH`` levels down. Results are capped and say so when they are. File names that are not
UTF-8 are shown with the bad bytes escaped (``\\xff``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Final, TypeVar

import msgspec
import trio
from msgspec import Meta

from acp_server.agent.tools._matching import GlobPattern, LinePattern, has_wildcards
from acp_server.agent.tools._text import shown_name
from acp_server.agent.tools._titles import target_title
from acp_server.agent.tools.arguments import SchemaOf, ToolArguments, parse_arguments
from acp_server.agent.tools.base import (
    DEFAULT_MAX_TOOL_OUTPUT_BYTES,
    MAX_CARD_LOCATIONS,
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    absolute_name,
)
from acp_server.agent.tools.files import BINARY_SNIFF_BYTES, looks_binary, relative_path, resolve
from acp_server.model import FileLocation
from acp_server.security import (
    PathArgument,
    PolicyViolation,
    SecurityPolicy,
    ToolRules,
    expand_braces,
)
from acp_server.security.beneath import (
    DIRECTORY_FLAGS,
    MAX_WALK_DEPTH,
    READ_FLAGS,
    lstat_beneath,
    open_beneath,
    open_child_directory,
)

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


class _Directory(msgspec.Struct, frozen=True):
    """A directory a walk holds open: its descriptor, its real path (reached from the jail
    root following no link, so its name is where it is) and its depth below the start."""

    fd: int
    path: Path
    depth: int = 0


def _open_subdirectory(
    policy: SecurityPolicy, directory: _Directory, name: str
) -> _Directory | None:
    """``name`` in ``directory`` opened when a walk may descend into it: a real directory
    (never a link), not forbidden, not deeper than ``MAX_WALK_DEPTH``; the caller closes it."""
    path = directory.path / name
    if directory.depth >= MAX_WALK_DEPTH or not policy.jail.allows_walked(path):
        return None
    try:
        fd = open_child_directory(directory.fd, name)
    except OSError:
        return None  # a link, a file, or gone: nothing to descend into
    return _Directory(fd, path, directory.depth + 1)


def _entry_mode(directory: _Directory, name: str) -> int | None:
    """``lstat`` mode of ``name`` in ``directory``; None when there is no such entry."""
    try:
        return os.stat(name, dir_fd=directory.fd, follow_symlinks=False).st_mode
    except OSError:
        return None


class _GlobWalk(msgspec.Struct):
    """One glob_search walk: its budget of directory entries and its stop flag."""

    policy: SecurityPolicy
    stop: threading.Event
    named: frozenset[str]
    entries_left: int = DEFAULT_MAX_GLOB_ENTRIES
    exhausted: bool = False
    # Patterns with several "**" list the same directories again: each is read once.
    _listings: dict[Path, list[str]] = msgspec.field(default_factory=dict)

    def visit(self) -> bool:
        """Count one entry looked at; False once the budget is spent."""
        if self.stop.is_set():
            raise SearchStopped
        if self.entries_left <= 0:
            self.exhausted = True
            return False
        self.entries_left -= 1
        return True

    def subdirectory(self, directory: _Directory, name: str) -> _Directory | None:
        """``name`` opened to descend into: a real directory, neither skipped nor forbidden."""
        if name in SKIPPED_DIRECTORIES and name not in self.named:
            return None
        return _open_subdirectory(self.policy, directory, name)

    def children(self, directory: _Directory) -> list[str]:
        names = self._listings.get(directory.path)
        if names is None:
            try:
                with os.scandir(directory.fd) as listing:
                    names = sorted(entry.name for entry in listing)
            except OSError:
                names = []
            self._listings[directory.path] = names
        return names

    def subdirectories(self, directory: _Directory) -> Iterator[_Directory]:
        """``directory`` and every directory below it, depth first, within the budget."""
        yield directory
        for name in self.children(directory):
            if not self.visit():
                return
            child = self.subdirectory(directory, name)
            if child is not None:
                try:
                    yield from self.subdirectories(child)
                finally:
                    os.close(child.fd)

    def match(self, directory: _Directory, name: str) -> tuple[Path, bool] | None:
        """``(path, is a directory)`` of an entry the pattern picked, when the jail lets it
        be listed: a link only when its target passes (as file_read would read it)."""
        path = directory.path / name
        mode = _entry_mode(directory, name)
        if mode is None:
            return None
        if not stat.S_ISLNK(mode):
            return (path, stat.S_ISDIR(mode)) if self.policy.jail.allows_walked(path) else None
        try:
            target = self.policy.resolve_path(str(path))
            return path, stat.S_ISDIR(lstat_beneath(self.policy.jail.roots, target).st_mode)
        except PolicyViolation:
            return None
        except OSError:
            return path, False  # a dangling link inside the jail


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


def _select(
    walk: _GlobWalk, directory: _Directory, selectors: Sequence[_Selector]
) -> Generator[tuple[Path, bool], None, None]:
    """``(path, is a directory)`` of what ``selectors`` pick under ``directory``
    (``pathlib`` glob semantics: ``**`` is zero or more directories; a pattern ending in
    ``**`` picks directories), each as the jail lets it be listed."""
    selector, rest = selectors[0], selectors[1:]
    if selector == _RECURSIVE:
        for below in walk.subdirectories(directory):
            if rest:
                yield from _select(walk, below, rest)
            else:
                yield below.path, True
        return
    if isinstance(selector, str):
        names = [selector] if _entry_mode(directory, selector) is not None else []
    else:
        names = [name for name in walk.children(directory) if selector.matches(name)]
    for name in names:
        if not walk.visit():
            return
        if not rest:
            match = walk.match(directory, name)
            if match is not None:
                yield match
            continue
        child = walk.subdirectory(directory, name)
        if child is not None:
            try:
                yield from _select(walk, child, rest)
            finally:
                os.close(child.fd)


def _glob(
    policy: SecurityPolicy, patterns: list[str], limit: int, stop: threading.Event
) -> tuple[list[str], str | None]:
    found: set[str] = set()
    selected = [_selectors(pattern) for pattern in patterns]
    try:
        top = open_beneath(policy.jail.roots, policy.workspace, DIRECTORY_FLAGS)
    except OSError as exc:
        raise ToolError(f"Cannot list the workspace: {exc.strerror or exc}") from None
    try:
        for pattern, selectors in zip(patterns, selected, strict=True):
            if not selectors:
                raise RefusedCall(f"Invalid glob pattern {pattern!r}: it selects nothing")
            walk = _GlobWalk(policy, stop, frozenset(PurePosixPath(pattern).parts))
            selecting = _select(walk, _Directory(top, policy.workspace), selectors)
            with contextlib.closing(selecting):  # the walk's descriptors close on return
                for match, is_directory in selecting:
                    if len(found) >= limit:
                        return sorted(found), f"first {limit} matches shown; narrow the pattern"
                    relative = shown_name(match.relative_to(policy.workspace).as_posix())
                    found.add(f"{relative}/" if is_directory else relative)
            if walk.exhausted:
                note = (
                    f"search stopped after {DEFAULT_MAX_GLOB_ENTRIES} entries; narrow the pattern"
                )
                return sorted(found), note
    finally:
        os.close(top)
    return sorted(found), None


class GlobSearchArguments(ToolArguments):
    pattern: Annotated[
        str, Meta(min_length=1, description="Glob pattern relative to the workspace.")
    ]


class GlobSearchTool:
    definition: Final = ToolDefinition(
        name="glob_search",
        kind="other",
        title=target_title("Find", "pattern"),
        arguments=GlobSearchArguments,
    )
    name = definition.name
    description = (
        "Find files in the workspace by glob pattern, e.g. '**/*.py' or 'src/*.{ts,tsx}'. "
        "Patterns are relative to the workspace; directories are listed with a trailing '/'."
    )
    side_effects = False
    parameters = SchemaOf(GlobSearchArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        pattern = parse_arguments(GlobSearchArguments, arguments).pattern
        if "\x00" in pattern:
            raise RefusedCall("Pattern contains a NUL byte")
        pure = PurePosixPath(pattern)
        if pure.is_absolute() or pattern.startswith("~") or ".." in pure.parts:
            raise RefusedCall(
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


class _FileEntry(msgspec.Struct, frozen=True):
    """A file a content search came across: in ``directory_fd`` as ``name`` (None: the
    searched path itself is this file), and whether the entry is a symbolic link."""

    path: Path
    directory_fd: int | None
    name: str
    is_link: bool


def _walk_files(
    policy: SecurityPolicy, root: Path, stop: threading.Event
) -> Generator[_FileEntry, None, None]:
    """Every file under ``root`` (or ``root`` itself), directories reached as the jail
    reaches paths (acp_server/security/beneath.py), each entry yielded while its directory
    is open. Raises ``ToolError`` when ``root`` is not there."""
    try:
        top = open_beneath(policy.jail.roots, root, DIRECTORY_FLAGS)
    except NotADirectoryError:
        yield _FileEntry(root, None, root.name, is_link=False)
        return
    except FileNotFoundError:
        raise ToolError(f"Path not found: {relative_path(policy, root)}") from None
    except OSError as exc:
        raise ToolError(f"Cannot search {relative_path(policy, root)}: {exc.strerror}") from None
    try:
        yield from _walk_directory(policy, _Directory(top, root), stop)
    finally:
        os.close(top)


def _walk_directory(
    policy: SecurityPolicy, directory: _Directory, stop: threading.Event
) -> Iterator[_FileEntry]:
    """The files of ``directory`` (sorted), then those of each subdirectory in turn:
    skipped names, forbidden directories and links are not descended into."""
    if stop.is_set():
        raise SearchStopped
    try:
        with os.scandir(directory.fd) as listing:
            entries = sorted(
                (entry.name, entry.is_dir(follow_symlinks=False), entry.is_symlink())
                for entry in listing
            )
    except OSError:
        return  # unreadable or vanished: not an error for a search
    subdirectories: list[str] = []
    for name, is_directory, is_link in entries:
        if is_directory:
            subdirectories.append(name)
        else:
            yield _FileEntry(directory.path / name, directory.fd, name, is_link)
    for name in subdirectories:
        if name in SKIPPED_DIRECTORIES:
            continue
        child = _open_subdirectory(policy, directory, name)
        if child is not None:
            try:
                yield from _walk_directory(policy, child, stop)
            finally:
                os.close(child.fd)


def _open_found(policy: SecurityPolicy, entry: _FileEntry) -> int | None:
    """A descriptor of the file ``entry`` names, opened following no link on the way; a
    link's target only when it passes the jail. None: not to be searched."""
    try:
        if entry.is_link:
            target = policy.resolve_path(str(entry.path))
            return open_beneath(policy.jail.roots, target)
        if not policy.jail.allows_walked(entry.path):
            return None
        if entry.directory_fd is None:
            return open_beneath(policy.jail.roots, entry.path)
        return os.open(entry.name, READ_FLAGS, dir_fd=entry.directory_fd)
    except (PolicyViolation, OSError):
        return None


def _searchable_text(policy: SecurityPolicy, entry: _FileEntry) -> str | None:
    """The text of a found file, decided on its open descriptor: None for anything but a
    regular file of at most ``DEFAULT_MAX_SEARCH_FILE_BYTES`` that does not look binary."""
    fd = _open_found(policy, entry)
    if fd is None:
        return None
    with open(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > DEFAULT_MAX_SEARCH_FILE_BYTES:
                return None
            data = handle.read(DEFAULT_MAX_SEARCH_FILE_BYTES + 1)
        except OSError:
            return None
    if looks_binary(data[:BINARY_SNIFF_BYTES]):
        return None
    return data.decode("utf-8", errors="replace")


def _matches_include(relative: str, includes: Sequence[GlobPattern]) -> bool:
    if not includes:
        return True
    name = relative.rsplit("/", 1)[-1]
    return any(include.matches(name) or include.matches(relative) for include in includes)


class _Query(msgspec.Struct, frozen=True):
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
    files = _walk_files(policy, query.root, stop)
    with contextlib.closing(files):  # the walk's descriptors close on an early return
        for scanned, entry in enumerate(files, start=1):
            if scanned > DEFAULT_MAX_SEARCH_FILES:
                note = (
                    f"search stopped after {DEFAULT_MAX_SEARCH_FILES} files; narrow path or include"
                )
                return results, note
            relative = relative_path(policy, entry.path)
            if not _matches_include(relative, query.includes):
                continue
            text = _searchable_text(policy, entry)
            if text is None:
                continue
            shown = shown_name(relative)
            for number, line in _matching_lines(query.pattern, text, stop):
                result = f"{shown}:{number}: {line}"
                size += len(result) + 1
                if len(results) >= query.limit or size > DEFAULT_MAX_TOOL_OUTPUT_BYTES:
                    return results, f"first {len(results)} matches shown; narrow the pattern"
                results.append(result)
                if len(found) < MAX_CARD_LOCATIONS:
                    found.append(FileLocation(absolute_name(entry.path), number))
    return results, None


def _matching_lines(
    pattern: LinePattern, text: str, stop: threading.Event
) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each line of ``text`` the pattern is found in, long
    lines cut to ``DEFAULT_MAX_MATCH_LINE_CHARS``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if number % _LINES_PER_STOP_CHECK == 0 and stop.is_set():
            raise SearchStopped
        if not pattern.found_in(line):
            continue
        if len(line) > DEFAULT_MAX_MATCH_LINE_CHARS:
            line = line[:DEFAULT_MAX_MATCH_LINE_CHARS] + " …"
        yield number, line


class ContentSearchArguments(ToolArguments):
    pattern: Annotated[str, Meta(min_length=1, description="Regular expression to search for.")]
    path: (
        Annotated[str, Meta(description="File or directory to search (default: workspace).")] | None
    ) = None
    include: (
        Annotated[
            str, Meta(description="Only files matching this glob, e.g. '*.py' or '*.{ts,tsx}'.")
        ]
        | None
    ) = None
    case_sensitive: Annotated[bool, Meta(description="Default true.")] | None = None
    max_results: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_SEARCH_RESULTS_LIMIT,
                description=f"Default {DEFAULT_MAX_SEARCH_RESULTS}.",
            ),
        ]
        | None
    ) = None


class ContentSearchTool:
    definition: Final = ToolDefinition(
        name="content_search",
        kind="other",
        rules=ToolRules(path_argument=PathArgument()),
        title=target_title("Search", "pattern"),
        arguments=ContentSearchArguments,
    )
    name = definition.name
    description = (
        "Search file contents in the workspace with a regular expression (RE2 syntax: like "
        "Python's, without lookaround or backreferences). "
        "Returns 'path:line: text' for each matching line. Binary and very large files are "
        "skipped, as are .git and node_modules unless searched explicitly."
    )
    side_effects = False
    parameters = SchemaOf(ContentSearchArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(ContentSearchArguments, arguments)
        pattern, include = given.pattern, given.include
        limit = given.max_results or DEFAULT_MAX_SEARCH_RESULTS
        line_pattern = LinePattern(pattern, case_sensitive=given.case_sensitive is not False)
        root = resolve(ctx, given.path or ".")
        includes = [GlobPattern(each) for each in expand_braces(include)] if include else []
        query = _Query(ctx.policy, root, line_pattern, includes, limit)
        found: list[FileLocation] = []
        results, note = await run_stoppable(ctx, lambda stop: _search(query, stop, found))
        text = "\n".join(results) if results else f"No matches for {pattern!r}"
        if note:
            text += f"\n[{note}]"
        return ToolOutput(text, locations=tuple(found))
