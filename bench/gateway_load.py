"""Gateway under load: a reconnect storm, then N WebSocket connections streaming echo turns.

Starts a real ``zeroclaw gateway --port 0`` (echo provider, pairing off, its own temporary
config dir), then:

1. pending sockets: RSS of the gateway with ``PENDING_SOCKETS`` TCP connections that send
   nothing (from 127.0.0.2-5, under every gateway's per-address cap), per socket;
2. storm: all N clients open their WebSocket at the same instant from 127.0.0.1 (no
   throttle) and send ``initialize`` + ``session/new``; a handshake the gateway turns away
   (closed, reset, 503, timed out) is a *refusal*, retried as the bridge retries
   (acp_bridge.reconnect_policy.backoff: jittered, doubling). Reported: the time until all
   N are initialised, and the refusals;
3. idle memory: RSS with the N connections open and initialised, minus RSS before, over N;
4. load: every connection runs ``--turns`` prompts of ``--words`` words at the same time.
   The echo provider streams one ``agent_message_chunk`` per word; each chunk carries a
   sequence marker (``t<turn>w<index>``), so the client checks that every chunk of every
   turn arrived, exactly once, in order, before that turn's result;
5. restart: SIGTERM (the drain closes every idle connection with 1012), and a new gateway on
   the same port. Every client reconnects with the bridge's backoff and replays what the
   bridge replays (``initialize``, ``session/resume``), then runs one more turn. Reported:
   the time from the new gateway's "listening" line until all N are resumed, and the
   refusals after that line (a refused TCP connect while no gateway listens is not one).

The clients are `websockets` connections in this one process, with the bridge's backoff,
not bridge processes (about 30 MB each): a real bridge sends its upgrade the moment its
connect returns, while one process opening a thousand at once takes up to seconds to get
to each, so this storm is harsher on the gateway's idle-socket rules than a real one.

Prints, per gateway: connections, time to initialise all (storm) and to resume all
(restart), refusals, prompt latency p50/p99, turns/s and frames/s of all clients together,
the gateway's CPU, RSS per idle connection and per pending socket, and lost/reordered frame
counts. Targets: 1,000 connections initialised within 10 s with no refusal; zero lost
frames; < 256 KiB RSS per idle connection. Exit status 1 when a frame was lost or reordered
or a turn failed.

``--baseline-gateway [LABEL=]PATH`` (repeatable) adds another ``zeroclaw`` executable (say,
one installed from the commit before a change into a venv of its own); each of ``--rounds``
rounds runs every gateway once, in turn, and the medians are shown side by side, so that
before and after share the machine's load.

    uv run python bench/gateway_load.py [--connections 1000] [--turns 3] [--words 50]
        [--rounds 1] [--baseline-gateway [LABEL=]PATH ...]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import psutil
import tomli_w
import trio
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.trio.client import ClientConnection, connect

from acp_bridge.errors import describe_error
from acp_bridge.reconnect_policy import backoff

ZEROCLAW: Final = Path(sys.executable).parent / "zeroclaw"
LISTENING: Final = re.compile(r"gateway listening on http://[^ ]+:(\d+)")
KIB: Final = 1024
PENDING_SOCKETS: Final = 200
PENDING_SOURCES: Final = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
"""Idle sockets come from several addresses, 50 each: below every gateway's per-address cap
(64 before the storm rules), so none is cut while its memory is measured."""
STORM_TIMEOUT_SECS: Final = 120.0
HANDSHAKE_FAILURES: Final = (OSError, InvalidHandshake, TimeoutError, trio.BrokenResourceError)
"""What a turned-away upgrade raises: reset, closed before the response, 503, timed out."""


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
        self.refusals: Counter[str] = Counter()
        """Turned-away upgrades by cause, since the gateway last started listening."""


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

    async def resume(self, session_id: str, cwd: str, initialised: Countdown) -> None:
        """What the bridge replays on a new connection: initialize, then session/resume."""
        await self.call("initialize", {"protocolVersion": 1})
        initialised.tick()
        reply = await self.call("session/resume", {"sessionId": session_id, "cwd": cwd})
        if "result" not in reply:
            self.stats.errors.append(f"session/resume: {reply.get('error')}")
        self.session_id = session_id

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


async def _start_gateway(
    zeroclaw: Path, config_dir: Path, port: int = 0
) -> tuple[trio.Process, int]:
    process = await trio.lowlevel.open_process(
        [str(zeroclaw), "gateway", "--port", str(port)],
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


class Countdown:
    """Counts clients reaching a point; ``wait`` returns once all have."""

    def __init__(self, total: int) -> None:
        self.left = total
        self._done = trio.Event()
        if total <= 0:
            self._done.set()

    def tick(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self._done.set()

    async def wait(self) -> None:
        await self._done.wait()


class Storm:
    """The phases every client goes through together, and what they share."""

    def __init__(self, url: str, cwd: str, connections: int, turns: int, words: int) -> None:
        self.url = url
        self.cwd = cwd
        self.turns = turns
        self.words = words
        self.stats = Stats()
        self.initialised = Countdown(connections)
        self.loaded = Countdown(connections)
        self.reinitialised = Countdown(connections)
        self.resumed = Countdown(connections)
        self.turned_after_restart = Countdown(connections)
        self.load = trio.Event()
        self.restarting = False
        self.listening_since = 0.0
        """When the gateway last started listening: an upgrade attempted since then and
        turned away is a refusal (a connect refused while no gateway listens is not)."""

    def refused(self, exc: BaseException, attempted_at: float) -> None:
        if attempted_at >= self.listening_since:
            self.stats.refusals[describe_error(exc)] += 1


@asynccontextmanager
async def _open_as_the_bridge_does(storm: Storm) -> AsyncIterator[ClientConnection]:
    """A connection to the gateway; a refused or turned-away upgrade is retried after the
    bridge's jittered, doubling backoff."""
    async with AsyncExitStack() as stack:
        attempt = 0
        while True:
            attempted_at = trio.current_time()
            try:
                ws = await stack.enter_async_context(_connect(storm.url))
                break
            except HANDSHAKE_FAILURES as exc:
                storm.refused(exc, attempted_at)
                await trio.sleep(backoff(attempt))
                attempt += 1
        yield ws


async def _bench_client(storm: Storm) -> None:
    """One client through every phase: storm, load, restart (cancelled by the bench)."""
    session_id = ""
    while True:
        try:
            async with _open_as_the_bridge_does(storm) as ws:
                client = Client(ws, storm.stats)
                if not session_id:
                    await client.setup(storm.cwd)
                    session_id = client.session_id
                    storm.initialised.tick()
                    await storm.load.wait()
                    await _turns(client, storm.turns, storm.words)
                    storm.loaded.tick()
                else:
                    await client.resume(session_id, storm.cwd, storm.reinitialised)
                    storm.resumed.tick()
                    await client.turn(storm.turns + 1, storm.words)
                    storm.turned_after_restart.tick()
                while True:  # until the gateway closes the connection (the restart)
                    await ws.recv()
        except ConnectionClosed as exc:
            if not storm.restarting:
                storm.stats.errors.append(f"connection lost: {exc}")
                return


async def _idle_sockets(count: int, port: int) -> list[trio.SocketStream]:
    """``count`` TCP connections that send nothing, spread over ``PENDING_SOURCES``."""
    streams = []
    for index in range(count):
        sock = trio.socket.socket()
        await sock.bind((PENDING_SOURCES[index % len(PENDING_SOURCES)], 0))
        await sock.connect(("127.0.0.1", port))
        streams.append(trio.SocketStream(sock))
    return streams


@dataclass(frozen=True, slots=True)
class Result:
    """One gateway's figures from one run."""

    storm_secs: float
    storm_refusals: Counter[str]
    reconnect_secs: float
    restart_secs: float
    restart_refusals: Counter[str]
    latency_p50: float
    latency_p99: float
    turns: int
    frames: int
    elapsed: float
    gateway_cpu: float
    rss_before: int
    rss_idle: int
    per_connection: float
    per_pending_socket: float
    lost: int
    reordered: int
    errors: list[str]

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.elapsed

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.elapsed

    @property
    def cpu_share(self) -> float:
        return self.gateway_cpu / self.elapsed

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.reordered == 0 and not self.errors


async def _stop(process: trio.Process) -> None:
    process.send_signal(signal.SIGTERM)
    with trio.move_on_after(30):
        await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()


async def _rss_with_pending_sockets(gateway: psutil.Process, port: int) -> int:
    idle = await _idle_sockets(PENDING_SOCKETS, port)
    await trio.sleep(0.5)  # accepted, and each handler waiting for a first byte
    rss = int(gateway.memory_info().rss)
    for stream in idle:
        await trio.aclose_forcefully(stream)
    return rss


async def measure(zeroclaw: Path, connections: int, turns: int, words: int) -> Result:
    """Start ``zeroclaw gateway``; storm it with ``connections`` clients, load them all at
    once, then restart it under them."""
    with tempfile.TemporaryDirectory(prefix="zc-gateway-bench-") as temp:
        config_dir = Path(temp) / "cfg"
        workspace = Path(temp) / "work"
        workspace.mkdir()
        _config(config_dir)
        process, port = await _start_gateway(zeroclaw, config_dir)
        storm = Storm(f"ws://127.0.0.1:{port}/acp", str(workspace), connections, turns, words)
        stats = storm.stats
        try:
            # Each gateway's stderr drain ends with its process.
            async with trio.open_nursery() as work:
                work.start_soon(_drain_stderr, process)
                gateway = psutil.Process(process.pid)
                # Warm-up: load every module a turn needs before measuring memory.
                async with _connect(storm.url) as ws:
                    warm = Client(ws, Stats())
                    await warm.setup(str(workspace))
                    await warm.turn(0, 5)
                await trio.sleep(0.5)
                rss_before = gateway.memory_info().rss
                rss_pending = await _rss_with_pending_sockets(gateway, port)
                await trio.sleep(0.5)

                started = time.perf_counter()
                for _ in range(connections):
                    work.start_soon(_bench_client, storm)
                with trio.fail_after(STORM_TIMEOUT_SECS):
                    await storm.initialised.wait()
                storm_secs = time.perf_counter() - started
                storm_refusals = stats.refusals.copy()
                await trio.sleep(0.5)
                rss_idle = gateway.memory_info().rss

                frames_before = stats.frames
                cpu_before = sum(gateway.cpu_times()[:2])
                started = time.perf_counter()
                storm.load.set()
                await storm.loaded.wait()
                elapsed = time.perf_counter() - started
                gateway_cpu = sum(gateway.cpu_times()[:2]) - cpu_before
                frames = stats.frames - frames_before
                latencies = list(stats.latencies)

                storm.restarting, storm.listening_since = True, math.inf
                await _stop(process)
                process, _ = await _start_gateway(zeroclaw, config_dir, port)
                started = time.perf_counter()
                stats.refusals.clear()
                storm.listening_since = trio.current_time()
                work.start_soon(_drain_stderr, process)
                with trio.fail_after(STORM_TIMEOUT_SECS):
                    await storm.reinitialised.wait()
                reconnect_secs = time.perf_counter() - started
                with trio.fail_after(STORM_TIMEOUT_SECS):
                    await storm.resumed.wait()
                restart_secs = time.perf_counter() - started
                restart_refusals = stats.refusals.copy()
                with trio.fail_after(STORM_TIMEOUT_SECS):
                    await storm.turned_after_restart.wait()
                work.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await _stop(process)
    return Result(
        storm_secs=storm_secs,
        storm_refusals=storm_refusals,
        reconnect_secs=reconnect_secs,
        restart_secs=restart_secs,
        restart_refusals=restart_refusals,
        latency_p50=_percentile(latencies, 0.50),
        latency_p99=_percentile(latencies, 0.99),
        turns=connections * turns,
        frames=frames,
        elapsed=elapsed,
        gateway_cpu=gateway_cpu,
        rss_before=rss_before,
        rss_idle=rss_idle,
        per_connection=(rss_idle - rss_before) / connections,
        per_pending_socket=(rss_pending - rss_before) / PENDING_SOCKETS,
        lost=stats.lost,
        reordered=stats.reordered,
        errors=stats.errors,
    )


def _report(connections: int, turns: int, words: int, results: dict[str, list[Result]]) -> None:
    """Medians per gateway, side by side (one column each)."""
    labels = list(results)

    def row(name: str, cell: Callable[[list[Result]], str]) -> None:
        print(f"{name:<30}" + "".join(f"{cell(results[label]):>18}" for label in labels))

    def median(values: list[float]) -> float:
        return statistics.median(values)

    rounds = len(results[labels[0]])
    print(f"{connections} connections x {turns} turns x {words} streamed chunks, "
          f"median of {rounds} run(s) each, alternating")  # fmt: skip
    print(f"{'':<30}" + "".join(f"{label:>18}" for label in labels))
    row("storm: all initialised (s)", lambda runs: f"{median([r.storm_secs for r in runs]):.2f}")
    row(
        "storm: refusals (sum)",
        lambda runs: f"{sum(sum(r.storm_refusals.values()) for r in runs)}",
    )
    row(
        "restart: all initialised (s)",
        lambda runs: f"{median([r.reconnect_secs for r in runs]):.2f}",
    )
    row(
        "restart: all resumed (s)",
        lambda runs: f"{median([r.restart_secs for r in runs]):.2f}",
    )
    row(
        "restart: refusals (sum)",
        lambda runs: f"{sum(sum(r.restart_refusals.values()) for r in runs)}",
    )
    row(
        "prompt latency p50 (ms)",
        lambda runs: f"{median([r.latency_p50 for r in runs]) * 1000:.0f}",
    )
    row(
        "prompt latency p99 (ms)",
        lambda runs: f"{median([r.latency_p99 for r in runs]) * 1000:.0f}",
    )
    row("turns/s (all clients)", lambda runs: f"{median([r.turns_per_second for r in runs]):,.0f}")
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
    row(
        "RSS per pending socket (KiB)",
        lambda runs: f"{median([r.per_pending_socket / KIB for r in runs]):.1f}",
    )
    row("lost frames (sum)", lambda runs: f"{sum(r.lost for r in runs)}")
    row("reordered turns (sum)", lambda runs: f"{sum(r.reordered for r in runs)}")
    row("errors (sum)", lambda runs: f"{sum(len(r.errors) for r in runs)}")
    for label in labels:
        for result in results[label]:
            refusals = result.storm_refusals + result.restart_refusals
            if refusals:
                print(f"{label}: refusals {dict(refusals.most_common(3))}")
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
                f"round {round_number + 1} {label}: storm {result.storm_secs:.2f} s "
                f"({sum(result.storm_refusals.values())} refused), restart "
                f"{result.restart_secs:.2f} s ({sum(result.restart_refusals.values())} "
                f"refused), {result.frames_per_second:,.0f} frames/s, "
                f"{result.per_connection / KIB:.1f} KiB/conn",
                file=sys.stderr,
            )
            results[label].append(result)
    _report(connections, turns, words, results)
    return 0 if all(result.ok for runs in results.values() for result in runs) else 1


def _connect(url: str) -> connect:
    return connect(url, proxy=None, compression=None, max_size=None, open_timeout=60)


async def _turns(client: Client, turns: int, words: int) -> None:
    for turn in range(1, turns + 1):
        await client.turn(turn, words)


def _gateway_argument(value: str) -> tuple[str, Path]:
    label, separator, path = value.rpartition("=")
    return (label if separator else "baseline"), Path(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=1000)
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
    # One descriptor per client here too; the gateways inherit this limit.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sys.exit(trio.run(run, gateways, args.connections, args.turns, args.words, args.rounds))


if __name__ == "__main__":
    main()
