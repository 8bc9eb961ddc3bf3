"""Run a real `zeroclaw gateway --port 0` and talk to it with independent clients.

``run_gateway`` spawns the console script with ``ZEROCLAW_CONFIG_DIR``, reads the listening
URL from its stderr, asks for the start-up pairing code as the operator does (the admin
route, with the secret from the config directory: a gateway whose stderr is not a terminal
does not print it), and on exit sends SIGTERM and checks it exits 0.
``ws_connect`` opens a WebSocket with the `websockets` library (not our code); ``WsRpc`` is
a small JSON-RPC peer over it. ``RawWsClient`` speaks the handshake by hand over a bare TCP
stream, for clients that misbehave (vanish without a close frame, never answer pings).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import trio
from websockets.trio.client import ClientConnection, connect
from wsproto.connection import Connection, ConnectionType
from wsproto.events import Event, TextMessage

from acp_core.gateway_contract import ADMIN_HEADER, ADMIN_PAIRCODE_PATH, ADMIN_SECRET_FILE
from tests.e2e.helpers import child_env, console_script
from tests.helpers import poll_until
from tests.jsonrpc_peer import JsonDict, JsonRpcPeer, is_session_info, is_side_notice

STARTUP_TIMEOUT: Final = 60.0
EXIT_TIMEOUT: Final = 20.0
RECEIVE_TIMEOUT: Final = 20.0
LISTENING = re.compile(r"gateway listening on (https?)://([^ ]+):(\d+)(\S*)")


class StderrLog:
    """The gateway's stderr lines, with a way to wait for one to appear."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = trio.Event()

    def append(self, line: str) -> None:
        self.lines.append(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, text: str, within: float = 10.0) -> None:
        with trio.fail_after(within):
            while not any(text in line for line in self.lines):
                await self._changed.wait()


@dataclass
class RunningGateway:
    process: trio.Process
    port: int
    config_dir: Path
    log: StderrLog
    pairing_code: str | None
    exit_code: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws_url(self, query: str = "") -> str:
        return f"ws://127.0.0.1:{self.port}/acp" + (f"?{query}" if query else "")

    def stderr(self) -> str:
        return "\n".join(self.log.lines)

    async def http(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
            return await client.request(method, self.base_url + path, **kwargs)

    async def pair(self, code: str | None = None) -> str:
        """Exchange the (given or printed) pairing code for a token."""
        response = await self.http(
            "POST", "/pair", headers={"X-Pairing-Code": code or self.pairing_code or ""}
        )
        assert response.status_code == 200, response.text
        token: str = response.json()["token"]
        return token

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.process.send_signal(signum)

    async def wait_exit(self, within: float = EXIT_TIMEOUT) -> int:
        with trio.fail_after(within):
            self.exit_code = await self.process.wait()
        return self.exit_code

    async def wait_for_connections(self, count: int, within: float = 10.0) -> None:
        """Poll /health until it reports ``count`` open WebSocket connections."""

        async def reported() -> bool:
            connections: int = (await self.http("GET", "/health")).json()["connections"]
            return connections == count

        await poll_until(reported, within=within)


async def _pump_stderr(
    stream: trio.abc.ReceiveStream,
    lines: StderrLog,
    listening: trio.Event,
    found: list[str],
    done: trio.Event,
) -> None:
    buffer = b""
    try:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            buffer += data
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", errors="replace")
                lines.append(line)
                if match := LISTENING.search(line):
                    found.append(match.group(0))
                    listening.set()
    finally:
        listening.set()  # let the starter see that the process died
        done.set()


@asynccontextmanager
async def run_gateway(
    config_dir: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    expect_exit: int | None = 0,
    prefix: Sequence[str] = (),
) -> AsyncIterator[RunningGateway]:
    """``zeroclaw gateway --port 0 *args``; SIGTERM on exit (exit code checked when given).
    ``prefix`` runs it through a wrapper (``prlimit --nofile=256:256 --``)."""
    process = await trio.lowlevel.open_process(
        [*prefix, str(console_script("zeroclaw")), "gateway", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(config_dir, {"ZEROCLAW_LOG": "info", **(env or {})}),
    )
    assert process.stderr is not None
    lines = StderrLog()
    found: list[str] = []
    listening = trio.Event()
    stderr_done = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pump_stderr, process.stderr, lines, listening, found, stderr_done)
        try:
            with trio.fail_after(STARTUP_TIMEOUT):
                await listening.wait()
            assert found, "gateway did not start:\n" + "\n".join(lines.lines)
            listening_url = LISTENING.search(found[0])
            assert listening_url is not None
            scheme, host, port, prefix = listening_url.groups()
            code = await _operator_pairing_code(f"{scheme}://{host}:{port}{prefix}", config_dir)
            yield RunningGateway(process, int(port), config_dir, lines, code)
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(EXIT_TIMEOUT) as waited:
                        await process.wait()
                    if waited.cancelled_caught:
                        process.kill()
                        await process.wait()
                        raise AssertionError(
                            "gateway did not exit after SIGTERM:\n" + "\n".join(lines.lines)
                        )
                with trio.move_on_after(5):
                    await stderr_done.wait()
                nursery.cancel_scope.cancel()
    if expect_exit is not None:
        assert process.returncode == expect_exit, "\n".join(lines.lines)


async def _operator_pairing_code(base_url: str, config_dir: Path) -> str | None:
    """The active pairing code, as `zeroclaw gateway get-paircode` reads it (None when
    none is active, pairing is off, or the admin route refuses)."""
    secret_file = config_dir / ADMIN_SECRET_FILE
    if not secret_file.exists():
        return None
    base_url = base_url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:")
    async with httpx.AsyncClient(trust_env=False, timeout=10, verify=False) as client:
        response = await client.get(
            base_url + ADMIN_PAIRCODE_PATH,
            headers={ADMIN_HEADER: secret_file.read_text().strip()},
        )
    if response.status_code != 200:
        return None
    code = response.json().get("pairing_code")
    return str(code) if code else None


def ws_connect(
    url: str,
    *,
    token: str | None = None,
    how: str = "header",
    subprotocols: Sequence[str] = ("zeroclaw.acp.v1",),
    origin: str | None = None,
    max_size: int | None = None,
) -> connect:
    """A `websockets` client connection; ``how`` says where the token goes."""
    headers: dict[str, str] = {}
    offered = list(subprotocols)
    if token is not None:
        if how == "header":
            headers["Authorization"] = f"Bearer {token}"
        elif how == "subprotocol":
            offered.append(f"bearer.{token}")
        elif how == "query":
            url += ("&" if "?" in url else "?") + f"token={token}"
        else:
            raise ValueError(how)
    return connect(
        url,
        additional_headers=headers,
        subprotocols=offered or None,  # type: ignore[arg-type]
        origin=origin,  # type: ignore[arg-type]
        proxy=None,
        open_timeout=10,
        close_timeout=3,
        max_size=max_size,
        compression=None,
    )


class WsRpc(JsonRpcPeer):
    """A JSON-RPC peer over a `websockets` connection."""

    keep_session_info_apart = True

    def __init__(self, ws: ClientConnection) -> None:
        super().__init__()
        self.ws = ws
        self.frames: list[JsonDict] = []

    async def send_raw(self, text: str) -> None:
        await self.ws.send(text)

    async def _next_message(self) -> JsonDict:
        return await self.receive()

    async def receive(self, within: float = RECEIVE_TIMEOUT) -> JsonDict:
        """The next frame off the socket: responses that ``wait_response`` kept for their
        own ``wait_response`` are not given again."""
        with trio.fail_after(within):
            while True:
                raw = await self.ws.recv()
                message: JsonDict = json.loads(raw)
                self.frames.append(message)
                if not is_side_notice(message):
                    return message
                (self.session_info if is_session_info(message) else self.commands).append(message)

    async def new_session(self, cwd: Path, **params: Any) -> str:
        init = await self.call("initialize", {"protocolVersion": 1})
        assert "result" in init, init
        new = await self.call("session/new", {"cwd": str(cwd), **params})
        assert "result" in new, new
        session_id: str = new["result"]["sessionId"]
        return session_id


@dataclass
class RawWsClient:
    """A hand-rolled WebSocket client over a bare TCP stream (for misbehaving peers)."""

    stream: trio.SocketStream
    ws: Connection = field(default_factory=lambda: Connection(ConnectionType.CLIENT))
    leftover: bytes = b""

    @classmethod
    async def open(
        cls,
        port: int,
        token: str | None,
        path: str = "/acp",
        *,
        pause_after: int = 0,
        resume: trio.Event | None = None,
        paused: trio.Event | None = None,
    ) -> RawWsClient:
        """Connect and upgrade. With ``pause_after`` and ``resume``, the first
        ``pause_after`` bytes of the request head go out at once (then ``paused`` is set)
        and the rest once ``resume`` is set: a client caught mid-handshake."""
        # The request goes out in the same task step as the connect completes (no
        # happy-eyeballs tasks in between), as a client process of its own would send it.
        sock = trio.socket.socket()
        await sock.connect(("127.0.0.1", port))
        stream = trio.SocketStream(sock)
        key = base64.b64encode(os.urandom(16)).decode()
        head = [
            f"GET {path} HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if token is not None:
            head.append(f"Authorization: Bearer {token}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode()
        if resume is not None:
            await stream.send_all(request[:pause_after])
            request = request[pause_after:]
            if paused is not None:
                paused.set()
            await resume.wait()
        await stream.send_all(request)
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = await stream.receive_some(4096)
            assert chunk, "gateway closed during the handshake"
            response += chunk
        status_line, _, rest = response.partition(b"\r\n")
        assert b" 101 " in status_line, response
        return cls(stream, leftover=rest.partition(b"\r\n\r\n")[2])

    async def send_json(self, message: Mapping[str, Any]) -> None:
        await self.stream.send_all(self.ws.send(TextMessage(data=json.dumps(message))))

    async def next_event(self) -> Event:
        if self.leftover:
            self.ws.receive_data(self.leftover)
            self.leftover = b""
        while True:
            for event in self.ws.events():
                return event
            data = await self.stream.receive_some(65536)
            self.ws.receive_data(bytes(data) if data else None)

    async def next_json(self) -> JsonDict:
        """The next JSON message, a session's title (``session_info_update``) and slash
        commands (``available_commands_update``) skipped."""
        parts: list[str] = []
        while True:
            event = await self.next_event()
            if isinstance(event, TextMessage):
                parts.append(event.data)
                if event.message_finished:
                    parsed: JsonDict = json.loads("".join(parts))
                    parts = []
                    if not is_side_notice(parsed):
                        return parsed

    async def vanish(self) -> None:
        """Drop the TCP connection without a close frame (a crashed IDE, a pulled cable)."""
        await trio.aclose_forcefully(self.stream)
