"""Gateway under load: N concurrent WebSocket connections streaming echo turns.

Starts a real ``zeroclaw gateway --port 0`` (echo provider, pairing off, its own temporary
config dir), then:

1. idle memory: RSS of the gateway process with no connection (after one warm-up turn),
   then with N connections open and initialised (``initialize`` + ``session/new``);
   the difference divided by N is the RSS per idle connection;
2. load: every connection runs ``--turns`` prompts of ``--words`` words at the same time.
   The echo provider streams one ``agent_message_chunk`` per word; each chunk carries a
   sequence marker (``t<turn>w<index>``), so the client checks that every chunk of every
   turn arrived, exactly once, in order, before that turn's result.

Prints connections, prompt latency p50/p99 (send → result), frames/s received by all
clients together, the gateway's CPU during the load, RSS per idle connection, and
lost/reordered frame counts. Targets: 200 concurrent streaming sessions with zero lost
frames; < 256 KiB RSS per idle connection. Exit status 1 when a frame was lost or
reordered.

Clients open their connections at most ``MAX_CONCURRENT_HANDSHAKES`` at a time: the gateway
closes the oldest unauthenticated socket of a peer address past 64 (gateway/pending.py), and
every client here is 127.0.0.1.

``--baseline-gateway [LABEL=]PATH`` (repeatable) adds another ``zeroclaw`` executable (say,
one installed from the commit before a change into a venv of its own); each of ``--rounds``
rounds runs every gateway once, in turn, and the medians are shown side by side, so that
before and after share the machine's load.

    uv run python bench/gateway_load.py [--connections 200] [--turns 3] [--words 50]
        [--rounds 1] [--baseline-gateway [LABEL=]PATH ...]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psutil
import tomli_w
import trio
from websockets.trio.client import ClientConnection, connect

ZEROCLAW: Final = Path(sys.executable).parent / "zeroclaw"
LISTENING: Final = re.compile(r"gateway listening on http://[^ ]+:(\d+)")
KIB: Final = 1024
MAX_CONCURRENT_HANDSHAKES: Final = 32
"""Below the gateway's 64 unauthenticated sockets per peer address."""


def _config(config_dir: Path) -> None:
    document: dict[str, Any] = {
        "schema_version": 3,
        "providers": {"models": {"echo": {"default": {"model": "echo"}}}},
        "agents": {
            "echo": {
                "model_provider": "echo.default",
                "risk_profile": "default",
                "runtime_profile": "default",
            }
        },
        "risk_profiles": {"default": {"level": "supervised"}},
        "runtime_profiles": {"default": {}},
        "gateway": {"require_pairing": False},
    }
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(tomli_w.dumps(document))


class Stats:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.frames = 0
        self.lost = 0
        self.reordered = 0
        self.errors: list[str] = []


class Client:
    """One connection: a JSON-RPC peer that checks chunk order per turn."""

    def __init__(self, ws: ClientConnection, stats: Stats) -> None:
        self.ws = ws
        self.stats = stats
        self.next_id = 0
        self.session_id = ""

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id
        await self.ws.send(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        while True:
            message: dict[str, Any] = json.loads(await self.ws.recv())
            self.stats.frames += 1
            if message.get("id") == request_id:
                return message

    async def setup(self, cwd: str) -> None:
        await self.call("initialize", {"protocolVersion": 1})
        reply = await self.call("session/new", {"cwd": cwd})
        self.session_id = reply["result"]["sessionId"]

    async def turn(self, turn: int, words: int) -> None:
        expected = [f"t{turn}w{index}" for index in range(words)]
        self.next_id += 1
        request_id = self.next_id
        started = time.perf_counter()
        await self.ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "session/prompt",
                    "params": {"sessionId": self.session_id, "prompt": " ".join(expected)},
                }
            )
        )
        seen: list[str] = []
        while True:
            message: dict[str, Any] = json.loads(await self.ws.recv())
            self.stats.frames += 1
            if message.get("id") == request_id:
                break
            update = message.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                seen.append(update["content"]["text"].strip())
        self.stats.latencies.append(time.perf_counter() - started)
        if "result" not in message:
            self.stats.errors.append(str(message.get("error")))
            return
        missing = set(expected) - set(seen)
        self.stats.lost += len(missing)
        if not missing and seen != expected:
            self.stats.reordered += 1


async def _start_gateway(zeroclaw: Path, config_dir: Path) -> tuple[trio.Process, int]:
    process = await trio.lowlevel.open_process(
        [str(zeroclaw), "gateway", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={"ZEROCLAW_CONFIG_DIR": str(config_dir), "ZEROCLAW_LOG": "warning", "PATH": ""},
    )
    assert process.stderr is not None
    buffer = b""
    with trio.fail_after(30):
        while (match := LISTENING.search(buffer.decode(errors="replace"))) is None:
            chunk = await process.stderr.receive_some(4096)
            if not chunk:
                raise SystemExit("gateway did not start:\n" + buffer.decode(errors="replace"))
            buffer += chunk
    return process, int(match.group(1))


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _drain_stderr(process: trio.Process) -> None:
    # Keep the pipe empty so the gateway never blocks on a log line.
    assert process.stderr is not None
    while await process.stderr.receive_some(65536):
        pass


@dataclass(frozen=True, slots=True)
class Result:
    """One gateway's figures from one run."""

    latency_p50: float
    latency_p99: float
    frames: int
    elapsed: float
    gateway_cpu: float
    rss_before: int
    rss_idle: int
    per_connection: float
    lost: int
    reordered: int
    errors: list[str]

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.elapsed

    @property
    def cpu_share(self) -> float:
        return self.gateway_cpu / self.elapsed

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.reordered == 0 and not self.errors


async def measure(zeroclaw: Path, connections: int, turns: int, words: int) -> Result:
    """Start ``zeroclaw gateway``, hold ``connections`` idle, then load them all at once."""
    with tempfile.TemporaryDirectory(prefix="zc-gateway-bench-") as temp:
        config_dir = Path(temp) / "cfg"
        workspace = Path(temp) / "work"
        workspace.mkdir()
        _config(config_dir)
        process, port = await _start_gateway(zeroclaw, config_dir)
        url = f"ws://127.0.0.1:{port}/acp"
        gateway = psutil.Process(process.pid)
        stats = Stats()
        try:
            async with trio.open_nursery() as background:
                background.start_soon(_drain_stderr, process)
                # Warm-up: load every module a turn needs before measuring memory.
                async with _connect(url) as ws:
                    warm = Client(ws, Stats())
                    await warm.setup(str(workspace))
                    await warm.turn(0, 5)
                await trio.sleep(0.5)
                rss_before = gateway.memory_info().rss

                async with trio.open_nursery() as holders:
                    clients: list[Client] = []
                    ready = trio.Semaphore(0)
                    handshakes = trio.Semaphore(MAX_CONCURRENT_HANDSHAKES)
                    release = trio.Event()
                    for _ in range(connections):
                        holders.start_soon(
                            _hold, url, str(workspace), stats, clients, (handshakes, ready), release
                        )
                    with trio.fail_after(120):
                        for _ in range(connections):
                            await ready.acquire()
                    await trio.sleep(0.5)
                    rss_idle = gateway.memory_info().rss

                    frames_before = stats.frames
                    cpu_before = sum(gateway.cpu_times()[:2])
                    started = time.perf_counter()
                    async with trio.open_nursery() as load:
                        for client in clients:
                            load.start_soon(_turns, client, turns, words)
                    elapsed = time.perf_counter() - started
                    gateway_cpu = sum(gateway.cpu_times()[:2]) - cpu_before
                    frames = stats.frames - frames_before
                    release.set()
                background.cancel_scope.cancel()
        finally:
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
    return Result(
        latency_p50=_percentile(stats.latencies, 0.50),
        latency_p99=_percentile(stats.latencies, 0.99),
        frames=frames,
        elapsed=elapsed,
        gateway_cpu=gateway_cpu,
        rss_before=rss_before,
        rss_idle=rss_idle,
        per_connection=(rss_idle - rss_before) / connections,
        lost=stats.lost,
        reordered=stats.reordered,
        errors=stats.errors,
    )


def _report(connections: int, turns: int, words: int, results: dict[str, list[Result]]) -> None:
    """Medians per gateway, side by side (one column each)."""
    labels = list(results)

    def row(name: str, cell: Callable[[list[Result]], str]) -> None:
        print(f"{name:<26}" + "".join(f"{cell(results[label]):>18}" for label in labels))

    def median(values: list[float]) -> float:
        return statistics.median(values)

    rounds = len(results[labels[0]])
    print(f"{connections} connections x {turns} turns x {words} streamed chunks, "
          f"median of {rounds} run(s) each, alternating")  # fmt: skip
    print(f"{'':<26}" + "".join(f"{label:>18}" for label in labels))
    row(
        "prompt latency p50 (ms)",
        lambda runs: f"{median([r.latency_p50 for r in runs]) * 1000:.0f}",
    )
    row(
        "prompt latency p99 (ms)",
        lambda runs: f"{median([r.latency_p99 for r in runs]) * 1000:.0f}",
    )
    row(
        "frames/s (all clients)", lambda runs: f"{median([r.frames_per_second for r in runs]):,.0f}"
    )
    row("gateway CPU (% of core)", lambda runs: f"{median([r.cpu_share for r in runs]) * 100:.0f}")
    row(
        "gateway CPU ms / 1k frames",
        lambda runs: f"{median([r.gateway_cpu / r.frames * 1e6 for r in runs]):.1f}",
    )
    row(
        "RSS, 0 connections (MiB)",
        lambda runs: f"{median([r.rss_before / KIB / KIB for r in runs]):.1f}",
    )
    row(
        "RSS per idle conn. (KiB)",
        lambda runs: f"{median([r.per_connection / KIB for r in runs]):.1f}",
    )
    row("lost frames (sum)", lambda runs: f"{sum(r.lost for r in runs)}")
    row("reordered turns (sum)", lambda runs: f"{sum(r.reordered for r in runs)}")
    row("errors (sum)", lambda runs: f"{sum(len(r.errors) for r in runs)}")
    for label in labels:
        for result in results[label]:
            if result.errors:
                print(f"{label}: {result.errors[:3]}")


async def run(
    gateways: dict[str, Path], connections: int, turns: int, words: int, rounds: int
) -> int:
    results: dict[str, list[Result]] = {label: [] for label in gateways}
    for round_number in range(rounds):
        for label, zeroclaw in gateways.items():
            result = await measure(zeroclaw, connections, turns, words)
            print(
                f"round {round_number + 1} {label}: {result.frames_per_second:,.0f} frames/s, "
                f"CPU {result.cpu_share * 100:.0f}%, {result.per_connection / KIB:.1f} KiB/conn",
                file=sys.stderr,
            )
            results[label].append(result)
    _report(connections, turns, words, results)
    return 0 if all(result.ok for runs in results.values() for result in runs) else 1


def _connect(url: str) -> connect:
    return connect(url, proxy=None, compression=None, max_size=None, open_timeout=60)


async def _hold(
    url: str,
    cwd: str,
    stats: Stats,
    clients: list[Client],
    slots: tuple[trio.Semaphore, trio.Semaphore],
    release: trio.Event,
) -> None:
    """Open one connection (while holding a handshake slot), then keep it until released."""
    handshakes, ready = slots
    await handshakes.acquire()
    holding = True
    try:
        async with _connect(url) as ws:
            client = Client(ws, stats)
            await client.setup(cwd)
            handshakes.release()
            holding = False
            clients.append(client)
            ready.release()
            await release.wait()
    finally:
        if holding:
            handshakes.release()


async def _turns(client: Client, turns: int, words: int) -> None:
    for turn in range(1, turns + 1):
        await client.turn(turn, words)


def _gateway_argument(value: str) -> tuple[str, Path]:
    label, separator, path = value.rpartition("=")
    return (label if separator else "baseline"), Path(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--words", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=1, help="runs per gateway, alternating")
    parser.add_argument(
        "--baseline-gateway",
        type=_gateway_argument,
        action="append",
        default=[],
        metavar="[LABEL=]PATH",
        help="another zeroclaw executable, measured alternately with this one",
    )
    args = parser.parse_args()
    gateways = {"this": ZEROCLAW, **dict(args.baseline_gateway)}
    sys.exit(trio.run(run, gateways, args.connections, args.turns, args.words, args.rounds))


if __name__ == "__main__":
    main()
