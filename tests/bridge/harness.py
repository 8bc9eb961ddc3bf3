"""Test helpers for the bridge: a scriptable fake gateway and a handle on a bridge process.

The fake gateway is built with the ``websockets`` library (not our server), so the bridge is
also tested against "a gateway built with another WebSocket library". It serves
``/acp`` (bearer-checked like ZeroClaw's implementation), ``/pair/code`` and ``/pair``.

Its behaviour is driven by the requests the test sends through the bridge:

* ``initialize``: an ACP v1 initialize result;
* ``test/hold``: replied to only once ``gateway.release`` is set;
* ``test/never``: never replied to;
* ``test/frames``: sends ``params.frames`` verbatim (as binary frames if ``params.binary``),
  then replies;
* ``test/close``: closes the connection with ``params.code``/``params.reason``;
* ``test/abort``: drops the TCP connection without a close frame;
* ``test/ask``: sends the IDE a ``session/request_permission`` numbered per connection
  (``zc-out-0``, ``zc-out-1`` ... like ZeroClaw's implementation) and replies with the IDE's answer;
* ``session/new``: ``{"sessionId": "sess-<n>"}``; ``session/resume`` and ``session/load``: ``{}``;
* anything else: ``{"result": {"method": <method>, "params": <params>}}``.

Frames are also recorded per connection (``connections``), to check what a reconnecting
bridge sends first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

import trio
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.trio.server import Server, ServerConnection, serve

from tests.helpers import write_config as write_document

BRIDGE: Final = Path(sys.executable).parent / "zeroclaw-acp-bridge"
UNAUTHORIZED_BODY: Final = (
    "Unauthorized - provide Authorization header, Sec-WebSocket-Protocol bearer, or ?token= "
    "query param"
)
ISSUED_TOKEN: Final = "zc_" + "5e" * 32


def jsonrpc_request(request_id: Any, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message, separators=(",", ":")).encode()


@dataclass
class FakeGateway:
    token: str | None = None
    """Bearer token required on /acp; None: no authentication."""
    pairing_code: str | None = None
    """One-time code accepted by POST /pair (and shown by GET /pair/code unless hidden)."""
    show_pairing_code: bool = True
    issued_token: str = ISSUED_TOKEN
    path_prefix: str = ""
    port: int = 0
    close_codes: list[int | None] = field(default_factory=list)
    frames: list[str | bytes] = field(default_factory=list)
    upgrade_requests: list[Request] = field(default_factory=list)
    http_requests: list[Request] = field(default_factory=list)
    rejected_upgrades: int = 0
    release: trio.Event = field(default_factory=trio.Event)
    frame_received: trio.Event = field(default_factory=trio.Event)
    connection_closed: trio.Event = field(default_factory=trio.Event)
    connections: list[list[Any]] = field(default_factory=list)
    """Decoded frames received, one list per connection."""
    connected: trio.Event = field(default_factory=trio.Event)
    sessions_created: int = 0
    close_on_connect: int | None = None
    """Close every new connection at once with this code (a gateway stuck in a crash loop)."""
    busy_upgrades: int = 0
    """Answer this many upgrades (the next ones) with 503, as a gateway at its cap does."""

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{self.path_prefix}/acp"

    def received_json(self) -> list[Any]:
        return [json.loads(frame) for frame in self.frames]

    async def wait_for_frames(self, count: int) -> None:
        while len(self.frames) < count:
            self.frame_received = trio.Event()
            await self.frame_received.wait()

    def _json(self, connection: ServerConnection, status: int, body: object) -> Response:
        response = connection.respond(status, json.dumps(body))
        del response.headers["Content-Type"]
        response.headers["Content-Type"] = "application/json"
        return response

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.partition("?")[0]
        if self.path_prefix:
            if not path.startswith(self.path_prefix + "/"):
                return connection.respond(404, "not found\n")
            path = path.removeprefix(self.path_prefix)
        if path == "/pair/code":
            self.http_requests.append(request)
            code = self.pairing_code if self.show_pairing_code else None
            return self._json(
                connection,
                200,
                {"success": True, "pairing_required": self.token is not None, "pairing_code": code},
            )
        if path == "/pair":
            self.http_requests.append(request)
            if request.method != "POST":
                return connection.respond(405, "POST only\n")
            if self.pairing_code is None or request.headers.get("X-Pairing-Code") != (
                self.pairing_code
            ):
                return self._json(connection, 403, {"error": "Invalid pairing code"})
            self.pairing_code = None  # consumed, like ZeroClaw's implementation
            self.token = self.issued_token
            return self._json(
                connection,
                200,
                {"paired": True, "persisted": True, "token": self.issued_token, "message": "ok"},
            )
        if path != "/acp":
            return connection.respond(404, "not found\n")
        self.upgrade_requests.append(request)
        if self.busy_upgrades:
            self.busy_upgrades -= 1
            return connection.respond(503, "Service Unavailable: too many connections\n")
        if self.token is not None and request.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            self.rejected_upgrades += 1
            return connection.respond(401, UNAUTHORIZED_BODY)
        return None

    async def handler(self, websocket: ServerConnection) -> None:
        received: list[Any] = []
        self.connections.append(received)
        self.connected.set()
        if self.close_on_connect is not None:
            await websocket.aclose(self.close_on_connect, "crash loop")
            return
        asked: dict[str, trio.MemorySendChannel[Any]] = {}
        counter = iter(range(1_000_000))
        try:
            async with trio.open_nursery() as nursery:
                async for frame in websocket:
                    self.frames.append(frame)
                    message = json.loads(frame)
                    received.append(message)
                    self.frame_received.set()
                    if "method" in message and "id" in message:
                        nursery.start_soon(self._answer, websocket, message, asked, counter)
                    elif message.get("id") in asked:
                        asked.pop(message["id"]).send_nowait(message)
                nursery.cancel_scope.cancel()
        except* ConnectionClosed:
            pass
        finally:
            self.close_codes.append(websocket.close_code)
            self.connection_closed.set()

    async def _answer(
        self,
        websocket: ServerConnection,
        message: dict[str, Any],
        asked: dict[str, trio.MemorySendChannel[Any]],
        counter: Iterator[int],
    ) -> None:
        method = message["method"]
        params = message.get("params") or {}
        result: Any = {"method": method, "params": params}
        if method == "initialize":
            result = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": True},
                "agentInfo": {"name": "fake-gateway", "title": "Fake Gateway", "version": "9.9"},
                "authMethods": [],
            }
        elif method == "session/new":
            self.sessions_created += 1
            result = {"sessionId": f"sess-{self.sessions_created}"}
        elif method in ("session/resume", "session/load"):
            result = {}
        elif method == "test/ask":
            ask_id = f"zc-out-{next(counter)}"
            send, receive = trio.open_memory_channel[Any](1)
            asked[ask_id] = send
            request = {
                "jsonrpc": "2.0",
                "id": ask_id,
                "method": "session/request_permission",
                "params": {"sessionId": params.get("sessionId", "sess-1"), "options": []},
            }
            await websocket.send(json.dumps(request))
            answer = await receive.receive()
            result = {"answer": answer.get("result", answer.get("error"))}
        elif method == "test/hold":
            await self.release.wait()
        elif method == "test/never":
            await trio.sleep_forever()
        elif method == "test/frames":
            for frame in params["frames"]:
                await websocket.send(frame.encode() if params.get("binary") else frame)
        elif method == "test/close":
            await websocket.aclose(params.get("code", 1000), params.get("reason", ""))
            return
        elif method == "test/abort":
            await trio.aclose_forcefully(websocket.stream)
            return
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        await websocket.send(json.dumps(reply, separators=(",", ":")))


@asynccontextmanager
async def running_gateway(
    gateway: FakeGateway | None = None, *, port: int = 0, close_code: int = 1001
) -> AsyncIterator[FakeGateway]:
    """Serve ``gateway`` (on ``port``: pass the old one to restart it); on exit, close every
    connection with ``close_code``."""
    gateway = gateway or FakeGateway()
    async with trio.open_nursery() as nursery:
        server: Server = await nursery.start(
            partial(
                serve,
                gateway.handler,
                port,
                host="127.0.0.1",
                process_request=gateway.process_request,
                compression=None,
                max_size=64 * 1024 * 1024,
                close_timeout=0.5,
            )
        )
        gateway.port = server.listeners[0].socket.getsockname()[1]
        try:
            yield gateway
        finally:
            await server.aclose(code=close_code, reason="restarting, retry")
            nursery.cancel_scope.cancel()


def write_config(
    config_dir: Path,
    port: int,
    *,
    require_pairing: bool = True,
    path_prefix: str | None = None,
    host: str = "127.0.0.1",
) -> Path:
    """A config.toml with only the [gateway] table the bridge reads; returns the file."""
    gateway: dict[str, Any] = {"host": host, "port": port, "require_pairing": require_pairing}
    if path_prefix is not None:
        gateway["path_prefix"] = path_prefix
    return write_document(config_dir, {"schema_version": 3, "gateway": gateway}) / "config.toml"


def write_token_file(config_dir: Path, token: str, mode: int = 0o600) -> Path:
    path = config_dir / "acp-bridge-token"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def bridge_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a bridge process: no ZeroClaw variables leak in from ours."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ZEROCLAW_")}
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env.update(extra or {})
    return env


class BridgeProcess:
    """A running ``zeroclaw-acp-bridge`` with piped stdio."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin: trio.abc.SendStream = process.stdin
        self.stdout: trio.abc.ReceiveStream = process.stdout
        self._stdout_buffer = bytearray()
        self._stdout_eof = False
        self.stderr = bytearray()
        self._stderr_changed = trio.Event()
        self._stderr_eof = trio.Event()

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    async def _read_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while chunk := await stream.receive_some():
            self.stderr += chunk
            self._stderr_changed.set()
            self._stderr_changed = trio.Event()
        self._stderr_eof.set()

    async def send(self, data: bytes) -> None:
        await self.stdin.send_all(data)

    async def send_line(self, line: bytes) -> None:
        await self.stdin.send_all(line + b"\n")

    async def close_stdin(self) -> None:
        await self.stdin.aclose()

    async def read_line(self) -> bytes:
        """The next stdout line without its newline; b"" at end of stream."""
        while True:
            newline = self._stdout_buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._stdout_buffer[:newline])
                del self._stdout_buffer[: newline + 1]
                return line
            if self._stdout_eof:
                rest = bytes(self._stdout_buffer)
                self._stdout_buffer.clear()
                return rest
            chunk = await self.stdout.receive_some()
            if not chunk:
                self._stdout_eof = True
            self._stdout_buffer += chunk

    async def read_json(self) -> Any:
        line = await self.read_line()
        assert line, f"stdout ended; stderr:\n{self.stderr_text}"
        return json.loads(line)

    async def read_remaining_lines(self) -> list[bytes]:
        lines = []
        while line := await self.read_line():
            lines.append(line)
        return lines

    async def wait_for_stderr(self, text: str) -> None:
        while text not in self.stderr_text:
            if self._stderr_eof.is_set():
                raise AssertionError(f"{text!r} never appeared on stderr:\n{self.stderr_text}")
            await self._stderr_changed.wait()

    async def wait(self) -> int:
        """Wait for exit and for stderr to be fully read; returns the exit code."""
        code = await self.process.wait()
        await self._stderr_eof.wait()
        return code


@asynccontextmanager
async def running_bridge(
    *args: str, env: Mapping[str, str], cwd: Path | None = None
) -> AsyncIterator[BridgeProcess]:
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [str(BRIDGE), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
        )
        bridge = BridgeProcess(process)
        nursery.start_soon(bridge._read_stderr)
        try:
            yield bridge
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()
            with trio.move_on_after(5):
                await bridge._stderr_eof.wait()
            await trio.aclose_forcefully(bridge.stdin)
            await trio.aclose_forcefully(bridge.stdout)
            nursery.cancel_scope.cancel()


async def run_bridge(
    *args: str, env: Mapping[str, str], stdin: bytes = b""
) -> tuple[int, bytes, str]:
    """Run the bridge to completion; returns (exit code, stdout, stderr)."""
    result = await trio.run_process(
        [str(BRIDGE), *args],
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        env=dict(env),
        check=False,
    )
    return result.returncode, result.stdout, result.stderr.decode("utf-8", errors="replace")


class RestartableGateway:
    """A fake gateway that can be stopped and started again on the same port, while the
    bridge under test keeps running (a gateway restart)."""

    def __init__(
        self, nursery: trio.Nursery, gateway: FakeGateway | None = None, close_code: int = 1012
    ) -> None:
        self.nursery = nursery
        self.gateway = gateway or FakeGateway()
        self.close_code = close_code
        self.port = 0
        self._stop = trio.Event()
        self._stopped = trio.Event()

    async def start(self) -> FakeGateway:
        self._stop, self._stopped = trio.Event(), trio.Event()
        await self.nursery.start(self._serve)
        return self.gateway

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with running_gateway(
                self.gateway, port=self.port, close_code=self.close_code
            ) as gateway:
                self.port = gateway.port
                task_status.started()
                await self._stop.wait()
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        """Close every connection with ``close_code`` and stop listening."""
        self._stop.set()
        await self._stopped.wait()
