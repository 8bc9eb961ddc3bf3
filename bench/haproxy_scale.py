"""Gateways behind HAProxy: turns/s with many connections, and failover after ``kill -9``.

Runs real ``zeroclaw gateway`` processes (echo provider, pairing off, one SQLite store per
setup) and a real HAProxy with the configuration of docs/deployment.md
(tests/e2e/haproxy_harness.py writes it), side by side in one run:

1. throughput: ``--connections`` WebSocket clients open a session each, then all run
   ``--turns`` prompts of ``--words`` streamed words at once; turns/s is all turns over the
   wall time, with prompt latency p50/p99. Three setups: one replica directly, one replica
   behind HAProxy (the proxy's own cost), two replicas behind HAProxy (one store);
2. failover: a real ``zeroclaw-acp-bridge`` with a session runs a long prompt; the replica
   holding it is ``kill -9``ed mid-turn; measured from the kill: the IDE's connection-lost
   answer, and the answer to the next prompt (bridge reconnect + session resume on the other
   replica + one turn). The killed replica is restarted between ``--rounds``.

On a 2-core machine the clients, HAProxy and the replicas share the cores, so two replicas
cannot double the figure here; the numbers show what the proxy costs and that nothing is lost.

    uv run python -m bench.haproxy_scale [--connections 50] [--turns 3] [--words 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from bench.gateway_load import Client, Stats, _connect, _percentile
from tests.e2e.gateway_harness import RunningGateway, run_gateway
from tests.e2e.haproxy_harness import replica_health, run_haproxy
from tests.e2e.helpers import RpcPipeClient, open_session, spawn_zeroclaw, unused_port
from tests.helpers import echo_config, write_config

QUIET = {"ZEROCLAW_LOG": "warning"}
LONG_PROMPT = " ".join(f"w{n}" for n in range(100))


def _replica_config(
    root: Path, name: str, *, behind_proxy: bool, delay_ms: int = 0, store_url: str | None = None
) -> Path:
    """A replica's config: one SQLite store under ``root``, or ``store_url``'s PostgreSQL."""
    document = echo_config(chunk_delay_ms=delay_ms)
    document["workspace_dir"] = str(root / "shared")
    if store_url is not None:
        document["storage"] = {"url": store_url}
    gateway: dict[str, Any] = {"require_pairing": False}
    if behind_proxy:
        gateway.update(trusted_proxies=["127.0.0.1"], proxy_protocol=True)
    document["gateway"] = gateway
    return write_config(root / f"replica-{name}", document)


def _make_dirs(root: Path) -> Path:
    """``root`` and its ``work`` directory (the sessions' cwd), which is returned."""
    cwd = root / "work"
    cwd.mkdir(parents=True)
    return cwd


class Replica:
    """One gateway process on a fixed port, restartable after it was killed."""

    def __init__(self, name: str, config_dir: Path) -> None:
        self.name = name
        self.config_dir = config_dir
        self.port = unused_port()
        self.gateway: RunningGateway | None = None
        self._scope = trio.CancelScope()

    async def start(self, nursery: trio.Nursery) -> None:
        self.gateway = await nursery.start(self._run)

    async def _run(self, task_status: trio.TaskStatus[RunningGateway]) -> None:
        with trio.CancelScope() as self._scope:
            async with run_gateway(
                self.config_dir, "--port", str(self.port), env=QUIET, expect_exit=None
            ) as gateway:
                task_status.started(gateway)
                await trio.sleep_forever()

    def stop(self) -> None:
        self._scope.cancel()


async def _throughput(url: str, connections: int, turns: int, words: int, cwd: Path) -> str:
    stats = Stats()
    clients: list[Client] = []
    ready = trio.Semaphore(0)
    release = trio.Event()

    async def hold() -> None:
        async with _connect(url) as ws:
            client = Client(ws, stats)
            await client.setup(str(cwd))
            clients.append(client)
            ready.release()
            await release.wait()

    async def run_turns(client: Client) -> None:
        for turn in range(1, turns + 1):
            await client.turn(turn, words)

    async with trio.open_nursery() as holders:
        for _ in range(connections):
            holders.start_soon(hold)
        with trio.fail_after(120):
            for _ in range(connections):
                await ready.acquire()
        started = time.perf_counter()
        async with trio.open_nursery() as load:
            for client in clients:
                load.start_soon(run_turns, client)
        elapsed = time.perf_counter() - started
        release.set()
    problems = stats.lost + stats.reordered + len(stats.errors)
    return (
        f"{connections * turns / elapsed:8.1f} turns/s  p50 "
        f"{_percentile(stats.latencies, 0.5) * 1000:6.1f} ms  p99 "
        f"{_percentile(stats.latencies, 0.99) * 1000:6.1f} ms  problems {problems}"
    )


async def _setup_throughput(
    root: Path,
    haproxy: str,
    replicas: int,
    behind_proxy: bool,
    args: argparse.Namespace,
    store_url: str | None = None,
) -> str:
    cwd = _make_dirs(root)
    async with trio.open_nursery() as nursery:
        members = [
            Replica(
                name, _replica_config(root, name, behind_proxy=behind_proxy, store_url=store_url)
            )
            for name in "ab"[:replicas]
        ]
        for member in members:
            await member.start(nursery)
        if behind_proxy:
            servers = [(member.name, member.port) for member in members]
            async with run_haproxy(haproxy, root, servers) as proxy:
                line = await _throughput(
                    proxy.ws_url, args.connections, args.turns, args.words, cwd
                )
        else:
            direct = f"ws://127.0.0.1:{members[0].port}/acp"
            line = await _throughput(direct, args.connections, args.turns, args.words, cwd)
        for member in members:
            member.stop()
    return line


async def _holder(replicas: Sequence[Replica]) -> Replica:
    with trio.fail_after(15):
        while True:
            for member in replicas:
                try:
                    if (await replica_health(member.port))["connections"] == 1:
                        return member
                except OSError:
                    continue
            await trio.sleep(0.02)


async def _failover(
    root: Path, haproxy: str, rounds: int, store_url: str | None = None
) -> tuple[list[float], list[float]]:
    cwd = _make_dirs(root)
    lost_after: list[float] = []
    answered_after: list[float] = []
    async with trio.open_nursery() as nursery:
        members = [
            Replica(
                name,
                _replica_config(root, name, behind_proxy=True, delay_ms=20, store_url=store_url),
            )
            for name in "ab"
        ]
        for member in members:
            await member.start(nursery)
        servers = [(member.name, member.port) for member in members]
        async with run_haproxy(haproxy, root, servers) as proxy:
            bridge_dir = root / "bridge"
            bridge_dir.mkdir()
            async with spawn_zeroclaw(
                ["--url", proxy.ws_url], config_dir=bridge_dir, script="zeroclaw-acp-bridge"
            ) as ide:
                session_id = await open_session(ide, cwd)
                for _ in range(rounds):
                    lost, answered = await _one_failover(ide, session_id, members, proxy, nursery)
                    lost_after.append(lost)
                    answered_after.append(answered)
        for member in members:
            member.stop()
    return lost_after, answered_after


async def _one_failover(
    ide: RpcPipeClient,
    session_id: str,
    members: Sequence[Replica],
    proxy: Any,
    nursery: trio.Nursery,
) -> tuple[float, float]:
    holder = await _holder(members)
    prompt_id = await ide.prompt_request(session_id, LONG_PROMPT)
    await ide.receive()  # the first streamed chunk: the turn is running
    assert holder.gateway is not None
    holder.gateway.process.kill()
    killed = time.perf_counter()
    lost = await ide.wait_response(prompt_id, within=30)
    lost_at = time.perf_counter()
    if lost.get("error", {}).get("data", {}).get("bridge") != "connection_lost":
        raise SystemExit(f"unexpected answer to the interrupted prompt: {json.dumps(lost)}")
    reply = await ide.call("session/prompt", {"sessionId": session_id, "prompt": "next"}, within=30)
    answered_at = time.perf_counter()
    if reply.get("result", {}).get("stopReason") != "end_turn":
        raise SystemExit(f"the next prompt failed: {json.dumps(reply)}")
    holder.stop()
    await holder.start(nursery)
    await proxy.wait_status(holder.name, "UP")
    return lost_at - killed, answered_at - killed


async def run(args: argparse.Namespace) -> int:
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise SystemExit("haproxy is not on PATH (apt-get install haproxy)")
    with tempfile.TemporaryDirectory(prefix="zc-haproxy-bench-", dir="/var/tmp") as temp:
        root = Path(temp)
        print(f"{args.connections} connections x {args.turns} turns x {args.words} words")
        for label, replicas, behind_proxy in (
            ("1 replica, direct           ", 1, False),
            ("1 replica behind HAProxy    ", 1, True),
            ("2 replicas behind HAProxy   ", 2, True),
        ):
            line = await _setup_throughput(
                root / label.strip().replace(" ", "-").replace(",", ""),
                haproxy,
                replicas,
                behind_proxy,
                args,
            )
            print(f"{label} {line}")
        lost, answered = await _failover(root / "failover", haproxy, args.rounds)
    print(f"failover after kill -9, {args.rounds} rounds (median / max):")
    print(
        f"  IDE told connection lost  {statistics.median(lost) * 1000:7.1f} ms / {max(lost) * 1000:.1f} ms"
    )
    print(f"  next prompt answered      {statistics.median(answered) * 1000:7.1f} ms / {max(answered) * 1000:.1f} ms")  # fmt: skip
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--words", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    sys.exit(trio.run(run, parser.parse_args()))


if __name__ == "__main__":
    main()
