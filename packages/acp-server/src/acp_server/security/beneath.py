"""Opening a path of the jail one directory at a time, following no symbolic link.

``PathJail.resolve_path`` checks a path by its name and returns its real path (no link in
it). Between that check and the open, a command the model left running may swap a
directory on the way for a symbolic link to somewhere outside, and ``O_NOFOLLOW`` guards
only the last component. So every file tool reaches the checked path from the outermost
jail root that holds it (``/`` when the jail is lifted), opening each directory relative
to the one before with ``O_NOFOLLOW | O_DIRECTORY`` and the last name with ``O_NOFOLLOW``:
a link anywhere on the way makes the open fail (``ELOOP``) instead of landing elsewhere.
What the tool then reads, lists, writes or stats is the descriptor it opened, so the path
it checked and the file it uses are one. Reads and writes share this walk
(``open_beneath``, ``opened_directory``); directory walks (the search tools) descend with
``open_child_directory`` from a descriptor opened the same way.

The outermost root is where a walk starts because a root nested in another one (an
additional directory inside the workspace) could itself be swapped by a command allowed
to write its parent; an outermost root's parent is outside every root, where the sandbox
lets no command write. The root itself is opened with ``O_NOFOLLOW`` too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""A file opened for reading: never through a final link, never blocking on a FIFO."""
MAX_WALK_DEPTH: Final = 64
"""Directory levels a search descends at most: a walk holds one descriptor per level."""


def walk_origin(roots: Sequence[Path], path: Path) -> tuple[str, tuple[str, ...]]:
    """Where the walk to ``path`` (absolute, normalized) starts, and the names below it:
    the outermost of ``roots`` holding it, else the file system's root. (Strings, not
    ``PurePath`` arithmetic: this runs for every file a tool opens.)"""
    text = str(path)
    start = None
    for root in roots:
        prefix = str(root)
        holds = text == prefix or text.startswith(prefix.rstrip("/") + "/")
        if holds and (start is None or len(prefix) < len(start)):
            start = prefix
    if start is None:
        start = path.anchor or "/"
    below = text[len(start) :].strip("/")
    return start, tuple(below.split("/")) if below else ()


def _link_or(error: OSError, parent_fd: int, name: str) -> OSError:
    """Linux says ENOTDIR for a link opened with ``O_NOFOLLOW | O_DIRECTORY``: a link is
    told apart as ELOOP, so every caller reports it as one."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode):
            return OSError(errno.ELOOP, os.strerror(errno.ELOOP), name)
    return error


def open_child_directory(parent_fd: int, name: str, *, create: bool = False) -> int:
    """The directory ``name`` in ``parent_fd``, not through a link (created when missing
    and ``create``). Raises ``OSError``: ``ELOOP`` for a link, ``ENOTDIR`` for a file."""
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
    except NotADirectoryError as exc:
        raise _link_or(exc, parent_fd, name) from None
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o777, dir_fd=parent_fd)
    return open_child_directory(parent_fd, name)


def _open_origin(start: str) -> int:
    try:
        return os.open(start, DIRECTORY_FLAGS)
    except NotADirectoryError as exc:
        if os.path.islink(start):
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), start) from None
        raise exc from None


def _descend(start: str, names: Sequence[str], *, create: bool = False) -> int:
    """A descriptor of ``start``/``names``, each name opened in the one before."""
    fd = _open_origin(start)
    try:
        for name in names:
            child = open_child_directory(fd, name, create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def opened_directory(
    roots: Sequence[Path], directory: Path, *, create: bool = False
) -> Iterator[int]:
    """A descriptor of ``directory`` (absolute, normalized, a real path), reached from its
    root without following any link; missing directories are created when ``create``.
    Raises ``OSError`` (``ELOOP`` for a link on the way, ``ENOTDIR`` for a file)."""
    start, names = walk_origin(roots, directory)
    fd = _descend(start, names, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_beneath(roots: Sequence[Path], path: Path, flags: int = READ_FLAGS) -> int:
    """``path`` (absolute, normalized, a real path) opened with ``flags | O_NOFOLLOW``,
    reached from its root without following any link. Raises ``OSError`` (``ELOOP`` for a
    link anywhere on the way or at the end)."""
    start, names = walk_origin(roots, path)
    if not names:
        if flags & os.O_DIRECTORY:
            return _open_origin(start)
        return os.open(start, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    parent = _descend(start, names[:-1])
    try:
        return os.open(names[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except NotADirectoryError as exc:
        raise _link_or(exc, parent, names[-1]) from None
    finally:
        os.close(parent)


def lstat_beneath(roots: Sequence[Path], path: Path) -> os.stat_result:
    """``path``'s own ``lstat`` (a link is reported as a link), its parent reached as
    ``opened_directory`` does."""
    start, names = walk_origin(roots, path)
    if not names:
        return os.lstat(start)
    parent = _descend(start, names[:-1])
    try:
        return os.stat(names[-1], dir_fd=parent, follow_symlinks=False)
    finally:
        os.close(parent)
