"""A real HAProxy in front of real `zeroclaw gateway` replicas, for the deployment tests.

``require_haproxy`` skips a test when ``haproxy`` is not on PATH, or fails it when
``ZEROCLAW_REQUIRE_HAPROXY_TESTS=1`` (CI sets it, so these tests cannot silently vanish).
``haproxy_config`` is the configuration docs/deployment.md describes, with short health
check intervals; ``run_haproxy`` runs it in the foreground and talks to its runtime API
over TCP. ``replica_health`` asks one replica directly for ``/health`` the way HAProxy's own
checks do (a PROXY v2 LOCAL header first), since replicas refuse header-less peers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from acp_server.gateway.proxy_protocol import ProxyCommand, encode_proxy_v2
from tests.helpers import poll_until
from tests.ports import unused_port

REQUIRE_HAPROXY_ENV: Final = "ZEROCLAW_REQUIRE_HAPROXY_TESTS"
BACKEND: Final = "gateways"
HEALTH_INTERVAL_MS: Final = 200


def require_haproxy() -> str:
    """The path of ``haproxy``; skips (or fails, under ``REQUIRE_HAPROXY_ENV=1``) without."""
    found = shutil.which("haproxy")
    if found is None:
        reason = "haproxy is not installed (apt-get install haproxy); .ci/run installs it"
        if os.environ.get(REQUIRE_HAPROXY_ENV) == "1":
            pytest.fail(f"{REQUIRE_HAPROXY_ENV}=1 but {reason}")
        pytest.skip(reason)
    return found


def haproxy_config(
    *,
    frontend_port: int,
    admin_port: int,
    servers: Sequence[tuple[str, int]],
    source: str | None = None,
    sticky_cookie: str | None = None,
    proxy_protocol: bool = True,
) -> str:
    """WebSocket-safe HAProxy settings: the tunnel timeout (1 h) is far above the gateway's
    ping interval, health checks on ``/health``, PROXY v2 to every replica (without
    ``proxy_protocol``: ``X-Forwarded-For`` instead). With ``source`` HAProxy connects to
    the replicas (checks included) from that address, so the replicas can trust it alone
    and still serve local admin commands from 127.0.0.1. With ``sticky_cookie`` HAProxy
    sets that cookie to the replica it chose, and sends the requests that carry it there:
    every request of one Streamable HTTP connection must reach the replica that holds it
    (the ACP draft requires clients to return cookies)."""
    lines = [
        "global",
        f"    stats socket ipv4@127.0.0.1:{admin_port} level admin",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        "    timeout client 60s",
        "    timeout server 60s",
        "    timeout tunnel 1h",
        "    retries 3",
        "    option redispatch 1",
        "frontend acp",
        f"    bind 127.0.0.1:{frontend_port}",
        f"    default_backend {BACKEND}",
        f"backend {BACKEND}",
        "    balance leastconn",
        "    option httpchk",
        "    http-check send meth GET uri /health ver HTTP/1.1 hdr Host 127.0.0.1",
        "    http-check expect status 200",
        f"    default-server check inter {HEALTH_INTERVAL_MS}ms fall 2 rise 2"
        + (" send-proxy-v2" if proxy_protocol else ""),
    ]
    if not proxy_protocol:
        lines.append("    option forwardfor")
    if source is not None:
        lines.append(f"    source {source}")
    if sticky_cookie is not None:
        lines.append(f"    cookie {sticky_cookie} insert indirect nocache httponly")
    lines += [
        f"    server {name} 127.0.0.1:{port}" + (f" cookie {name}" if sticky_cookie else "")
        for name, port in servers
    ]
    return "\n".join(lines) + "\n"


@dataclass
class RunningHaproxy:
    process: trio.Process
    port: int
    admin_port: int

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    async def runtime(self, command: str) -> str:
        """One runtime API command (``set server gateways/a state drain``); its output."""
        stream = await trio.open_tcp_stream("127.0.0.1", self.admin_port)
        async with stream:
            await stream.send_all(command.encode() + b"\n")
            output = b""
            with trio.fail_after(10):
                while chunk := await stream.receive_some(65536):
                    output += chunk
        return output.decode()

    async def server_status(self, server: str) -> str:
        """``UP``, ``DOWN``, ``DRAIN``, ``MAINT`` (or a transition such as ``UP 1/2``)."""
        rows = (await self.runtime("show stat")).splitlines()
        header = rows[0].lstrip("# ").split(",")
        status, name = header.index("status"), header.index("svname")
        for row in rows[1:]:
            fields = row.split(",")
            if len(fields) > status and fields[0] == BACKEND and fields[name] == server:
                return fields[status]
        raise AssertionError(f"no server {server} in {rows}")

    async def wait_status(self, server: str, status: str, within: float = 15.0) -> None:
        async def reached() -> bool:
            return await self.server_status(server) == status

        await poll_until(reached, within=within)


BIND_ATTEMPTS: Final = 5


async def _start_haproxy(
    binary: str,
    directory: Path,
    servers: Sequence[tuple[str, int]],
    source: str | None,
    sticky_cookie: str | None,
    proxy_protocol: bool,
) -> RunningHaproxy:
    """HAProxy answering on its runtime API, on ports tests/ports.py gave; started again on
    other ports should another program have bound one of them first."""
    config = directory / "haproxy.cfg"
    log = directory / "haproxy.stderr"
    for _ in range(BIND_ATTEMPTS):
        port, admin_port = unused_port(), unused_port()
        config.write_text(
            haproxy_config(
                frontend_port=port,
                admin_port=admin_port,
                servers=servers,
                source=source,
                sticky_cookie=sticky_cookie,
                proxy_protocol=proxy_protocol,
            )
        )
        check = await trio.run_process([binary, "-c", "-f", str(config)], capture_stdout=True, capture_stderr=True, check=False)  # fmt: skip
        assert check.returncode == 0, check.stderr.decode() + check.stdout.decode()
        with log.open("ab") as stderr:
            process = await trio.lowlevel.open_process(
                [binary, "-db", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        haproxy = RunningHaproxy(process, port, admin_port)

        async def answering(haproxy: RunningHaproxy = haproxy) -> bool:
            """Ours is up, or has exited; a listener on the port that is not HAProxy's
            runtime API (it bound first, and ours is about to exit) is neither."""
            if haproxy.process.returncode is not None:
                return True
            try:
                return "Name: HAProxy" in await haproxy.runtime("show info")
            except OSError:
                return False

        await poll_until(answering, within=10)
        if process.returncode is None:
            return haproxy
        if "cannot bind" not in log.read_text(errors="replace"):
            raise AssertionError(f"haproxy exited with {process.returncode}:\n{log.read_text()}")
    raise AssertionError(f"haproxy found no free ports in {BIND_ATTEMPTS} attempts")


@asynccontextmanager
async def run_haproxy(
    binary: str,
    directory: Path,
    servers: Sequence[tuple[str, int]],
    *,
    source: str | None = None,
    sticky_cookie: str | None = None,
    proxy_protocol: bool = True,
) -> AsyncIterator[RunningHaproxy]:
    """HAProxy in the foreground (``-db``) until the block ends; every server must be UP first.
    Its stderr goes to ``directory/haproxy.stderr`` and, at the end, to the test's stderr."""
    haproxy = await _start_haproxy(
        binary, directory, servers, source, sticky_cookie, proxy_protocol
    )
    process = haproxy.process
    try:
        for name, _ in servers:
            await haproxy.wait_status(name, "UP")
        yield haproxy
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        sys.stderr.write((directory / "haproxy.stderr").read_text(errors="replace"))


async def replica_health(port: int) -> dict[str, Any]:
    """``GET /health`` on one replica, announced with a PROXY v2 LOCAL header."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
        await stream.send_all(encode_proxy_v2(ProxyCommand.LOCAL) + head.encode())
        raw = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    health: dict[str, Any] = json.loads(raw.partition(b"\r\n\r\n")[2])
    return health
