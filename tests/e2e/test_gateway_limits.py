"""What one hostile client can cost a real `zeroclaw gateway`: memory for a message sent
in tiny fragments, and sockets held open before authentication."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import pytest
import trio
from wsproto.events import Pong

from tests.e2e.gateway_harness import RawWsClient, RunningGateway, WsRpc, run_gateway, ws_connect
from tests.helpers import TIMING_SENSITIVE, echo_config, write_config

pytestmark = [pytest.mark.e2e, TIMING_SENSITIVE]

MIB: Final = 1024 * 1024
TINY_FRAGMENTS: Final = 300_000
"""2-byte fragments of one unfinished message: 600 KB counted against the message limit."""
# Client frames are masked (RFC 6455 §5.3); a zero key leaves the payload as written.
FIRST_FRAGMENT: Final = b"\x01\x82\x00\x00\x00\x00{ "
NEXT_FRAGMENT: Final = b"\x00\x82\x00\x00\x00\x00  "
PING: Final = b"\x89\x80\x00\x00\x00\x00"


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


async def _hold_a_fragmented_message(gateway: RunningGateway, fragments: int) -> RawWsClient:
    """Open a connection and send ``fragments`` tiny fragments of a message never finished;
    returns once the gateway has read them all (a ping sent after them is answered)."""
    client = await RawWsClient.open(gateway.port, token=None)
    await client.stream.send_all(FIRST_FRAGMENT + NEXT_FRAGMENT * (fragments - 1) + PING)
    while not isinstance(await client.next_event(), Pong):
        pass
    return client


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
async def test_tiny_fragments_cost_what_they_count_and_memory_returns_after(
    tmp_path: Path,
) -> None:
    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(120):
        async with run_gateway(config_dir) as gateway:
            pid = gateway.process.pid
            # Warm up every code path once, so the baseline already includes them.
            warm = await _hold_a_fragmented_message(gateway, 10_000)
            await warm.vanish()
            await gateway.wait_for_connections(0)
            start = _rss_bytes(pid)

            hostile = await _hold_a_fragmented_message(gateway, TINY_FRAGMENTS)
            held = _rss_bytes(pid) - start
            # 600 KB counted; one Python string per fragment would be ~18 MB.
            assert held < 6 * MIB, f"the gateway grew by {held / MIB:.1f} MiB"
            await hostile.vanish()
            await gateway.wait_for_connections(0)
            after = _rss_bytes(pid) - start
            assert after < 3 * MIB, f"{after / MIB:.1f} MiB still held after the connection ended"


OPEN_FILE_LIMIT: Final = 256
IDLE_SOCKETS: Final = 300
"""More idle sockets than the gateway's open-file limit."""


def _few_files_prefix() -> list[str]:
    """Runs a child with ``OPEN_FILE_LIMIT`` as its soft and hard open-file limit: the
    gateway raises its soft limit to the hard one at start."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    return [prlimit, f"--nofile={OPEN_FILE_LIMIT}:{OPEN_FILE_LIMIT}", "--"]


@asynccontextmanager
async def _gateway_with_few_files(config_dir: Path) -> AsyncIterator[RunningGateway]:
    """A gateway whose open-file limit is ``OPEN_FILE_LIMIT``."""
    async with run_gateway(config_dir, prefix=_few_files_prefix()) as gateway:
        yield gateway


async def test_idle_sockets_never_lock_out_health_or_authenticated_clients(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(90):
        async with _gateway_with_few_files(config_dir) as gateway:
            token = await gateway.pair()
            async with ws_connect(gateway.ws_url(), token=token) as connected:
                paired = WsRpc(connected)
                assert "result" in await paired.call("initialize", {"protocolVersion": 1})
                idle = [
                    await trio.open_tcp_stream("127.0.0.1", gateway.port)
                    for _ in range(IDLE_SOCKETS)
                ]
                try:
                    # Served at once, not after the idle sockets time out.
                    with trio.fail_after(3):
                        health = await gateway.http("GET", "/health")
                    assert health.status_code == 200
                    with trio.fail_after(3):
                        assert "result" in await paired.call("initialize", {})
                        async with ws_connect(gateway.ws_url(), token=token) as fresh:
                            assert "result" in await WsRpc(fresh).call("initialize", {})
                    # The oldest idle sockets were closed to make room, the newest once
                    # their 5 s to send a request head are up.
                    with trio.fail_after(3):
                        assert await idle[0].receive_some(1) == b""
                    with trio.fail_after(8):
                        assert await idle[-1].receive_some(1) == b""
                finally:
                    for stream in idle:
                        await trio.aclose_forcefully(stream)
            assert "unauthenticated connections at the cap" in gateway.stderr()
