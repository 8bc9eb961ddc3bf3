"""A small ACP client over a `zeroclaw acp` child process (used by `zeroclaw prompt`/`demo`).

It speaks the same wire as an editor: newline-delimited JSON-RPC on the child's stdin and
stdout, ``session/update`` notifications passed to ``on_update``, and server → client
``session/request_permission`` requests answered by ``on_permission``. The JSON-RPC side is
the shared peer (``acp_server.protocol.client.JsonRpcPeer``, push style); this module adds
the child's pipes as its transport and the process's lifetime.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

import trio

from acp_core import methods
from acp_core.framing import LineDecoder, encode_line
from acp_core.jsonrpc import Notification, Request
from acp_server.errors import ZeroclawError
from acp_server.protocol.client import ErrorReply, JsonRpcPeer, PeerClosed, not_handled

logger = logging.getLogger(__name__)

DEFAULT_READ_CHUNK_BYTES: Final = 64 * 1024
DEFAULT_EXIT_GRACE_SECS: Final = 10.0

UpdateHandler = Callable[[dict[str, Any]], None]
PermissionHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
FrameHandler = Callable[[str, str], None]  # (direction "->" / "<-", raw line)


class AgentError(ZeroclawError):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message


class AgentExited(Exception):
    """The agent process closed its stdout before answering."""


def zeroclaw_acp_command(config_dir: str | None, *extra: str) -> list[str]:
    """How to start `zeroclaw acp` with this interpreter (works without the script on PATH)."""
    argv = [sys.executable, "-m", "acp_server"]
    if config_dir is not None:
        argv += ["--config-dir", config_dir]
    return [*argv, "acp", *extra]


class ChildPipes:
    """A ``MessageTransport`` over a child's stdin (one line per message) and stdout."""

    def __init__(self, process: trio.Process, on_frame: FrameHandler | None = None) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._decoder = LineDecoder()
        self._on_frame = on_frame
        self._send_lock = trio.Lock()

    async def receive_message(self) -> str | None:
        """The next line, or None when stdout ends (a line over the limit raises
        ``RemoteProtocolError`` and is skipped)."""
        while True:
            line = self._decoder.next_line()
            if line is not None:
                if self._on_frame is not None:
                    self._on_frame("<-", line)
                return line
            if self._decoder.at_eof:
                return None
            data = await self._stdout.receive_some(DEFAULT_READ_CHUNK_BYTES)
            self._decoder.feed(data if isinstance(data, bytes) else bytes(data))

    async def send_message(self, payload: bytes) -> None:
        if self._on_frame is not None:
            self._on_frame("->", payload.decode())
        async with self._send_lock:  # the request task and the answer tasks share stdin
            await self._stdin.send_all(encode_line(payload))

    async def aclose(self) -> None:
        await self._stdin.aclose()


class AgentConnection:
    """JSON-RPC over a child's pipes; run ``serve`` in a nursery, then call ``request``."""

    def __init__(
        self,
        process: trio.Process,
        *,
        on_update: UpdateHandler,
        on_permission: PermissionHandler,
        on_frame: FrameHandler | None = None,
    ) -> None:
        self.process = process
        self._pipes = ChildPipes(process, on_frame)
        self._peer = JsonRpcPeer(self._pipes, id_prefix="cli-")
        self._on_update = on_update
        self._on_permission = on_permission

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send a request and wait for its result.

        Raises:
            AgentError: the agent answered with an error.
            AgentExited: the agent went away first.
        """
        try:
            return await self._peer.request_result(method, dict(params))
        except ErrorReply as error:
            raise AgentError(error.code, error.message) from None
        except PeerClosed:
            raise AgentExited("zeroclaw acp exited before answering") from None

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        await self._peer.notify(method, dict(params))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the agent's stdout until it closes."""
        await self._peer.serve(
            on_notification=self._notified, on_call=self._called, task_status=task_status
        )

    def _notified(self, note: Notification) -> None:
        if note.method == methods.SESSION_UPDATE and isinstance(note.params, dict):
            self._on_update(note.params)

    async def _called(self, request: Request) -> Any:
        if request.method != methods.SESSION_REQUEST_PERMISSION or not isinstance(
            request.params, dict
        ):
            raise not_handled(request)
        return await self._on_permission(request.params)

    async def close_input(self) -> None:
        await self._pipes.aclose()


@asynccontextmanager
async def open_agent(
    argv: Sequence[str],
    *,
    on_update: UpdateHandler,
    on_permission: PermissionHandler,
    on_frame: FrameHandler | None = None,
    env: Mapping[str, str] | None = None,
    stderr: int | None = None,
) -> AsyncIterator[AgentConnection]:
    """Start the agent, serve its output in the background, and on exit close its stdin
    and wait for it (killing it if it does not leave within a grace period)."""
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("ZEROCLAW_LOG", "warning")
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=child_env,
        # Its own session: a Ctrl-C on the terminal reaches only us, and we turn it into
        # session/cancel instead of killing the agent mid-turn.
        start_new_session=True,
    )
    connection = AgentConnection(
        process, on_update=on_update, on_permission=on_permission, on_frame=on_frame
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(connection.serve)
            try:
                yield connection
            finally:
                with trio.CancelScope(shield=True):
                    try:
                        await connection.close_input()
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                    with trio.move_on_after(DEFAULT_EXIT_GRACE_SECS):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
