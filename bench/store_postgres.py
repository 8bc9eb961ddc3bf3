"""The session store on PostgreSQL beside SQLite: per-turn commit and session/load.

Run: ``uv run python bench/store_postgres.py [--url postgresql://...]`` (a benchmark, not a
test: it prints figures, exits 0). Without ``--url`` it starts a throwaway PostgreSQL from
the machine's binaries (tests/postgres_harness.py) with the server's default durability
(fsync and synchronous_commit on) on 127.0.0.1, and removes it afterwards.

For each backend, with the turns of bench/store.py (20 messages: a prompt, nine tool rounds,
an answer):

1. Commit: ``append_turn`` into a growing session, timed per call, directly and through
   ``AsyncSessionStore`` (the worker-thread hop the server pays).
2. Load: ``load_session`` of a session with ``--messages`` stored messages, in process, and
   ``session/load`` end to end through a real ``zeroclaw acp`` over pipes (every
   ``session/update`` read), with ``[storage] url`` for PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.store import (
    MESSAGES_PER_TURN,
    SESSION_ID,
    Opener,
    bench_load,
    commit_async_store,
    commit_direct,
    make_turn,
    ms,
    percentile,
)
from tests.postgres_harness import LocalCluster, find_binaries

from acp_server.config.storage import STORAGE_URL_ENV
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.sqlite import SessionStore


def load_in_process(open_store: Opener, messages: int, rounds: int) -> list[float]:
    store = open_store()
    store.create_session(SESSION_ID, "default", "/w")
    for index in range(messages // MESSAGES_PER_TURN):
        store.append_turn(SESSION_ID, make_turn(index))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        stored = store.load_session(SESSION_ID)
        samples.append(time.perf_counter() - start)
        assert stored is not None
        assert len(stored.messages) == messages
    store.close()
    return samples


def summary(samples: list[float]) -> str:
    return f"median {ms(statistics.median(samples))}  p99 {ms(percentile(samples, 0.99))}"


def run_backend(
    label: str, open_store: Opener, config_dir: Path, url: str | None, args: argparse.Namespace
) -> dict[str, str]:
    """``url``: the `zeroclaw acp` under test gets it as ZEROCLAW_STORAGE_URL."""
    direct = commit_direct(open_store, args.turns)
    hopped = commit_async_store(open_store, args.turns)
    loads = load_in_process(open_store, args.messages, args.rounds)
    if url is not None:
        os.environ[STORAGE_URL_ENV] = url
    try:
        end_to_end, _updates = bench_load(config_dir, args.rounds)
    finally:
        os.environ.pop(STORAGE_URL_ENV, None)
    return {
        "backend": label,
        "commit": summary(direct),
        "commit (AsyncSessionStore)": summary(hopped),
        f"load_session {args.messages}": f"median {ms(statistics.median(loads))}",
        f"session/load {args.messages} over stdio": f"median {ms(statistics.median(end_to_end))}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None, help="a PostgreSQL to use (default: start one)")
    parser.add_argument("--turns", type=int, default=300, help="commits to time (default 300)")
    parser.add_argument("--messages", type=int, default=10_000, help="messages to load")
    parser.add_argument("--rounds", type=int, default=5, help="load repetitions")
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the started PostgreSQL (repeatable), e.g. synchronous_commit=off",
    )
    args = parser.parse_args()

    cluster: LocalCluster | None = None
    url = args.url
    if url is None:
        binaries = find_binaries()
        if binaries is None:
            sys.exit("no PostgreSQL binaries found: pass --url")
        cluster = LocalCluster(binaries, settings=args.pg_setting)
        url = cluster.start()
    try:
        with tempfile.TemporaryDirectory(prefix="zeroclaw-bench-pg-") as tmp:
            root = Path(tmp)
            sqlite_dir = root / "sqlite"
            db = sqlite_dir / "data" / "sessions" / "acp-sessions.db"
            (sqlite_dir / "data" / "sessions").mkdir(parents=True)
            pg_dir = root / "pg"
            pg_dir.mkdir()
            rows = [
                run_backend(
                    "SQLite (WAL, NORMAL)", lambda: SessionStore.open(db), sqlite_dir, None, args
                ),
                run_backend(
                    f"PostgreSQL 127.0.0.1 {' '.join(args.pg_setting) or '(defaults)'}",
                    lambda: PostgresSessionStore.open(url),
                    pg_dir,
                    url,
                    args,
                ),
            ]
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"{MESSAGES_PER_TURN}-message turns, {args.turns} commits, {args.rounds} loads")
    for key in rows[0]:
        print(f"  {key:<34} " + " | ".join(f"{row[key]:<34}" for row in rows))


if __name__ == "__main__":
    main()
