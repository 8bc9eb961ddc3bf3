"""Content-addressed files under ``<workspace>/uploads/``: the blobs of prompts and the files
``deliver_file`` hands over (the ZeroClaw ACP documentation, "session/prompt" and
"Delivering files to the client").

They live in the session's workspace beside the files its tools work on, not in the session
store: the tools write them, the providers and the deliver_file projection read them back.

``store_upload`` writes ``uploads/<sha256>.<ext>`` atomically (a ``.tmp-…`` file, then
rename), refuses a symlinked ``uploads/`` and replaces a symlink planted at the
destination. All file-system calls go through a directory descriptor opened with
``O_NOFOLLOW``, so swapping ``uploads/`` for a symlink after the check changes nothing.
``read_verified`` re-reads a stored file (no-follow, bounded) and checks its digest:
the deliver_file projection uses it before embedding a blob. ``write_blobs`` performs the
writes ``acp_core.blobs.plan_prompt`` planned for a ``session/prompt``, reporting problems
as -32602.

Blocking: call these from ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from acp_core.blobs import DEFAULT_MAX_BLOB_BYTES, BlobWrite
from acp_core.errors import InvalidParamsError
from acp_server.errors import ZeroclawError

UPLOADS_DIR_NAME: Final = "uploads"
_temp_sequence = itertools.count()


class UploadError(ZeroclawError):
    """The uploads directory cannot be used safely; ``str()`` says why."""


def _open_uploads_dir(uploads_dir: Path, *, create: bool) -> int:
    if create:
        try:
            os.mkdir(uploads_dir, 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UploadError(f"Cannot create {uploads_dir}: {exc.strerror or exc}") from None
    try:
        return os.open(uploads_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symbolic link" if os.path.islink(uploads_dir) else "not a directory"
            raise UploadError(
                f"Refusing to write uploads: {uploads_dir} is {kind} "
                "(it must be a real directory inside the workspace)"
            ) from None
        raise UploadError(f"Cannot open {uploads_dir}: {exc.strerror or exc}") from None


def _read_at(dir_fd: int, name: str, limit: int) -> bytes | None:
    """Read a regular file in ``dir_fd`` without following symlinks; None if unsuitable."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return None
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(limit + 1)


def store_upload(uploads_dir: Path, storage_name: str, data: bytes) -> Path:
    """Write ``data`` as ``uploads_dir/storage_name`` atomically; return that path.

    An identical existing file is reused; a symlink at the destination is replaced.

    Raises:
        UploadError: ``uploads_dir`` is a symlink or not a directory, or cannot be written.
    """
    if "/" in storage_name or storage_name in ("", ".", ".."):
        raise ValueError(f"invalid storage name: {storage_name!r}")
    dir_fd = _open_uploads_dir(uploads_dir, create=True)
    try:
        try:
            existing = os.stat(storage_name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if (
            existing is not None
            and stat.S_ISREG(existing.st_mode)
            and existing.st_size == len(data)
            and _read_at(dir_fd, storage_name, len(data)) == data
        ):
            return uploads_dir / storage_name
        temp_name = f".tmp-{os.getpid()}-{next(_temp_sequence)}-{storage_name[:16]}"
        try:
            fd = os.open(
                temp_name,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=dir_fd,
            )
            with open(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            # rename() replaces a symlink or stale file at the destination atomically.
            os.replace(temp_name, storage_name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            try:
                os.unlink(temp_name, dir_fd=dir_fd)
            except OSError:
                pass
            raise UploadError(
                f"Cannot write {uploads_dir / storage_name}: {exc.strerror or exc}"
            ) from None
    finally:
        os.close(dir_fd)
    return uploads_dir / storage_name


def read_verified(
    path: Path, sha256_hex: str, *, limit: int = DEFAULT_MAX_BLOB_BYTES
) -> bytes | None:
    """The bytes of a stored upload if they still hash to ``sha256_hex``, else None.

    Reads without following symlinks (the directory and the file), at most ``limit``
    bytes: a file swapped or grown after the tool validated it is detected, not trusted.
    """
    try:
        dir_fd = _open_uploads_dir(path.parent, create=False)
    except UploadError:
        return None
    try:
        data = _read_at(dir_fd, path.name, limit)
    finally:
        os.close(dir_fd)
    if data is None or len(data) > limit:
        return None
    return data if hashlib.sha256(data).hexdigest() == sha256_hex else None


def uploads_dir(workspace: Path) -> Path:
    return workspace / UPLOADS_DIR_NAME


def write_blobs(workspace: Path, writes: Sequence[BlobWrite]) -> None:
    """Perform every planned write (all blobs were validated before the first one)."""
    directory = uploads_dir(workspace)
    for write in writes:
        try:
            store_upload(directory, write.storage_name, write.data)
        except UploadError as exc:
            raise InvalidParamsError(str(exc)) from None
