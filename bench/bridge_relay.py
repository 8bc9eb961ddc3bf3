"""What the bridge costs: round-trip latency and update throughput, bridge vs direct.

A small `websockets` (asyncio) server runs in a child process on 127.0.0.1 and answers two
requests: ``bench/echo`` (an immediate reply) and ``bench/stream`` (``count`` pre-encoded
``session/update`` notifications of ``size`` bytes, then a reply). The same client work is
done twice in one run:

* direct: a `websockets` trio client talks to the server;
* bridge: the real ``zeroclaw-acp-bridge`` process is spawned against the same server and
  driven through its stdin/stdout pipes, as an IDE would.

Reported: round-trip p50/p99 (and what the bridge adds), and MB/s of ``session/update``
payload delivered to the client. Targets: < 0.5 ms added per round trip at p50 on
loopback; >= 50 MB/s relayed.

Each size is streamed ``--rounds`` times, direct and bridge alternately; medians are shown,
next to what websockets' own frame parser manages on the same frames in memory (the ceiling
for any websockets-based client, so for the bridge too).

    uv run python bench/bridge_relay.py [--round-trips N] [--update-mib N] [--rounds N]
        [--update-bytes N ...] [--baseline-bridge PATH]

``--baseline-bridge`` adds a third client, another bridge executable (say, one installed
from the commit before a change into a venv of its own), so that before and after are
measured side by side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import trio
from websockets.asyncio.server import ServerConnection, serve
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.protocol import State
from websockets.trio.client import connect
from websockets.uri import parse_uri

BRIDGE: Final = Path(sys.executable).parent / "zeroclaw-acp-bridge"
MIB: Final = 1024 * 1024
BENCH_SESSION_ID: Final = "0b7a8f3e-5d2c-4c61-9a7e-3f1d2b6c8e90"
"""A UUID like the gateway's, so small frames have a realistic envelope."""


# --- the server (child process) ---------------------------------------------------------


def _update_frame(size: int) -> str:
    envelope = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": BENCH_SESSION_ID,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": ""},
            },
        },
    }
    overhead = len(json.dumps(envelope, separators=(",", ":")))
    envelope["params"]["update"]["content"]["text"] = "x" * max(0, size - overhead)  # type: ignore[index]
    return json.dumps(envelope, separators=(",", ":"))


async def _stream_updates(websocket: ServerConnection, count: int, size: int) -> None:
    """Write ``count`` update frames straight to the transport, many per write: the server
    must not be what limits the measured throughput (per-message ``send()`` would be)."""
    wire = Frame(Opcode.TEXT, _update_frame(size).encode()).serialize(mask=False)
    per_write = max(1, MIB // len(wire))
    transport = websocket.transport
    sent = 0
    while sent < count:
        batch = min(per_write, count - sent)
        transport.write(wire * batch)
        sent += batch
        await websocket.drain()  # the connection's own flow control (pause/resume writing)


async def _serve() -> None:
    async def handler(websocket: ServerConnection) -> None:
        async for message in websocket:
            request = json.loads(message)
            params = request.get("params") or {}
            if request.get("method") == "bench/stream":
                await _stream_updates(websocket, int(params["count"]), int(params["size"]))
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": {}}
            await websocket.send(json.dumps(reply, separators=(",", ":")))

    async with serve(
        handler, "127.0.0.1", 0, compression=None, max_size=64 * MIB, ping_interval=None
    ) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        await asyncio.Future()  # until killed


# --- the clients -------------------------------------------------------------------------


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return json.dumps(body, separators=(",", ":")).encode()


class DirectClient:
    def __init__(self, url: str) -> None:
        self.url = url

    async def run(
        self,
        work: Callable[
            [Callable[[bytes], Awaitable[None]], Callable[[], Awaitable[bytes]]], Awaitable[Any]
        ],
    ) -> Any:
        async with connect(
            self.url, compression=None, max_size=64 * MIB, ping_interval=None, proxy=None
        ) as websocket:

            async def send(data: bytes) -> None:
                await websocket.send(data, text=True)

            async def receive() -> bytes:
                return await websocket.recv(decode=False)

            return await work(send, receive)


class BridgeClient:
    def __init__(self, config_dir: Path, executable: Path = BRIDGE) -> None:
        self.config_dir = config_dir
        self.executable = executable

    async def run(
        self,
        work: Callable[
            [Callable[[bytes], Awaitable[None]], Callable[[], Awaitable[bytes]]], Awaitable[Any]
        ],
    ) -> Any:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZEROCLAW_")}
        process = await trio.lowlevel.open_process(
            [str(self.executable), "--config-dir", str(self.config_dir), "--ping-interval", "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        stdin, stdout = process.stdin, process.stdout
        # Lines are split a whole read at a time (in C), as a buffered reader in an IDE
        # would: the client must not be what limits the measured relay throughput.
        lines: deque[bytes] = deque()
        partial = b""

        async def send(data: bytes) -> None:
            await stdin.send_all(data + b"\n")

        async def receive() -> bytes:
            nonlocal partial
            while not lines:
                chunk = await stdout.receive_some(1024 * 1024)
                if not chunk:
                    raise RuntimeError("the bridge exited")
                parts = (partial + bytes(chunk)).split(b"\n")
                partial = parts.pop()
                lines.extend(parts)
            return lines.popleft()

        try:
            return await work(send, receive)
        finally:
            await stdin.aclose()
            if await process.wait() != 0:
                raise RuntimeError(f"the bridge exited with {process.returncode}")


# --- the measurements --------------------------------------------------------------------


def round_trips(count: int) -> Callable[..., Awaitable[list[float]]]:
    async def work(
        send: Callable[[bytes], Awaitable[None]], receive: Callable[[], Awaitable[bytes]]
    ) -> list[float]:
        samples = []
        for request_id in range(count + count // 10):
            started = time.perf_counter()
            await send(_request(request_id, "bench/echo"))
            await receive()
            if request_id >= count // 10:  # the first tenth warms up
                samples.append(time.perf_counter() - started)
        return samples

    return work


def stream(count: int, size: int) -> Callable[..., Awaitable[float]]:
    async def work(
        send: Callable[[bytes], Awaitable[None]], receive: Callable[[], Awaitable[bytes]]
    ) -> float:
        await send(_request(0, "bench/stream", {"count": 50, "size": size}))  # warm-up
        for _ in range(51):
            await receive()
        started = time.perf_counter()
        await send(_request(1, "bench/stream", {"count": count, "size": size}))
        received = 0
        for _ in range(count):
            received += len(await receive())
        reply = await receive()
        elapsed = time.perf_counter() - started
        assert b'"id":1' in reply, reply[:100]
        return received / elapsed / MIB

    return work


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as temp:
        server = await trio.lowlevel.open_process(
            [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE
        )
        try:
            assert server.stdout is not None
            with trio.fail_after(20):
                announced = b""
                while not announced.endswith(b"\n"):
                    announced += await server.stdout.receive_some(64)
            port = int(announced)
            config_dir = Path(temp) / "zeroclaw"
            config_dir.mkdir()
            (config_dir / "config.toml").write_text(
                f"[gateway]\nport = {port}\nrequire_pairing = false\n"
            )
            clients: dict[str, DirectClient | BridgeClient] = {
                "direct": DirectClient(f"ws://127.0.0.1:{port}/acp"),
                "bridge": BridgeClient(config_dir),
            }
            if args.baseline_bridge is not None:
                clients["baseline"] = BridgeClient(config_dir, args.baseline_bridge)
            latency: dict[str, list[float]] = {}
            throughput: dict[tuple[str, int], list[float]] = {}
            # Every measure alternates between the clients, round after round, so that load
            # from other work on the machine falls on all of them alike.
            per_round = max(10, args.round_trips // args.rounds)
            for _ in range(args.rounds):
                for name, client in clients.items():
                    latency.setdefault(name, []).extend(await client.run(round_trips(per_round)))
            for _ in range(args.rounds):
                for size in args.update_bytes:
                    count = max(100, args.update_mib * MIB // size)
                    for name, client in clients.items():
                        rate = await client.run(stream(count, size))
                        throughput.setdefault((name, size), []).append(rate)
        finally:
            server.kill()
            await server.wait()

    print(f"round trip, {args.round_trips} requests (ms):")
    print(f"  {'':8} {'p50':>8} {'p99':>8} {'mean':>8}")
    for name, samples in latency.items():
        ms = [s * 1000 for s in samples]
        print(
            f"  {name:8} {_percentile(ms, 0.5):8.3f} {_percentile(ms, 0.99):8.3f}"
            f" {statistics.fmean(ms):8.3f}"
        )
    for name in [name for name in latency if name != "direct"]:
        added = (_percentile(latency[name], 0.5) - _percentile(latency["direct"], 0.5)) * 1000
        print(f"  {name} adds {added:.3f} ms at p50 (target < 0.5 ms)")
    print(
        f"session/update throughput, ~{args.update_mib} MiB per run, median of {args.rounds}"
        " (MB/s of frames):"
    )
    for size in args.update_bytes:
        direct = statistics.median(throughput["direct", size])
        bridged = statistics.median(throughput["bridge", size])
        baseline = ""
        if ("baseline", size) in throughput:
            baseline = f"  baseline {statistics.median(throughput['baseline', size]):7.1f}"
        print(
            f"  {size:>7}-byte updates: direct {direct:7.1f}  bridge {bridged:7.1f}{baseline}"
            f"  ({bridged / direct:.0%} of direct; target >= 50)"
            f"  [websockets frame parser alone: {parser_ceiling(size):7.1f}]"
        )
    print(
        "  (direct: a websockets trio client's recv() loop; the parser alone: websockets'"
        " sans-I/O\n   protocol decoding the same frames in memory, no I/O, no event loop)"
    )


def parser_ceiling(size: int, runs: int = 3) -> float:
    """MB/s websockets' sans-I/O protocol parses ``size``-byte update frames at, in memory
    (best of ``runs``): the most any websockets-based client (direct or bridge) could get."""
    return max(_parse_rate(size) for _ in range(runs))


def _parse_rate(size: int, total_bytes: int = 16 * MIB) -> float:
    protocol = ClientProtocol(parse_uri("ws://127.0.0.1/acp"), state=State.OPEN, max_size=None)
    wire = Frame(Opcode.TEXT, _update_frame(size).encode()).serialize(mask=False)
    per_chunk = max(1, 64 * 1024 // len(wire))
    chunk = wire * per_chunk
    parsed = 0
    started = time.perf_counter()
    while parsed < total_bytes:
        protocol.receive_data(chunk)
        for event in protocol.events_received():
            assert isinstance(event, Frame)
            parsed += len(event.data)
    return parsed / (time.perf_counter() - started) / MIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--update-mib", type=int, default=64)
    parser.add_argument(
        "--update-bytes",
        type=int,
        nargs="+",
        default=[256, 1024, 16 * 1024, 256 * 1024],
        help="update frame sizes (a streamed agent_message_chunk is ~150-300 bytes)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs per measure, alternating")
    parser.add_argument(
        "--baseline-bridge",
        type=Path,
        metavar="PATH",
        help="another zeroclaw-acp-bridge executable (e.g. one installed from an earlier"
        " commit into its own venv), measured alternately with this one",
    )
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    trio.run(bench, args)


if __name__ == "__main__":
    main()
