"""Replacing a file's contents so that neither a failure nor a swapped path can hurt.

The parent directory is reached as every file tool reaches a path
(``acp_server.security.beneath.opened_directory``: one directory at a time from the jail
root, following no link), so a directory swapped for a symbolic link after the policy's
check makes the open fail instead of landing elsewhere: the check and the use are one.

The new contents go to a temporary file beside the target, are ``fsync``ed and then
renamed over it (keeping its permission bits): a full disk or an I/O error leaves the old
file as it was, and a target with other hard links (one possibly outside the workspace)
gets a new inode while the other links keep the old contents.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import Final

from acp_server.agent.tools.base import ToolError

_TEMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
NEW_FILE_MODE: Final = 0o644
"""Permission bits of a file created by file_write (before the umask)."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def replace_contents(directory_fd: int, name: str, data: bytes, shown: str) -> None:
    """Make ``name`` in ``directory_fd`` hold ``data``: through a synced temporary file
    renamed over it, so that any failure leaves the old file untouched."""
    try:
        current: os.stat_result | None = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
    except FileNotFoundError:
        current = None
    if current is not None:
        if stat.S_ISLNK(current.st_mode):
            raise ToolError(f"Refusing to write through a symbolic link: {shown}")
        if stat.S_ISDIR(current.st_mode):
            raise ToolError(f"Cannot write {shown}: it is a directory")
        if not stat.S_ISREG(current.st_mode):
            raise ToolError(f"Cannot write {shown}: not a regular file")
    temporary = f".{secrets.token_hex(8)}.zeroclaw-write"
    # An existing file's bits are applied once its contents are in; until then only we can read.
    fd = os.open(temporary, _TEMP_FLAGS, 0o600 if current else NEW_FILE_MODE, dir_fd=directory_fd)
    try:
        try:
            _write_all(fd, data)
            if current is not None:
                os.fchmod(fd, stat.S_IMODE(current.st_mode))
                if (current.st_uid, current.st_gid) != (os.geteuid(), os.getegid()):
                    with contextlib.suppress(PermissionError):
                        os.fchown(fd, current.st_uid, current.st_gid)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=directory_fd)
        raise
    with contextlib.suppress(OSError):  # the rename is durable once the directory is
        os.fsync(directory_fd)


def write_error(exc: OSError, shown: str) -> ToolError:
    """The tool error for a failed write."""
    if exc.errno == errno.ELOOP:
        return ToolError(f"Refusing to write through a symbolic link: {shown}")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"Cannot write {shown}: a parent is not a directory")
    return ToolError(f"Cannot write {shown}: {exc.strerror or exc}")
