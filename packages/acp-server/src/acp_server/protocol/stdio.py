"""`zeroclaw acp`'s transport: newline-delimited JSON-RPC over the process's stdin/stdout.

stdout carries protocol frames only. The server writes through a duplicate of fd 1 and
then points fd 1 at stderr, so anything else that writes to "stdout" (a library, a stray
child process) lands in the log instead of corrupting the stream; fd 0 is likewise
replaced by /dev/null so children never read the client's messages.

Pipes use ``trio.lowlevel.FdStream``. FdStream makes the whole open file description
non-blocking, which on a terminal is shared with stderr (one open file description), so on a TTY
we read and write through worker threads instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Final

import trio
import trio.lowlevel

from acp_core.framing import DEFAULT_MAX_LINE_BYTES, LineDecoder, encode_line
from acp_server.observability.logs import new_correlation_id, tag_this_task
from acp_server.protocol.transport import TransportClosed

if TYPE_CHECKING:
    from acp_server.protocol.services.context import AcpApp

logger = logging.getLogger(__name__)

DEFAULT_READ_CHUNK_BYTES: Final = 64 * 1024
TERMINATION_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class StdioTransport:
    """A ``MessageTransport`` over a pair of byte streams (one JSON text per line).

    Args:
        receive_stream: where client bytes come from (stdin).
        send_stream: where frames go (stdout).
        max_line_bytes: longest accepted line; longer ones are answered and skipped.
    """

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self._receive = receive_stream
        self._send = send_stream
        self._decoder = LineDecoder(max_line_bytes=max_line_bytes)
        self._input_ended = False
        self._read_scope: trio.CancelScope | None = None
        # Pipes (FdStream): read and write the descriptors directly. FdStream begins every
        # call with a scheduler round trip; a request/response exchange has several, and
        # skipping them is most of the per-turn overhead (bench/server_turns.py).
        self._read_fd = _pipe_fd(receive_stream)
        self._write_fd = _pipe_fd(send_stream)
        self._pipe_drained = False

    async def receive_message(self) -> str | None:
        while True:
            if self._input_ended:
                return None
            line = self._decoder.next_line()  # may raise RemoteProtocolError: caller answers
            if line is not None:
                return line
            if self._decoder.at_eof:
                return None
            try:
                data = await self._read_some()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if self._input_ended:
                return None
            self._decoder.feed(data if isinstance(data, bytes) else bytes(data))

    @contextlib.contextmanager
    def _interruptible(self) -> Iterator[None]:
        """A wait that ``end_input`` can cut short (only waits get a cancel scope)."""
        with trio.CancelScope() as scope:
            self._read_scope = scope
            try:
                yield
            finally:
                self._read_scope = None

    def end_input(self) -> None:
        """Behave as if stdin had ended (a termination signal): the server then cancels
        its turns, answers them and returns, exactly as on EOF."""
        self._input_ended = True
        if self._read_scope is not None:
            self._read_scope.cancel()
        if self._read_fd is not None:
            # Wakes a wait_readable in _read_some (it raises ClosedResourceError); a cancel
            # scope per wait would do the same at a cost on every request. Nothing reads
            # the descriptor after this.
            trio.lowlevel.notify_closing(self._read_fd)

    async def send_message(self, payload: bytes) -> None:
        await self._send_bytes(encode_line(payload))

    async def send_messages(self, payloads: Sequence[bytes]) -> None:
        """Write several frames in one system call (the writer batches a busy outbox)."""
        await self._send_bytes(b"".join(encode_line(payload) for payload in payloads))

    async def _read_some(self) -> bytes | bytearray:
        """The next bytes from the client; ``b""`` at its end or after ``end_input``."""
        fd = self._read_fd
        if fd is None:
            with self._interruptible():
                return await self._receive.receive_some(DEFAULT_READ_CHUNK_BYTES)
            return b""
        # After a short read the pipe was empty, and another read would almost always fail
        # with EAGAIN: wait for data straight away instead.
        if self._pipe_drained and not await self._wait_readable(fd):
            return b""
        waited = self._pipe_drained
        while True:
            try:
                data = os.read(fd, DEFAULT_READ_CHUNK_BYTES)
            except BlockingIOError:
                waited = True
                if not await self._wait_readable(fd):
                    return b""
                continue
            except OSError as exc:
                raise trio.BrokenResourceError from exc
            self._pipe_drained = len(data) < DEFAULT_READ_CHUNK_BYTES
            if not waited:
                # Data was already there: still let other tasks run before we go on
                # (a client flooding us must not starve the turns).
                await trio.lowlevel.checkpoint()
            return data

    async def _wait_readable(self, fd: int) -> bool:
        """Wait for input on the pipe; False once the input has been ended (end_input)."""
        if self._input_ended:
            return False
        try:
            await trio.lowlevel.wait_readable(fd)
        except trio.ClosedResourceError:
            return False  # end_input's notify_closing
        return not self._input_ended

    async def _send_bytes(self, data: bytes) -> None:
        fd = self._write_fd
        if fd is None:
            try:
                await self._send.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise TransportClosed("stdout is closed") from exc
            return
        # Only the connection's writer task calls this, and it has just come back from
        # the scheduler (the outbox receive), so no extra checkpoint is needed here.
        view = memoryview(data)
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
                continue
            except OSError as exc:
                raise TransportClosed(f"stdout is closed ({exc.strerror or exc})") from exc
            view = view[written:]

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self._send.aclose()
            await self._receive.aclose()


class _ThreadFdStream(trio.abc.Stream):
    """Blocking fd I/O on worker threads, for terminals (see the module docstring)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._closed = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError
        size = max_bytes or DEFAULT_READ_CHUNK_BYTES
        try:
            return await trio.to_thread.run_sync(os.read, self._fd, size, abandon_on_cancel=True)
        except OSError as exc:
            raise trio.BrokenResourceError from exc

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError
        view = memoryview(bytes(data))
        while view:
            try:
                written = await trio.to_thread.run_sync(os.write, self._fd, view)
            except OSError as exc:
                raise trio.BrokenResourceError from exc
            view = view[written:]

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)
        await trio.lowlevel.checkpoint()


def _pipe_fd(stream: object) -> int | None:
    """The descriptor of a ``trio.lowlevel.FdStream`` (pipes, files), else None."""
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno()
    return None


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd) or stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return False


def _stream_for(fd: int) -> trio.abc.Stream:
    if _is_terminal(fd):
        return _ThreadFdStream(fd)
    return trio.lowlevel.FdStream(fd)


def open_stdio_transport(*, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> StdioTransport:
    """Take over fds 0 and 1 for the protocol (see the module docstring)."""
    stdin_fd = os.dup(0)
    stdout_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    try:
        os.dup2(2, 1)  # stray writes to stdout go to stderr, never into the protocol stream
    except OSError:
        os.dup2(devnull, 1)  # no usable stderr: stray writes are dropped instead
    os.close(devnull)
    return StdioTransport(
        _stream_for(stdin_fd), _stream_for(stdout_fd), max_line_bytes=max_line_bytes
    )


async def serve_stdio(app: AcpApp, *, default_agent: str | None = None) -> None:
    """`zeroclaw acp`: serve one client on stdin/stdout until stdin ends.

    Args:
        default_agent: ``--agent``: the alias session/new uses when the client names none
            (step 2 of the ZeroClaw ACP documentation's precedence, as the gateway's ``?agent=``).
    """
    from acp_server.protocol.connection import serve_connection

    tag_this_task(correlation=new_correlation_id())  # one connection: the process's
    transport = open_stdio_transport()
    try:
        with trio.open_signal_receiver(*TERMINATION_SIGNALS) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_end_input_on_signal, signals, transport)
                await serve_connection(
                    transport,
                    app,
                    connection_default_agent=default_agent,
                    reap_idle_sessions=True,
                )
                nursery.cancel_scope.cancel()
    finally:
        await transport.aclose()


async def _end_input_on_signal(signals: AsyncIterator[int], transport: StdioTransport) -> None:
    """An editor closing us sends SIGTERM (or the terminal SIGHUP/SIGINT): shut down the way
    EOF does, so running tools are cancelled (their process groups killed, no orphans) and
    their turns answered, instead of dying mid-turn. A second signal is not waited on."""
    async for signum in signals:
        logger.info(
            "%s received: cancelling running turns and exiting", signal.Signals(signum).name
        )
        transport.end_input()
        return
