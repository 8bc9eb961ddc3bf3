"""Gateways behind HAProxy on PostgreSQL beside SQLite, and revocation across replicas.

Real ``zeroclaw gateway`` processes (echo provider), a real HAProxy with the configuration of
docs/deployment.md and a PostgreSQL server: ``--url``, or a throwaway one started from the
machine's binaries (tests/postgres_harness.py) with the server's default durability (fsync
and synchronous_commit on) and removed afterwards. One run prints, side by side:

1. turns/s with ``--connections`` WebSocket clients (each opens a session, then all run
   ``--turns`` prompts of ``--words`` streamed words at once) on one replica behind HAProxy
   and on two, each on one SQLite store and on PostgreSQL (a fresh schema per setup);
2. failover after ``kill -9`` of the replica holding a real ``zeroclaw-acp-bridge`` mid-turn:
   the IDE's connection-lost answer, and the next prompt's answer (reconnect + resume on the
   other replica + one turn), on both stores (bench/haproxy_scale.py does the measuring);
3. revocation latency on PostgreSQL: two replicas with pairing on; a client on replica B
   holds a fresh token; replica A is asked to revoke it through the admin route that
   ``zeroclaw gateway revoke-token`` calls (the command's own Python start-up, seconds on a
   loaded machine, left out); measured from the request: A's answer (committed), and B
   closing the client's connection with 1008 (the commit, NOTIFY, and B's reaction).

    uv run python -m bench.postgres_scale [--connections 50] [--turns 3] [--words 20]
        [--rounds 5] [--url postgresql://...]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import trio
from bench.haproxy_scale import _failover, _setup_throughput
from tests.e2e.gateway_harness import RunningGateway, run_gateway, ws_connect
from tests.helpers import echo_config, write_config
from tests.postgres_harness import LocalCluster, PostgresServer, find_binaries
from websockets.exceptions import ConnectionClosed
from websockets.trio.client import ClientConnection

from acp_core.gateway_contract import ADMIN_PAIRCODE_NEW_PATH
from acp_server.gateway.admin import ADMIN_HEADER, read_admin_secret
from acp_server.gateway.revoke import ADMIN_TOKENS_REVOKE_PATH, SELECTOR_PARAMETER

QUIET = {"ZEROCLAW_LOG": "warning"}


@contextmanager
def postgres(url: str | None) -> Iterator[PostgresServer]:
    if url:
        yield PostgresServer(url)
        return
    binaries = find_binaries()
    if binaries is None:
        raise SystemExit("no PostgreSQL binaries (apt-get install postgresql-15), or pass --url")
    cluster = LocalCluster(binaries)
    try:
        yield PostgresServer(cluster.start())
    finally:
        cluster.stop()


async def _fresh_token(gateway: RunningGateway) -> str:
    code: str = (await _admin(gateway, ADMIN_PAIRCODE_NEW_PATH, {}))["pairing_code"]
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        paired = await client.post(f"{gateway.base_url}/pair", headers={"X-Pairing-Code": code})
    paired.raise_for_status()
    token: str = paired.json()["token"]
    return token


async def _admin(gateway: RunningGateway, path: str, params: dict[str, str]) -> dict[str, Any]:
    """One POST to the admin routes the ``zeroclaw gateway`` subcommands call."""
    secret = read_admin_secret(gateway.config_dir)
    assert secret is not None
    response = await gateway.http("POST", path, headers={ADMIN_HEADER: secret}, params=params)
    if response.status_code != 200:
        raise SystemExit(f"{path} refused: {response.status_code} {response.text}")
    body: dict[str, Any] = response.json()
    return body


async def _revoke_through_admin_route(gateway: RunningGateway, token: str) -> None:
    """What ``zeroclaw gateway revoke-token TOKEN`` asks the gateway on this machine."""
    body = await _admin(gateway, ADMIN_TOKENS_REVOKE_PATH, {SELECTOR_PARAMETER: token})
    if body.get("revoked_tokens") != 1:
        raise SystemExit(f"nothing revoked: {body}")


async def _record_close(ws: ClientConnection, at: list[float]) -> None:
    """Wait for the server to close ``ws`` with 1008; append when it did to ``at``."""
    try:
        with trio.fail_after(30):
            await ws.recv()
    except ConnectionClosed as closed:
        at.append(time.perf_counter())
        if closed.rcvd is None or closed.rcvd.code != 1008:
            raise SystemExit(f"closed without 1008: {closed}") from None
        return
    raise SystemExit("the revoked token's connection got a frame, not a close")


async def _revocation(root: Path, store_url: str, rounds: int) -> tuple[list[float], list[float]]:
    """Per round, from the revocation request: replica A's answer, and B's 1008 close."""
    answered: list[float] = []
    cut_after: list[float] = []
    configs = []
    for name in "ab":
        document = {**echo_config(), "storage": {"url": store_url}}
        document["gateway"] = {"require_pairing": True}
        configs.append(write_config(root / f"revoke-{name}", document))
    async with (
        run_gateway(configs[0], env=QUIET) as first,
        run_gateway(configs[1], env=QUIET) as second,
    ):
        for _ in range(rounds):
            token = await _fresh_token(first)
            async with ws_connect(second.ws_url(), token=token) as ws:
                await ws.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}')  # fmt: skip
                await ws.recv()
                cut: list[float] = []
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_record_close, ws, cut)
                    started = time.perf_counter()
                    await _revoke_through_admin_route(first, token)
                    answered.append(time.perf_counter() - started)
            cut_after.append(cut[0] - started)
    return answered, cut_after


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:7.1f} / {max(samples) * 1000:7.1f} ms"


async def run(args: argparse.Namespace) -> int:
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise SystemExit("haproxy is not on PATH (apt-get install haproxy)")
    with (
        tempfile.TemporaryDirectory(prefix="zc-pg-scale-", dir="/var/tmp") as temp,
        postgres(args.url) as server,
    ):
        root = Path(temp)
        print(f"{args.connections} connections x {args.turns} turns x {args.words} words")
        print(f"{'':28} {'SQLite':>52}   {'PostgreSQL':>52}")
        for label, replicas in (("1 replica behind HAProxy", 1), ("2 replicas behind HAProxy", 2)):
            lines = []
            for store in ("sqlite", "postgres"):
                with ExitStack() as schema:
                    url = (
                        schema.enter_context(server.fresh_schema()) if store == "postgres" else None
                    )
                    lines.append(
                        await _setup_throughput(
                            root / f"{store}-{replicas}", haproxy, replicas, True, args, url
                        )
                    )
            print(f"{label:28} {lines[0]}   {lines[1]}")
        failover = {}
        for store in ("sqlite", "postgres"):
            with ExitStack() as schema:
                url = schema.enter_context(server.fresh_schema()) if store == "postgres" else None
                failover[store] = await _failover(root / f"failover-{store}", haproxy, args.rounds, url)  # fmt: skip
        print(f"failover after kill -9, {args.rounds} rounds (median / max)   SQLite | PostgreSQL")
        print(f"  IDE told connection lost  {_ms(failover['sqlite'][0])} | {_ms(failover['postgres'][0])}")  # fmt: skip
        print(f"  next prompt answered      {_ms(failover['sqlite'][1])} | {_ms(failover['postgres'][1])}")  # fmt: skip
        with server.fresh_schema() as url:
            answered, cut = await _revocation(root, url, args.rounds)
        print(f"revocation on A, two replicas on PostgreSQL, {args.rounds} rounds (median / max)")
        print(f"  A answers (committed)     {_ms(answered)}")
        print(f"  B closes the client 1008  {_ms(cut)}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--words", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--url", default=None, help="a PostgreSQL server to use as it is")
    sys.exit(trio.run(run, parser.parse_args()))


if __name__ == "__main__":
    main()
