"""trio streams over the process's stdin and stdout.

When fd 0/1 are pipes or sockets (how an IDE starts an agent), they are wrapped in
``trio.lowlevel.FdStream`` on a ``dup`` of the descriptor: readiness-based, no threads. For
anything else (a TTY while someone experiments by hand, or a regular file from ``< file``)
the bridge uses a worker thread per call instead: FdStream would switch the shared open file
description of a terminal to non-blocking mode, which can make stderr writes fail with
``BlockingIOError`` (O_NONBLOCK is a property of the open file description, shared by
fds 0, 1 and 2 of a terminal), and epoll cannot wait on regular files.
"""

from __future__ import annotations

import fcntl
import os
import stat
from typing import Final

import trio

DEFAULT_READ_CHUNK_BYTES: Final = 256 * 1024
DEFAULT_PIPE_BUFFER_BYTES: Final = 1024 * 1024
"""Requested kernel buffer for stdio pipes (Linux F_SETPIPE_SZ; the default 64 KiB splits
every large update into several writes and wake-ups)."""


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _ThreadReceiveStream(trio.abc.ReceiveStream):
    """Blocking reads in a worker thread; used for TTYs and regular files."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = max_bytes or DEFAULT_READ_CHUNK_BYTES
        # A read from a terminal cannot be interrupted; abandoning it on cancel is fine
        # because the bridge is about to exit whenever stdin reading is cancelled.
        return await trio.to_thread.run_sync(os.read, self._fd, size, abandon_on_cancel=True)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


class _ThreadSendStream(trio.abc.SendStream):
    """Blocking writes in a worker thread; used for TTYs and regular files."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.to_thread.run_sync(self._write_all, bytes(data))

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def _grow_pipe_buffer(fd: int) -> None:
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None or not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return
    try:
        fcntl.fcntl(fd, set_size, DEFAULT_PIPE_BUFFER_BYTES)
    except OSError:
        pass  # above the system's pipe-max-size, or not permitted: the default still works


def open_stdin() -> trio.abc.ReceiveStream:
    if _is_pipe_or_socket(0):
        _grow_pipe_buffer(0)
        return trio.lowlevel.FdStream(os.dup(0))
    return _ThreadReceiveStream(0)


def open_stdout() -> trio.abc.SendStream:
    if _is_pipe_or_socket(1):
        _grow_pipe_buffer(1)
        return trio.lowlevel.FdStream(os.dup(1))
    return _ThreadSendStream(1)
