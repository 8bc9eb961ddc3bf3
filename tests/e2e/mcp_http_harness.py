"""tests/e2e/mcp_fixture_server.py served over HTTP on 127.0.0.1, in a child process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import trio

FIXTURE = Path(__file__).with_name("mcp_fixture_server.py")
STARTUP_SECS = 30
Transport = Literal["streamable-http", "sse"]


@dataclass
class HttpMcpServer:
    process: trio.Process
    url: str
    """The MCP endpoint: ``…/mcp`` (streamable HTTP) or ``…/sse``."""

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    async def stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
            response = await client.get(self.base + "/stats")
        response.raise_for_status()
        stats: dict[str, Any] = response.json()
        return stats

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


async def _first_line(stream: trio.abc.ReceiveStream) -> str:
    data = b""
    while b"\n" not in data:
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise AssertionError("the MCP fixture server exited before listening")
        data += chunk
    return data.split(b"\n", 1)[0].decode()


@asynccontextmanager
async def serve_mcp_over_http(
    transport: Transport, *, token: str | None = None, port: int = 0
) -> AsyncIterator[HttpMcpServer]:
    """Run the fixture server; killed (if still running) when the block ends."""
    argv = [sys.executable, str(FIXTURE), "--transport", transport, "--port", str(port)]
    if token is not None:
        argv += ["--token", token]
    process = await trio.lowlevel.open_process(argv, stdout=subprocess.PIPE)
    assert process.stdout is not None
    server = None
    try:
        with trio.fail_after(STARTUP_SECS):
            line = await _first_line(process.stdout)
        assert line.startswith("listening "), line
        server = HttpMcpServer(process, line.split(" ", 1)[1])
        yield server
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            await process.stdout.aclose()
