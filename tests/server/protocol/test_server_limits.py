"""What one peer can make a connection hold: bytes queued, bytes in flight, echoed values."""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import trio
import trio.testing

from acp_server.protocol.connection import AcpConnection
from acp_server.protocol.limits import ByteBudget, shortened
from acp_server.protocol.services.context import AcpApp
from tests.helpers import TIMING_SENSITIVE, make_config, session_dir
from tests.server.server_harness import MemoryTransport, open_server

MIB = 1024 * 1024


class StalledTransport(MemoryTransport):
    """A transport whose client reads only while ``reading`` is set (else writes block),
    and whose client's sends wait for the server to read them."""

    def __init__(self) -> None:
        super().__init__()
        self.client_send, self._server_receive = trio.open_memory_channel[str](0)
        self.reading = trio.Event()
        self.reading.set()
        self.received: list[dict[str, Any]] = []
        self.arrived = trio.Event()

    async def send_message(self, payload: bytes) -> None:
        await self.reading.wait()
        if len(payload) < 4096:  # only the small answers are kept, for the test to read
            self.received.append(json.loads(payload))
        self.arrived.set()
        self.arrived = trio.Event()

    async def aclose(self) -> None:
        pass


async def flood_a_client_that_stops_reading(
    tmp_path: Path, measure: Callable[[], int]
) -> tuple[int, int, int]:
    """One connection whose client stops reading, then sends 48 session/event requests
    naming a 1 MiB event type (each answered with it), then reads again and hangs up.

    Returns ``measure()`` before, once the connection is stalled (every task blocked),
    and after it ended.
    """
    app = AcpApp(
        config=make_config(tmp_path),
        store=None,
        tools_factory=lambda _agent, _workspace, _config: {},
        launch_dir=session_dir(tmp_path),
    )
    transport = StalledTransport()
    connection = AcpConnection(
        app, transport, max_outbox_bytes=4 * MIB, max_in_flight_request_bytes=4 * MIB
    )
    gc.collect()
    start = measure()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await transport.client_send.send(
                json.dumps({"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {}})
            )
            while not transport.received:  # the answer to session/new
                await transport.arrived.wait()
            session_id = transport.received[0]["result"]["sessionId"]
            transport.reading = trio.Event()  # the client stops reading

            async def flood() -> None:
                for request_id in range(1, 49):
                    params = {"sessionId": session_id, "type": "x" * MIB}
                    request = {"jsonrpc": "2.0", "id": request_id, "method": "session/event"}
                    await transport.client_send.send(json.dumps({**request, "params": params}))
                await transport.client_send.aclose()

            nursery.start_soon(flood)
            await trio.testing.wait_all_tasks_blocked()
            stalled = measure()
            transport.reading.set()  # the client reads again; the rest is answered
    gc.collect()
    return start, stalled, measure()


async def test_a_client_that_never_reads_holds_bounded_memory_and_it_is_freed(
    tmp_path: Path,
) -> None:
    # Without byte limits the 48 answers (and their requests) pile up in the outbox; with
    # them the connection holds a few MiB, and all of it goes when the connection ends.
    tracemalloc.start()
    try:
        start, stalled, end = await flood_a_client_that_stops_reading(
            tmp_path, lambda: tracemalloc.get_traced_memory()[0]
        )
    finally:
        tracemalloc.stop()
    assert stalled - start < 24 * MIB, f"held {(stalled - start) / MIB:.1f} MiB while stalled"
    assert end - start < 2 * MIB, f"{(end - start) / MIB:.1f} MiB left after the connection"


@TIMING_SENSITIVE
async def test_resident_memory_returns_near_its_start_after_such_a_connection(
    tmp_path: Path,
) -> None:
    process = psutil.Process()
    await flood_a_client_that_stops_reading(tmp_path, lambda: 0)  # warm up: lazy imports
    start, stalled, end = await flood_a_client_that_stops_reading(
        tmp_path, lambda: int(process.memory_info().rss)
    )
    assert stalled - start < 40 * MIB, f"RSS grew {(stalled - start) / MIB:.1f} MiB"
    assert end - start < 8 * MIB, f"RSS {(end - start) / MIB:.1f} MiB above its start"


async def test_a_huge_cwd_is_not_echoed_back(tmp_path: Path) -> None:
    huge = "/nope/" + "a" * (4 * MIB)
    with trio.fail_after(10):
        async with open_server(make_config(tmp_path)) as client:
            error = await client.error("session/new", {"cwd": huge})
            unknown = await client.error("x" * MIB, {})
    assert error["code"] == -32602
    assert "cwd is not a usable directory" in error["message"]
    assert len(error["message"]) < 2048
    assert unknown["code"] == -32601
    assert len(unknown["message"]) < 2048
    assert "more characters" in unknown["message"]


async def test_a_cwd_with_a_nul_byte_is_an_invalid_param(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_server(make_config(tmp_path)) as client:
            error = await client.error("session/new", {"cwd": f"{tmp_path}/a\0b"})
            still_serving = await client.result("session/new", {"cwd": str(session_dir(tmp_path))})
    assert error["code"] == -32602
    assert "NUL" in error["message"]
    assert "\\x00" in error["message"]  # shown escaped, never as a raw NUL
    assert still_serving["sessionId"]


def test_shortened_says_how_much_was_left_out() -> None:
    assert shortened("abc", 3) == "abc"
    assert shortened("abcdef", 3) == "abc... (3 more characters)"


async def test_a_byte_budget_waits_until_bytes_are_given_back() -> None:
    budget = ByteBudget(10)
    assert budget.try_take(8)
    assert not budget.try_take(3)
    taken = trio.Event()

    async def take() -> None:
        await budget.take(3)
        taken.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()
        assert not taken.is_set()
        assert not budget.try_take(1)  # a waiter is ahead: no overtaking
        budget.give_back(8)
        await taken.wait()
    assert budget.held == 3
    budget.give_back(3)
    assert budget.try_take(100)  # one item larger than the budget passes alone
