"""file_read, file_write and file_edit: text files inside the session jail.

Every path goes through ``SecurityPolicy.resolve_path`` and the tools act on the real
path it returns, reached from its jail root one directory at a time without following any
link (acp_server/security/beneath.py), reads and writes alike; writes then replace the
file atomically (``_replace``). A symlink swapped in after the check is never followed,
and a failed write loses nothing. Disk work runs in a worker thread.

When the ACP client offers ``fs/read_text_file`` / ``fs/write_text_file`` (``ClientSide``,
``[acp] client_fs``), the text is read and written through the client instead, so the
agent sees unsaved buffers and the editor records the edit; the path is the one the
policy resolved, after approval, exactly as for the disk.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Final

import trio
from msgspec import Meta

from acp_core import schema
from acp_server.agent.tools._replace import replace_contents, write_error
from acp_server.agent.tools._text import encodable, shown_name
from acp_server.agent.tools._titles import target_title
from acp_server.agent.tools.arguments import SchemaOf, ToolArguments, parse_arguments
from acp_server.agent.tools.base import (
    DEFAULT_MAX_TOOL_OUTPUT_BYTES,
    ClientSide,
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
    ToolPresentation,
    located_argument,
)
from acp_server.model import CallView, FileDiff, FileLocation
from acp_server.security import PathArgument, PolicyViolation, SecurityPolicy, ToolRules
from acp_server.security.beneath import READ_FLAGS, open_beneath, opened_directory

DEFAULT_READ_LIMIT_LINES: Final = 2000
"""Lines file_read returns when the model gives no ``limit``."""
DEFAULT_MAX_LINE_CHARS: Final = 2000
"""Longer lines are cut in file_read output (minified files would drown the context)."""
DEFAULT_MAX_WRITE_BYTES: Final = 10 * 1024 * 1024
"""Largest content file_write accepts and largest file file_edit rewrites."""
BINARY_SNIFF_BYTES: Final = 8192


def resolve(ctx: ToolContext, path: str, *, for_write: bool = False) -> Path:
    """``ctx.policy.resolve_path`` with the refusal turned into a tool error."""
    try:
        return ctx.policy.resolve_path(path, for_write=for_write)
    except PolicyViolation as violation:
        raise RefusedCall(str(violation)) from None


def relative_path(policy: SecurityPolicy, path: Path) -> str:
    """Workspace-relative when inside the workspace, absolute otherwise."""
    try:
        relative = path.relative_to(policy.workspace)
    except ValueError:
        return str(path)
    return relative.as_posix() or "."


def display_path(policy: SecurityPolicy, path: Path) -> str:
    """``relative_path`` as text the client can be sent (non-UTF-8 bytes escaped)."""
    return shown_name(relative_path(policy, path))


def looks_binary(sample: bytes) -> bool:
    return b"\x00" in sample


def open_regular_file(policy: SecurityPolicy, path: Path, shown: str) -> int:
    """Open ``path`` (a real path the jail resolved) for reading, reached from its jail
    root without following any link (acp_server/security/beneath.py): the file the jail
    checked, or a ``ToolError``. Never blocks on a FIFO; anything but a regular file is
    refused on the open descriptor."""
    try:
        fd = open_beneath(policy.jail.roots, path)
    except OSError as exc:
        raise _open_error(exc, shown) from None
    return _regular(fd, shown)


def open_regular_at(directory_fd: int, name: str, shown: str) -> int:
    """``open_regular_file`` for ``name`` in a directory already reached that way."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=directory_fd)
    except OSError as exc:
        raise _open_error(exc, shown) from None
    return _regular(fd, shown)


def _open_error(exc: OSError, shown: str) -> ToolError:
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"File not found: {shown}")
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"Not a regular file: {shown} is a directory")
    if exc.errno == errno.ELOOP:
        return ToolError(f"Refusing to follow a symbolic link: {shown}")
    return ToolError(f"Cannot open {shown}: {exc.strerror}")


def _regular(fd: int, shown: str) -> int:
    """``fd`` when it is a regular file; else it is closed and a ``ToolError`` says why."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ToolError(f"Not a regular file: {shown} is {kind}")
    return fd


def _bounded_lines(handle: BinaryIO, max_bytes: int) -> Iterator[bytes]:
    """Lines of at most ``max_bytes`` each: a huge single-line file (minified bundle, a
    log without newlines) is never held in memory whole; the rest of a long line is skipped."""
    while line := handle.readline(max_bytes):
        if len(line) == max_bytes and not line.endswith(b"\n"):
            while (rest := handle.readline(max_bytes)) and not rest.endswith(b"\n"):
                pass
        yield line


def _read_lines(policy: SecurityPolicy, path: Path, shown: str, offset: int, limit: int) -> str:
    fd = open_regular_file(policy, path, shown)
    with open(fd, "rb") as handle:
        return numbered_lines(handle, shown, offset, limit)


def numbered_lines(handle: BinaryIO, shown: str, offset: int, limit: int) -> str:
    """file_read's output: lines ``offset`` … of ``handle``, numbered, bounded."""
    if looks_binary(handle.read(BINARY_SNIFF_BYTES)):
        raise ToolError(
            f"{shown} looks like a binary file; use deliver_file to hand it to the user"
        )
    handle.seek(0)
    out: list[str] = []
    size = 0
    line_number = 0
    more = False
    for raw in _bounded_lines(handle, DEFAULT_MAX_LINE_CHARS * 4):
        line_number += 1
        if line_number < offset:
            continue
        if len(out) >= limit:
            more = True
            break
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if len(line) > DEFAULT_MAX_LINE_CHARS:
            line = line[:DEFAULT_MAX_LINE_CHARS] + " …[line truncated]"
        rendered = f"{line_number:>6}\t{line}"
        size += len(rendered) + 1
        if size > DEFAULT_MAX_TOOL_OUTPUT_BYTES and out:
            more = True
            break
        out.append(rendered)
    if not out:
        if line_number == 0:
            return f"({shown} is empty)"
        raise ToolError(f"offset {offset} is past the end of {shown} ({line_number} lines)")
    first = offset
    last = offset + len(out) - 1
    if more:
        out.append(f"[showing lines {first}-{last}; more follow: read on with offset={last + 1}]")
    return "\n".join(out)


class FileEditPresentation(ToolPresentation):
    """file_edit / file_write calls in ACP diff terms: a ``diff`` content block with the
    file's absolute path, and an ``edit`` approval prompt offering the new text for
    ``reject-with-edit`` (unpaired surrogates escaped). ``rawInput`` is the arguments as
    given.

    ``view`` reads the file as it is before the call: file_write's diff carries its old
    text (``oldText`` null for a new file); file_edit's diff is the whole file before and
    after when it is at most ``MAX_WHOLE_FILE_DIFF_BYTES``, else the changed lines with
    ``DIFF_CONTEXT_LINES`` around them, and a file_edit that cannot apply (old_string
    not found once, no such file, not text) is refused there, before any approval.

    Args:
        old_key: the argument holding the replaced text (None: the whole file is new).
        new_key: the argument holding the new text.
    """

    approval_kind = "edit"
    reads_files = True

    def __init__(self, *, old_key: str | None, new_key: str) -> None:
        super().__init__()
        self.old_key = old_key
        self.new_key = new_key

    def diff(self, arguments: Mapping[str, Any]) -> list[schema.ToolCallContent] | None:
        """The diff from the arguments alone (replay of calls stored without a view)."""
        arguments = encodable(arguments)
        path, new = arguments.get("path"), arguments.get(self.new_key)
        if not isinstance(path, str) or not isinstance(new, str):
            return None
        if self.old_key is None:
            return [schema.ToolCallDiff(path=path, new_text=new)]
        old = arguments.get(self.old_key)
        if not isinstance(old, str):
            return None
        return [schema.ToolCallDiff(path=path, old_text=old, new_text=new)]

    def proposed_edit(self, arguments: Mapping[str, Any]) -> str | None:
        value = encodable(arguments.get(self.new_key))
        return value if isinstance(value, str) else None

    def view(
        self, arguments: Mapping[str, Any], policy: SecurityPolicy, rules: ToolRules
    ) -> CallView:
        location = located_argument(arguments, policy, rules)
        new = arguments.get(self.new_key)
        if location is None or not isinstance(new, str):
            return CallView()
        path = Path(location.path)
        shown = display_path(policy, path)
        if self.old_key is None:
            before = _text_before_write(policy, path, shown)
            diff = FileDiff(location.path, before, encodable(new))
            return CallView(diffs=(diff,), locations=(location,))
        old = arguments.get(self.old_key)
        if not isinstance(old, str) or not old or old == new:
            return CallView(locations=(location,))  # the tool says what is wrong
        try:
            text = _read_text_to_edit(policy, path, shown)
        except ToolError as exc:
            return CallView(locations=(location,), refusal=f"Error: {exc}")
        return _edit_view(location, shown, text, old, new)

    async def view_through_client(
        self,
        arguments: Mapping[str, Any],
        policy: SecurityPolicy,
        rules: ToolRules,
        client: ClientSide,
    ) -> CallView | None:
        """file_edit's view from the client's text (``fs/read_text_file``), which is what
        the edit itself will change: an unsaved buffer is checked and shown, not the disk.
        The jail has resolved the path first (a refused path reads nothing). file_write
        reads nothing to write, so its old text stays the disk's (None: ``view``)."""
        if self.old_key is None:
            return None
        location = located_argument(arguments, policy, rules)
        old, new = arguments.get(self.old_key), arguments.get(self.new_key)
        if location is None or not isinstance(new, str) or not isinstance(old, str):
            return None
        if not old or old == new:
            return None  # ``view`` reads nothing for these either
        path = Path(location.path)
        shown = display_path(policy, path)
        try:
            text = await client.read_text_file(path)
            if len(text.encode("utf-8")) > DEFAULT_MAX_WRITE_BYTES:
                raise ToolError(too_large_to_edit(shown))
        except ToolError as exc:
            return CallView(locations=(location,), refusal=f"Error: {exc}")
        return _edit_view(location, shown, text, old, new)


def _edit_view(location: FileLocation, shown: str, text: str, old: str, new: str) -> CallView:
    """file_edit's card for replacing ``old`` by ``new`` in ``text``: its diff and changed
    line, or the refusal when ``old`` does not occur exactly once."""
    try:
        start = locate_once(text, old, shown)
    except ToolError as exc:
        return CallView(locations=(location,), refusal=f"Error: {exc}")
    line = text.count("\n", 0, start) + 1
    before, after = _edit_context(text, start, old, new)
    diff = FileDiff(location.path, encodable(before), encodable(after))
    return CallView(diffs=(diff,), locations=(FileLocation(location.path, line),))


def too_large_to_edit(shown: str) -> str:
    return f"File too large to edit: {shown} (limit: {DEFAULT_MAX_WRITE_BYTES} bytes)"


MAX_WHOLE_FILE_DIFF_BYTES: Final = 128 * 1024
"""An edit's diff shows the whole file up to this size, else the changed lines in context."""
DIFF_CONTEXT_LINES: Final = 5
"""Unchanged lines shown before and after an edit in a file too large to show whole."""


def _text_before_write(policy: SecurityPolicy, path: Path, shown: str) -> str | None:
    """What file_write replaces: None when there is no file yet; the file's text up to
    ``MAX_WHOLE_FILE_DIFF_BYTES``; for a larger or binary file a line saying what it was."""
    try:
        fd = open_beneath(policy.jail.roots, path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"({shown} cannot be read: {_open_error(exc, shown)})"
    try:
        fd = _regular(fd, shown)
    except ToolError:
        return f"({shown} is not a regular file)"
    with open(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(MAX_WHOLE_FILE_DIFF_BYTES + 1)
    if len(data) > MAX_WHOLE_FILE_DIFF_BYTES:
        return f"({shown}: {size} bytes before this write, too large to show)"
    if looks_binary(data[:BINARY_SNIFF_BYTES]):
        return f"({shown}: a binary file of {size} bytes before this write)"
    return data.decode("utf-8", errors="replace")


def _read_text_to_edit(policy: SecurityPolicy, path: Path, shown: str) -> str:
    fd = open_regular_file(policy, path, shown)
    with open(fd, "rb") as handle:
        data = handle.read(DEFAULT_MAX_WRITE_BYTES + 1)
    return _edit_text(data, shown)


def _edit_context(text: str, start: int, old: str, new: str) -> tuple[str, str]:
    """The text before and after replacing ``old`` at ``start``: the whole file when it is
    small enough, else the changed lines with ``DIFF_CONTEXT_LINES`` on each side."""
    end = start + len(old)
    if len(text.encode("utf-8")) <= MAX_WHOLE_FILE_DIFF_BYTES:
        return text, text[:start] + new + text[end:]
    first = text.rfind("\n", 0, start) + 1  # the start of the first changed line
    for _ in range(DIFF_CONTEXT_LINES):
        if first == 0:
            break
        first = text.rfind("\n", 0, first - 1) + 1
    last = end
    for _ in range(DIFF_CONTEXT_LINES + 1):  # the rest of the last changed line, then more
        if last >= len(text):
            break
        found = text.find("\n", last)
        last = len(text) if found < 0 else found + 1
    return text[first:last], text[first:start] + new + text[end:last]


WorkspacePath = Annotated[
    str, Meta(min_length=1, description="File path, relative to the workspace.")
]


class FileReadArguments(ToolArguments):
    path: WorkspacePath
    offset: Annotated[int, Meta(ge=1, description="First line (1-based).")] | None = None
    limit: Annotated[int, Meta(ge=1, description="Number of lines.")] | None = None


class FileReadTool:
    definition: Final = ToolDefinition(
        name="file_read",
        kind="other",
        rules=ToolRules(path_argument=PathArgument()),
        presentation=ToolPresentation(line_argument="offset"),
        title=target_title("Read", "path"),
        arguments=FileReadArguments,
    )
    name = definition.name
    description = (
        "Read a text file from the workspace. Returns numbered lines (line number, tab, "
        f"text). Use offset (1-based line) and limit (default {DEFAULT_READ_LIMIT_LINES}) "
        "to page through long files."
    )
    side_effects = False
    parameters = SchemaOf(FileReadArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(FileReadArguments, arguments)
        offset = given.offset or 1
        limit = given.limit or DEFAULT_READ_LIMIT_LINES
        path = resolve(ctx, given.path)
        shown = display_path(ctx.policy, path)
        if ctx.client is not None and ctx.client.reads_files:
            content = await ctx.client.read_text_file(path)
            return ToolOutput(numbered_lines(io.BytesIO(content.encode()), shown, offset, limit))
        text = await trio.to_thread.run_sync(_read_lines, ctx.policy, path, shown, offset, limit)
        return ToolOutput(text)


def _write_file(policy: SecurityPolicy, path: Path, shown: str, data: bytes) -> None:
    try:
        with opened_directory(policy.jail.roots, path.parent, create=True) as directory:
            replace_contents(directory, path.name, data, shown)
    except OSError as exc:
        raise write_error(exc, shown) from None


class FileWriteArguments(ToolArguments):
    path: WorkspacePath
    content: Annotated[str, Meta(description="The complete new file content.")]


class FileWriteTool:
    definition: Final = ToolDefinition(
        name="file_write",
        kind="edit",
        rules=ToolRules(path_argument=PathArgument(for_write=True)),
        presentation=FileEditPresentation(old_key=None, new_key="content"),
        title=target_title("Write", "path"),
        arguments=FileWriteArguments,
    )
    name = definition.name
    description = (
        "Create or overwrite a file in the workspace with the given text content. Missing "
        "parent directories are created. Prefer file_edit for changing part of a file."
    )
    side_effects = True
    parameters = SchemaOf(FileWriteArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(FileWriteArguments, arguments)
        content = given.content
        data = content.encode("utf-8")
        if len(data) > DEFAULT_MAX_WRITE_BYTES:
            raise RefusedCall(
                f"Content too large: {len(data)} bytes (limit: {DEFAULT_MAX_WRITE_BYTES} bytes)"
            )
        path = resolve(ctx, given.path, for_write=True)
        shown = display_path(ctx.policy, path)
        if ctx.client is not None and ctx.client.writes_files:
            await ctx.client.write_text_file(path, content)
        else:
            await trio.to_thread.run_sync(_write_file, ctx.policy, path, shown, data)
        return ToolOutput(f"Wrote {len(data)} bytes to {shown}")


def _edit_file(policy: SecurityPolicy, path: Path, shown: str, old: str, new: str) -> str:
    try:
        with opened_directory(policy.jail.roots, path.parent) as directory:
            return _edit_in(directory, path.name, shown, old, new)
    except FileNotFoundError:
        raise ToolError(f"File not found: {shown}") from None
    except OSError as exc:
        raise write_error(exc, shown) from None


def _text_to_edit(fd: int, shown: str) -> str:
    """The UTF-8 text of the open file ``fd`` (closed here), at most the write limit."""
    with open(fd, "rb") as handle:
        data = handle.read(DEFAULT_MAX_WRITE_BYTES + 1)
    return _edit_text(data, shown)


def _edit_text(data: bytes, shown: str) -> str:
    """A file's bytes as the text file_edit edits, or why it will not."""
    if len(data) > DEFAULT_MAX_WRITE_BYTES:
        raise ToolError(too_large_to_edit(shown))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; file_edit only edits text files") from None


def locate_once(text: str, old: str, shown: str) -> int:
    """Where ``old`` starts in ``text``; a ``ToolError`` unless it occurs exactly once."""
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string not found in {shown}; copy it exactly from file_read output "
            "(without the line-number prefix), including whitespace"
        )
    if count > 1:
        raise ToolError(
            f"old_string matches {count} times in {shown}; include more surrounding "
            "context so it matches exactly once"
        )
    return text.index(old)


def _edit_in(directory: int, name: str, shown: str, old: str, new: str) -> str:
    text = _text_to_edit(open_regular_at(directory, name, shown), shown)
    updated, summary = edited_text(text, shown, old, new)
    replace_contents(directory, name, updated.encode("utf-8"), shown)
    return summary


def edited_text(text: str, shown: str, old: str, new: str) -> tuple[str, str]:
    """``text`` with its one occurrence of ``old`` replaced, and file_edit's summary.

    Raises:
        ToolError: ``old`` does not occur exactly once, or the result is too large.
    """
    start = locate_once(text, old, shown)
    updated = text[:start] + new + text[start + len(old) :]
    if len(updated.encode("utf-8")) > DEFAULT_MAX_WRITE_BYTES:
        raise ToolError(f"Edited file would exceed {DEFAULT_MAX_WRITE_BYTES} bytes")
    removed = old.count("\n") + 1
    added = new.count("\n") + 1 if new else 0
    return updated, f"Edited {shown}: replaced 1 occurrence ({removed} line(s) → {added} line(s))"


async def _edit_through_client(
    ctx: ToolContext, client: ClientSide, path: Path, shown: str, old: str, new: str
) -> str:
    """file_edit with the client's text (a buffer the editor holds, unsaved edits
    included) and, when it writes files, through the client; else on the disk."""
    text = await client.read_text_file(path)
    if len(text.encode("utf-8")) > DEFAULT_MAX_WRITE_BYTES:
        raise ToolError(too_large_to_edit(shown))
    updated, summary = edited_text(text, shown, old, new)
    if client.writes_files:
        await client.write_text_file(path, updated)
    else:
        data = updated.encode("utf-8")
        await trio.to_thread.run_sync(_write_file, ctx.policy, path, shown, data)
    return summary


class FileEditArguments(ToolArguments):
    path: WorkspacePath
    # Not declared non-empty: the tool's own refusal says to use file_write instead.
    old_string: Annotated[str, Meta(description="Exact text to replace.")]
    new_string: Annotated[str, Meta(description="Replacement text.")]


class FileEditTool:
    definition: Final = ToolDefinition(
        name="file_edit",
        kind="edit",
        rules=ToolRules(path_argument=PathArgument(for_write=True)),
        presentation=FileEditPresentation(old_key="old_string", new_key="new_string"),
        title=target_title("Edit", "path"),
        arguments=FileEditArguments,
    )
    name = definition.name
    description = (
        "Replace one exact occurrence of old_string with new_string in a workspace file. "
        "old_string must match exactly once (whitespace included); add surrounding lines "
        "to make it unique. new_string may be empty to delete the text."
    )
    side_effects = True
    parameters = SchemaOf(FileEditArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(FileEditArguments, arguments)
        old, new = given.old_string, given.new_string
        if not old:
            raise RefusedCall("old_string must not be empty; use file_write to create a file")
        if old == new:
            raise RefusedCall("old_string and new_string are identical; nothing to change")
        path = resolve(ctx, given.path, for_write=True)
        shown = display_path(ctx.policy, path)
        client = ctx.client
        if client is not None and client.reads_files:
            return ToolOutput(await _edit_through_client(ctx, client, path, shown, old, new))
        if client is not None and client.writes_files:
            text = await trio.to_thread.run_sync(_read_text_to_edit, ctx.policy, path, shown)
            updated, summary = edited_text(text, shown, old, new)
            await client.write_text_file(path, updated)
            return ToolOutput(summary)
        text = await trio.to_thread.run_sync(_edit_file, ctx.policy, path, shown, old, new)
        return ToolOutput(text)
