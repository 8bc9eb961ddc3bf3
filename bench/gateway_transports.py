"""ACP over the gateway's two transports, side by side: WebSocket and Streamable HTTP.

Starts one real ``zeroclaw gateway --port 0`` (echo provider, pairing off) and, in each of
``--rounds`` rounds, runs the same load over each transport in turn (so both share the
machine's load):

1. one client alone: ``--single-turns`` short turns (5 streamed chunks) one after the other;
   the latency of a turn (prompt sent → result read) shows each transport's fixed cost
   (over HTTP a POST on a new TCP connection, the answer on an open SSE stream);
2. ``--connections`` clients at once, each ``--turns`` turns of ``--words`` chunks: frames/s
   received by all clients together, prompt latency p50/p99, and the gateway's CPU per
   1,000 frames.

Every chunk carries a marker (``t<turn>w<index>``); a turn whose chunks did not all arrive,
once each and in order, before its result counts as lost or reordered (exit status 1).
The WebSocket client is the ``websockets`` library; the Streamable HTTP client posts with
httpx and reads the session's SSE stream with h11 (tests/e2e/streamable_http_client.py).

    uv run python bench/gateway_transports.py [--connections 50] [--turns 3] [--words 50]
        [--single-turns 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

import psutil
import trio
from bench.gateway_load import ZEROCLAW, _config, _drain_stderr, _percentile, _start_gateway
from tests.e2e.streamable_http_client import HttpAcpClient, SseReader
from websockets.trio.client import ClientConnection, connect

MAX_CONCURRENT_OPENINGS: Final = 32
"""Below the gateway's 64 unauthenticated sockets per peer address."""
SINGLE_TURN_WORDS: Final = 5

Message = dict[str, Any]


class Peer(Protocol):
    """One ACP client over either transport."""

    async def call(self, request: Message) -> Message: ...
    async def prompt(self, request: Message) -> tuple[Message, list[Message]]: ...


class WsPeer:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def call(self, request: Message) -> Message:
        return (await self.prompt(request))[0]

    async def prompt(self, request: Message) -> tuple[Message, list[Message]]:
        await self.ws.send(json.dumps(request))
        seen: list[Message] = []
        while True:
            message: Message = json.loads(await self.ws.recv())
            if message.get("id") == request["id"] and "method" not in message:
                return message, seen
            seen.append(message)


class HttpPeer:
    def __init__(self, client: HttpAcpClient, connection_stream: SseReader) -> None:
        self.client = client
        self.connection_stream = connection_stream
        self.session_stream: SseReader | None = None
        self.session_id: str | None = None

    async def call(self, request: Message) -> Message:
        await self.client.post(request)
        replies = await self.connection_stream.until(lambda m: m.get("id") == request["id"])
        return replies[-1]

    async def prompt(self, request: Message) -> tuple[Message, list[Message]]:
        assert self.session_stream is not None
        await self.client.post(request, session_id=self.session_id)
        seen = await self.session_stream.until(
            lambda m: m.get("id") == request["id"] and "method" not in m
        )
        return seen[-1], seen[:-1]


@asynccontextmanager
async def open_peer(transport: str, base_url: str, cwd: str) -> AsyncIterator[tuple[Peer, str]]:
    """An initialised client with one session: the peer and the session id."""
    new_params = {"cwd": cwd, "mcpServers": []}
    async with AsyncExitStack() as stack:
        if transport == "ws":
            ws = await stack.enter_async_context(
                connect(base_url.replace("http", "ws", 1) + "/acp", proxy=None, max_size=None)
            )
            peer = WsPeer(ws)
            await peer.call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
            new = await peer.call(
                {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": new_params}
            )
            yield peer, new["result"]["sessionId"]
            return
        client = HttpAcpClient(base_url)
        stack.push_async_callback(client.aclose)
        await client.initialize()
        http_peer = HttpPeer(client, await stack.enter_async_context(client.events()))
        new = await http_peer.call(client.request("session/new", new_params))
        session_id = new["result"]["sessionId"]
        http_peer.session_id = session_id
        http_peer.session_stream = await stack.enter_async_context(client.events(session_id))
        yield http_peer, session_id


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    frames: int = 0
    lost: int = 0
    reordered: int = 0
    errors: list[str] = field(default_factory=list)


async def turn(peer: Peer, session_id: str, number: int, words: int, tally: Tally) -> None:
    expected = [f"t{number}w{index}" for index in range(words)]
    request = {
        "jsonrpc": "2.0",
        "id": 1000 + number,
        "method": "session/prompt",
        "params": {"sessionId": session_id, "prompt": " ".join(expected)},
    }
    started = time.perf_counter()
    answer, seen = await peer.prompt(request)
    tally.latencies.append(time.perf_counter() - started)
    tally.frames += len(seen) + 1
    if "result" not in answer:
        tally.errors.append(str(answer.get("error")))
        return
    chunks = [
        m["params"]["update"]["content"]["text"].strip()
        for m in seen
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
    ]
    missing = set(expected) - set(chunks)
    tally.lost += len(missing)
    if not missing and chunks != expected:
        tally.reordered += 1


@dataclass(frozen=True, slots=True)
class Round:
    single_p50: float
    single_p99: float
    load_p50: float
    load_p99: float
    frames_per_second: float
    cpu_per_kframe_ms: float
    lost: int
    reordered: int
    errors: list[str]


async def measure(
    transport: str, base_url: str, cwd: str, gateway: psutil.Process, args: argparse.Namespace
) -> Round:
    single = Tally()
    async with open_peer(transport, base_url, cwd) as (peer, session_id):
        for number in range(args.single_turns):
            await turn(peer, session_id, number, SINGLE_TURN_WORDS, single)
    load = Tally()
    openings = trio.Semaphore(MAX_CONCURRENT_OPENINGS)
    ready = trio.Semaphore(0)
    go, finished = trio.Event(), trio.Semaphore(0)

    async def one_client() -> None:
        # Each client lives in its own task: a connection's context (the WebSocket
        # client's nursery) is entered and left by the same task.
        async with openings:
            opened = open_peer(transport, base_url, cwd)
            peer, session_id = await opened.__aenter__()
        try:
            ready.release()
            await go.wait()
            await _turns(peer, session_id, args, load)
            finished.release()
            await closing.wait()
        finally:
            await opened.__aexit__(None, None, None)

    closing = trio.Event()
    async with trio.open_nursery() as nursery:
        for _ in range(args.connections):
            nursery.start_soon(one_client)
        for _ in range(args.connections):
            await ready.acquire()
        cpu_before = sum(gateway.cpu_times()[:2])
        started = time.perf_counter()
        go.set()
        for _ in range(args.connections):
            await finished.acquire()
        elapsed = time.perf_counter() - started
        cpu = sum(gateway.cpu_times()[:2]) - cpu_before
        closing.set()
    return Round(
        single_p50=_percentile(single.latencies, 0.5),
        single_p99=_percentile(single.latencies, 0.99),
        load_p50=_percentile(load.latencies, 0.5),
        load_p99=_percentile(load.latencies, 0.99),
        frames_per_second=load.frames / elapsed,
        cpu_per_kframe_ms=cpu / load.frames * 1e6,
        lost=single.lost + load.lost,
        reordered=single.reordered + load.reordered,
        errors=single.errors + load.errors,
    )


async def _turns(peer: Peer, session_id: str, args: argparse.Namespace, tally: Tally) -> None:
    for number in range(1, args.turns + 1):
        await turn(peer, session_id, number, args.words, tally)


def _report(args: argparse.Namespace, results: dict[str, list[Round]]) -> None:
    labels = list(results)

    def row(name: str, cell: Callable[[list[Round]], str]) -> None:
        print(f"{name:<34}" + "".join(f"{cell(results[label]):>18}" for label in labels))

    def median(pick: Callable[[Round], float], scale: float = 1.0) -> Callable[[list[Round]], str]:
        return lambda runs: f"{statistics.median(pick(r) for r in runs) * scale:,.1f}"

    print(
        f"one client x {args.single_turns} turns of {SINGLE_TURN_WORDS} chunks, then "
        f"{args.connections} clients x {args.turns} turns x {args.words} chunks; "
        f"median of {args.rounds} round(s), transports alternating"
    )
    print(f"{'':<34}" + "".join(f"{label:>18}" for label in labels))
    row("one client: turn latency p50 (ms)", median(lambda r: r.single_p50, 1000))
    row("one client: turn latency p99 (ms)", median(lambda r: r.single_p99, 1000))
    row("load: prompt latency p50 (ms)", median(lambda r: r.load_p50, 1000))
    row("load: prompt latency p99 (ms)", median(lambda r: r.load_p99, 1000))
    row("load: frames/s (all clients)", median(lambda r: r.frames_per_second))
    row("load: gateway CPU ms / 1k frames", median(lambda r: r.cpu_per_kframe_ms))
    row("lost frames (sum)", lambda runs: str(sum(r.lost for r in runs)))
    row("reordered turns (sum)", lambda runs: str(sum(r.reordered for r in runs)))
    row("errors (sum)", lambda runs: str(sum(len(r.errors) for r in runs)))


async def run(args: argparse.Namespace) -> int:
    results: dict[str, list[Round]] = {"WebSocket": [], "Streamable HTTP": []}
    with tempfile.TemporaryDirectory(prefix="zc-transports-bench-") as temp:
        config_dir, workspace = Path(temp) / "cfg", Path(temp) / "work"
        workspace.mkdir()
        _config(config_dir)
        process, port = await _start_gateway(ZEROCLAW, config_dir)
        gateway = psutil.Process(process.pid)
        base_url = f"http://127.0.0.1:{port}"
        try:
            async with trio.open_nursery() as background:
                background.start_soon(_drain_stderr, process)
                for number in range(args.rounds):
                    for label, transport in (("WebSocket", "ws"), ("Streamable HTTP", "http")):
                        result = await measure(transport, base_url, str(workspace), gateway, args)
                        results[label].append(result)
                        print(
                            f"round {number + 1} {label}: {result.frames_per_second:,.0f} "
                            f"frames/s, single-turn p50 {result.single_p50 * 1000:.1f} ms",
                            file=sys.stderr,
                        )
                background.cancel_scope.cancel()
        finally:
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
    _report(args, results)
    failed = any(r.lost or r.reordered or r.errors for runs in results.values() for r in runs)
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--words", type=int, default=50)
    parser.add_argument("--single-turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    sys.exit(trio.run(run, parser.parse_args()))


if __name__ == "__main__":
    main()
