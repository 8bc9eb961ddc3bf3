"""Session store figures: per-turn commit latency and session/load replay throughput.

Run: ``uv run python bench/store.py`` (a benchmark, not a test: it prints figures, exits 0).
Targets: a commit adds under 5 ms (median) to a turn of 20 messages, and
``session/load`` replays at least 20,000 messages per second end to end.

1. Commit: ``append_turn`` of a realistic 20-message turn (a prompt, nine tool rounds of
   assistant text + call + result, a final answer) into a growing session, timed per call;
   once on ``SessionStore`` directly and once through ``AsyncSessionStore`` (the worker
   thread hop the server pays).
2. Load: a session with ``--messages`` stored messages is loaded through a real
   ``zeroclaw acp`` process over pipes: time from writing the ``session/load`` request to
   reading its response, with every ``session/update`` line read in between. In the same run,
   the same rows are fetched with a plain ``SELECT`` (the floor any implementation pays),
   and the in-process steps (``load_session``, ``history_updates`` + encoding) are timed
   to show where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any, Final

import msgspec
import trio

from acp_server.agent.conversation import ChatMessage, CompletedTurn, PlanStep, ToolCall, Usage
from acp_server.agent.replay import history_updates
from acp_server.storage import AsyncSessionStore, SessionBackend
from acp_server.storage.sqlite import SessionStore

MESSAGES_PER_TURN: Final = 20
SESSION_ID: Final = "bench-0000-4000-8000-000000000000"
SCRUBBED_ENV: Final = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
NOTIFICATION_PREFIX: Final = b'{"jsonrpc":"2.0","method":"session/update"'


def make_turn(index: int) -> CompletedTurn:
    """20 messages: prompt, 9 x (assistant text + call, tool result), final answer."""
    messages = [ChatMessage(role="user", content=f"Turn {index}: refactor module {index} " * 6)]
    for step in range(9):
        call = ToolCall(
            id=f"toolu_{index}_{step}",
            name="file_read" if step % 2 else "shell",
            arguments={"path": f"src/mod_{step}.py"} if step % 2 else {"command": "git status"},
        )
        messages.append(
            ChatMessage(
                role="assistant",
                content=f"Step {step}: looking at the next piece of the module. " * 3,
                reasoning="Need the file contents before editing." if step == 0 else None,
                tool_calls=(call,),
            )
        )
        messages.append(
            ChatMessage(
                role="tool",
                content=f"line {step}: def function_{step}(): return {step}\n" * 12,
                tool_call_id=call.id,
                tool_name=call.name,
            )
        )
    messages.append(ChatMessage(role="assistant", content=f"Done with turn {index}. " * 10))
    assert len(messages) == MESSAGES_PER_TURN
    return CompletedTurn(
        messages=tuple(messages),
        plan=(PlanStep(content=f"turn {index}", status="completed"),),
        usage=Usage(input_tokens=1000, output_tokens=200),
    )


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# --------------------------------------------------------------------------- commit


Opener = Callable[[], SessionBackend]
"""Opens a new store of the backend measured (SQLite here, PostgreSQL in store_postgres.py)."""


def commit_direct(open_store: Opener, turns: int) -> list[float]:
    store = open_store()
    store.create_session("commit-sync", "default", "/w")
    samples = []
    for index in range(turns):
        turn = make_turn(index)
        start = time.perf_counter()
        store.append_turn("commit-sync", turn)
        samples.append(time.perf_counter() - start)
    store.close()
    return samples


def commit_async_store(open_store: Opener, turns: int) -> list[float]:
    samples: list[float] = []

    async def run() -> None:
        store = AsyncSessionStore(await trio.to_thread.run_sync(open_store))
        await store.create_session("commit-async", "default", "/w")
        for index in range(turns):
            turn = make_turn(index)
            start = time.perf_counter()
            await store.append_turn("commit-async", turn)
            samples.append(time.perf_counter() - start)
        await store.aclose()

    trio.run(run)
    return samples


# --------------------------------------------------------------------------- load


def build_session(path: Path, messages: int) -> None:
    store = SessionStore.open(path)
    store.create_session(SESSION_ID, "default", str(path.parent))
    for index in range(messages // MESSAGES_PER_TURN):
        store.append_turn(SESSION_ID, make_turn(index))
    store.close()


def plain_select(path: Path) -> tuple[float, int]:
    """The same rows with no decoding: messages and tool rows of the session, in order."""
    conn = sqlite3.connect(path)
    start = time.perf_counter()
    (row_id,) = conn.execute(
        "SELECT id FROM acp_sessions WHERE session_uuid = ?", (SESSION_ID,)
    ).fetchone()
    rows = conn.execute(
        "SELECT id, role, content, reasoning_content FROM acp_messages"
        " WHERE session_id = ? ORDER BY id",
        (row_id,),
    ).fetchall()
    conn.execute(
        "SELECT t.message_id, t.tool_call_id, t.tool_name, t.event_kind, t.payload"
        " FROM acp_tool_calls AS t JOIN acp_messages AS m ON m.id = t.message_id"
        " WHERE m.session_id = ? ORDER BY t.id",
        (row_id,),
    ).fetchall()
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed, len(rows)


def in_process_steps(path: Path) -> tuple[float, float, int]:
    store = SessionStore.open(path)
    start = time.perf_counter()
    stored = store.load_session(SESSION_ID)
    loaded = time.perf_counter() - start
    store.close()
    assert stored is not None
    encoder = msgspec.json.Encoder()
    start = time.perf_counter()
    updates = history_updates(stored.messages)
    for update in updates:
        encoder.encode({"sessionId": SESSION_ID, "update": update})
    replayed = time.perf_counter() - start
    return loaded, replayed, len(updates)


class AcpProcess:
    def __init__(self, config_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        env["ZEROCLAW_CONFIG_DIR"] = str(config_dir)
        env["ZEROCLAW_LOG"] = "warning"
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "zeroclaw"), "acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            bufsize=1 << 20,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        self.next_id = 1

    def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int, float]:
        """Send a request; read until its response. Returns (response, updates, seconds)."""
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        start = time.perf_counter()
        self.stdin.write(line.encode() + b"\n")
        self.stdin.flush()
        updates = 0
        while True:
            raw = self.stdout.readline()
            if not raw:
                raise RuntimeError(f"zeroclaw acp exited during {method}")
            if raw.startswith(NOTIFICATION_PREFIX):
                updates += 1
                continue
            message = json.loads(raw)
            if message.get("id") == request_id:
                return message, updates, time.perf_counter() - start

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=30)


def bench_load(config_dir: Path, rounds: int) -> tuple[list[float], int]:
    server = AcpProcess(config_dir)
    try:
        server.call("initialize", {"protocolVersion": 1})
        samples = []
        updates = 0
        for _ in range(rounds):
            response, updates, elapsed = server.call("session/load", {"sessionId": SESSION_ID})
            if "result" not in response:
                raise RuntimeError(f"session/load failed: {response}")
            samples.append(elapsed)
            server.call("session/close", {"sessionId": SESSION_ID})
    finally:
        server.close()
    return samples, updates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="commits to time (default 300)")
    parser.add_argument(
        "--messages", type=int, default=10_000, help="stored messages to load (default 10000)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="session/load repetitions")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="zeroclaw-bench-store-") as tmp:
        root = Path(tmp)
        commit_sync = commit_direct(
            partial(SessionStore.open, root / "commit" / "sync.db"), args.turns
        )
        commit_async = commit_async_store(
            partial(SessionStore.open, root / "commit" / "async.db"), args.turns
        )
        print(f"commit of a {MESSAGES_PER_TURN}-message turn ({args.turns} turns, WAL, NORMAL)")
        for label, samples in (("SessionStore", commit_sync), ("AsyncSessionStore", commit_async)):
            print(
                f"  {label:<18} median {ms(statistics.median(samples))}"
                f"   p99 {ms(percentile(samples, 0.99))}   max {ms(max(samples))}"
            )

        config_dir = root / "cfg"
        db = config_dir / "data" / "sessions" / "acp-sessions.db"
        build_session(db, args.messages)
        select_time, rows = plain_select(db)
        loaded, replayed, update_count = in_process_steps(db)
        load_samples, updates_seen = bench_load(config_dir, args.rounds)
        best = min(load_samples)
        median = statistics.median(load_samples)
        print(f"session/load of {rows} stored messages ({update_count} updates)")
        print(f"  plain SELECT of the rows    {ms(select_time)}  ({rows / select_time:,.0f} msg/s)")
        print(f"  SessionStore.load_session   {ms(loaded)}  ({rows / loaded:,.0f} msg/s)")
        print(f"  history_updates + encode    {ms(replayed)}  ({rows / replayed:,.0f} msg/s)")
        print(
            f"  end to end over stdio       median {ms(median)}  best {ms(best)}"
            f"  ({rows / median:,.0f} msg/s median, {updates_seen / median:,.0f} updates/s;"
            f" {median / select_time:.1f}x the plain SELECT)"
        )


if __name__ == "__main__":
    main()
