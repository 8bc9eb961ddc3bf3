"""A small ACP client over a `zeroclaw acp` child process (used by `zeroclaw prompt`/`demo`).

It speaks the same wire as an editor: newline-delimited JSON-RPC on the child's stdin and
stdout, ``session/update`` notifications passed to ``on_update``, and server → client
``session/request_permission`` requests answered by ``on_permission``.
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
from acp_core.connection import (
    NotificationReceived,
    RequestReceived,
    ResponseReceived,
    RpcConnection,
)
from acp_core.errors import MethodNotFoundError, RemoteProtocolError
from acp_core.framing import LineDecoder, encode_line
from acp_core.jsonrpc import ErrorResponse, JsonValue
from acp_server.errors import ZeroclawError

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
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._rpc = RpcConnection(outbound_id_prefix="cli-")
        self._waiting: dict[str, trio.MemorySendChannel[Any]] = {}
        self._on_update = on_update
        self._on_permission = on_permission
        self._on_frame = on_frame
        self._send_lock = trio.Lock()
        self._closed = trio.Event()
        self._nursery: trio.Nursery | None = None

    async def _write(self, payload: bytes) -> None:
        if self._on_frame is not None:
            self._on_frame("->", payload.decode())
        async with self._send_lock:
            await self._stdin.send_all(encode_line(payload))

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send a request and wait for its result.

        Raises:
            AgentError: the agent answered with an error.
            AgentExited: the agent went away first.
        """
        request_id, payload = self._rpc.send_request(method, dict(params))
        send, receive = trio.open_memory_channel[Any](1)
        self._waiting[request_id] = send
        try:
            await self._write(payload)
            async with receive:
                try:
                    response = await receive.receive()
                except trio.EndOfChannel:
                    raise AgentExited("zeroclaw acp exited before answering") from None
        finally:
            self._waiting.pop(request_id, None)
        if isinstance(response, ErrorResponse):
            raise AgentError(response.error.code, response.error.message)
        return response.result

    async def notify(self, method: str, params: Mapping[str, Any]) -> None:
        await self._write(self._rpc.send_notification(method, dict(params)))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the agent's stdout until it closes."""
        decoder = LineDecoder()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                while True:
                    try:
                        line = decoder.next_line()
                    except RemoteProtocolError as exc:
                        logger.warning("unreadable line from the agent: %s", exc)
                        continue
                    if line is None:
                        if decoder.at_eof:
                            break
                        data = await self._stdout.receive_some(DEFAULT_READ_CHUNK_BYTES)
                        decoder.feed(data if isinstance(data, bytes) else bytes(data))
                        continue
                    self._dispatch(line, nursery)
            finally:
                self._closed.set()
                for channel in self._waiting.values():
                    channel.close()

    def _dispatch(self, line: str, nursery: trio.Nursery) -> None:
        if self._on_frame is not None:
            self._on_frame("<-", line)
        try:
            event = self._rpc.receive(line)
        except RemoteProtocolError as exc:
            logger.warning("bad message from the agent: %s", exc)
            return
        if isinstance(event, ResponseReceived):
            channel = self._waiting.get(event.request_id)
            if channel is not None:
                channel.send_nowait(event.response)
        elif isinstance(event, NotificationReceived):
            note = event.notification
            if note.method == methods.SESSION_UPDATE and isinstance(note.params, dict):
                self._on_update(note.params)
        elif isinstance(event, RequestReceived):
            nursery.start_soon(
                self._answer, event.request.id, event.request.method, event.request.params
            )

    async def _answer(self, request_id: Any, method: str, params: JsonValue) -> None:
        if method != methods.SESSION_REQUEST_PERMISSION or not isinstance(params, dict):
            await self._write(self._rpc.send_error(request_id, MethodNotFoundError(method)))
            return
        result = await self._on_permission(params)
        await self._write(self._rpc.send_result(request_id, result))

    async def close_input(self) -> None:
        await self._stdin.aclose()


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
