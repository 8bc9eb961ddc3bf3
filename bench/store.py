"""Session store figures on both backends: per-turn commit latency and session/load.

Run: ``uv run python bench/store.py [--baseline DIR] [--url postgresql://...]`` (a benchmark,
not a test: it prints figures, exits 0). Targets: a commit adds under 5 ms (median) to a
turn of 20 messages on SQLite, and ``session/load`` replays at least 20,000 messages per
second end to end.

For each backend (SQLite, and PostgreSQL unless ``--no-postgres``: the one ``--url`` names,
else a throwaway one on 127.0.0.1 started from the machine's binaries with the server's
default durability, fsync and synchronous_commit on, or ``--pg-setting``s; it is removed
afterwards: tests/postgres_harness.py):

1. Commit: ``append_turn`` of a realistic 20-message turn (a prompt, nine tool rounds of
   assistant text + call + result, a final answer) into a growing session, timed per call;
   once on the backend directly and once through ``AsyncSessionStore`` (the worker-thread
   hop the server pays).
2. Codec: the same ``--messages`` messages, their tool results carrying the record a real
   turn stores (streamed text, a diff), turned into column values (``encode_message``) and
   back from rows (``decode_messages``) in process, with no database: the JSON work a commit
   and a load do.
3. Load: a session with ``--messages`` stored messages, read back with ``load_session`` in
   process, and with ``session/load`` through a real ``zeroclaw acp`` process over pipes
   (time from writing the request to reading its response, every ``session/update`` line
   read in between). On SQLite, the same rows fetched with a plain ``SELECT`` show the floor
   any implementation pays.

``--cpu-time`` times the in-process measures by the process's CPU time instead of the wall
clock: what the code itself costs, with the disk's and the database server's time left out,
which on a shared machine is the steadier figure to compare two checkouts by.

``--baseline DIR`` names another checkout of this repository (e.g. ``git worktree add
--detach /var/tmp/zeroclaw-base main``; its own virtualenv is not needed): every
measurement then also runs on that checkout's code, in the same run, alternating which
checkout goes first each round, and the figures are printed side by side. Each measurement
runs in a child process whose ``PYTHONPATH`` puts the checkout's packages first, so this
file imports the store only through module paths both layouts have.
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, Final

import trio
from msgspec.structs import replace

from acp_server.config.storage import STORAGE_URL_ENV

# Module paths that exist in this checkout and in checkouts from before storage/__init__.py
# became the store's facade, so a --baseline child imports the same names from its code.
from acp_server.model import (
    CallView,
    ChatMessage,
    CompletedTurn,
    FileDiff,
    FileLocation,
    PlanStep,
    StreamedText,
    ToolCall,
    ToolRecord,
    Usage,
)
from acp_server.storage.async_store import AsyncSessionStore
from acp_server.storage.codec import decode_messages, encode_message
from acp_server.storage.contract import SessionBackend

REPO: Final = Path(__file__).resolve().parent.parent
MESSAGES_PER_TURN: Final = 20
SESSION_ID: Final = "bench-0000-4000-8000-000000000000"
SCRUBBED_ENV: Final = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
NOTIFICATION_PREFIX: Final = b'{"jsonrpc":"2.0","method":"session/update"'
BACKENDS: Final = ("sqlite", "postgres")


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
"""Opens a new store of the backend measured."""


Clock = Callable[[], float]


def commit_direct(open_store: Opener, turns: int, clock: Clock = time.perf_counter) -> list[float]:
    store = open_store()
    store.create_session("commit-sync", "default", "/w")
    samples = []
    for index in range(turns):
        turn = make_turn(index)
        start = clock()
        store.append_turn("commit-sync", turn)
        samples.append(clock() - start)
    store.close()
    return samples


def commit_async_store(
    open_store: Opener, turns: int, clock: Clock = time.perf_counter
) -> list[float]:
    samples: list[float] = []

    async def run() -> None:
        store = AsyncSessionStore(await trio.to_thread.run_sync(open_store))
        await store.create_session("commit-async", "default", "/w")
        for index in range(turns):
            turn = make_turn(index)
            start = clock()
            await store.append_turn("commit-async", turn)
            samples.append(clock() - start)
        await store.aclose()

    trio.run(run)
    return samples


# --------------------------------------------------------------------------- codec


def with_records(message: ChatMessage) -> ChatMessage:
    """A tool result as a live turn stores it: its record (what the card streamed, a diff)."""
    if message.role != "tool":
        return message
    path = f"/w/src/{message.tool_call_id}.py"
    record = ToolRecord(
        streamed=(StreamedText(message.content[:200]),),
        view=CallView(
            diffs=(FileDiff(path, "x = 1\n" * 20, "x = 2\n" * 20),),
            locations=(FileLocation(path, 3),),
        ),
    )
    return replace(message, record=record)


def codec_round_trip(
    messages: int, rounds: int, clock: Clock = time.perf_counter
) -> tuple[list[float], list[float]]:
    """(encode, decode) seconds of ``messages`` messages, ``rounds`` times each."""
    history = [
        with_records(message)
        for index in range(messages // MESSAGES_PER_TURN)
        for message in make_turn(index).messages
    ]
    encode_samples, decode_samples = [], []
    for _ in range(rounds):
        start = clock()
        encoded = [encode_message(message) for message in history]
        encode_samples.append(clock() - start)
        message_rows = [
            (row_id, item.role, item.content, item.reasoning) for row_id, item in enumerate(encoded)
        ]
        tool_rows = [
            (row_id, *tool) for row_id, item in enumerate(encoded) for tool in item.tool_rows
        ]
        start = clock()
        decoded = decode_messages(message_rows, tool_rows)
        decode_samples.append(clock() - start)
        assert len(decoded) == len(history)
    return encode_samples, decode_samples


# --------------------------------------------------------------------------- load


def build_session(open_store: Opener, messages: int) -> None:
    store = open_store()
    store.create_session(SESSION_ID, "default", "/w")
    for index in range(messages // MESSAGES_PER_TURN):
        store.append_turn(SESSION_ID, make_turn(index))
    store.close()


def load_in_process(
    open_store: Opener, messages: int, rounds: int, clock: Clock = time.perf_counter
) -> list[float]:
    """``load_session`` of the session ``build_session`` stored, timed per call."""
    store = open_store()
    samples = []
    for _ in range(rounds):
        start = clock()
        stored = store.load_session(SESSION_ID)
        samples.append(clock() - start)
        assert stored is not None
        assert len(stored.messages) == messages
    store.close()
    return samples


def plain_select(path: Path) -> float:
    """The same rows with no decoding: messages and tool rows of the session, in order."""
    conn = sqlite3.connect(path)
    start = time.perf_counter()
    (row_id,) = conn.execute(
        "SELECT id FROM acp_sessions WHERE session_uuid = ?", (SESSION_ID,)
    ).fetchone()
    conn.execute(
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
    return elapsed


class AcpProcess:
    def __init__(self, config_dir: Path, *, storage_url: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        env["ZEROCLAW_CONFIG_DIR"] = str(config_dir)
        env["ZEROCLAW_LOG"] = "warning"
        env.pop(STORAGE_URL_ENV, None)
        if storage_url is not None:
            env[STORAGE_URL_ENV] = storage_url
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


def bench_load(
    config_dir: Path, rounds: int, *, storage_url: str | None = None
) -> tuple[list[float], int]:
    """``session/load`` of ``SESSION_ID`` through ``zeroclaw acp`` (the SQLite file of
    ``config_dir``, or the PostgreSQL store ``storage_url``), timed per call."""
    server = AcpProcess(config_dir, storage_url=storage_url)
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


# --------------------------------------------------------------------------- one checkout

Figures = dict[str, list[float]]
"""Samples in seconds by measure."""


def opener(backend: str, location: str) -> Opener:
    if backend == "sqlite":
        from acp_server.storage.sqlite import SessionStore

        return lambda: SessionStore.open(Path(location))
    from acp_server.storage.postgres import PostgresSessionStore

    return lambda: PostgresSessionStore.open(location)


def measure(backend: str, location: str, work: Path, args: argparse.Namespace) -> Figures:
    """Every figure of one backend, on the code this process imports. ``location``: the
    PostgreSQL URL, or (SQLite) ignored: the files go under ``work``."""
    config_dir = work / "cfg"
    clock = time.process_time if args.cpu_time else time.perf_counter
    if backend == "sqlite":
        db = config_dir / "data" / "sessions" / "acp-sessions.db"
        commit_store = opener(backend, str(work / "commit-sync.db"))
        hopped_store = opener(backend, str(work / "commit-async.db"))
        load_store = opener(backend, str(db))
    else:
        config_dir.mkdir(parents=True)
        commit_store = hopped_store = load_store = opener(backend, location)
    figures: Figures = {
        "commit": commit_direct(commit_store, args.turns, clock),
        "commit through AsyncSessionStore": commit_async_store(hopped_store, args.turns, clock),
    }
    if backend == "sqlite":  # no database involved: measured once
        encoding, decoding = codec_round_trip(args.messages, args.rounds, clock)
        figures["codec: encode_message"] = encoding
        figures["codec: decode_messages"] = decoding
    build_session(load_store, args.messages)
    figures["load_session in process"] = load_in_process(
        load_store, args.messages, args.rounds, clock
    )
    url = None if backend == "sqlite" else location
    figures["session/load over stdio"], _ = bench_load(config_dir, args.rounds, storage_url=url)
    if backend == "sqlite":
        figures["plain SELECT of the rows (floor)"] = [plain_select(db)]
    return figures


def measure_in_child(
    tree: Path, backend: str, location: str, work: Path, args: argparse.Namespace
) -> Figures:
    """``measure`` in a child process running the code of the checkout at ``tree``."""
    sources = [str(tree / "packages" / name / "src") for name in ("acp-server", "acp-core")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sources)}
    command = [sys.executable, __file__, "--child", backend, location, str(work)]
    command += ["--turns", str(args.turns), "--messages", str(args.messages)]
    command += ["--rounds", str(args.rounds)] + (["--cpu-time"] if args.cpu_time else [])
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"measuring {backend} on {tree} failed:\n{done.stderr[-3000:]}")
    figures: Figures = json.loads(done.stdout.splitlines()[-1])
    return figures


# --------------------------------------------------------------------------- both checkouts


@contextmanager
def postgres_urls(args: argparse.Namespace) -> Iterator[Callable[[], Any]]:
    """A factory of fresh, empty schemas (each a context manager yielding its URL) on the
    PostgreSQL server ``--url`` names, or on a throwaway one."""
    sys.path.insert(0, str(REPO))
    from tests.postgres_harness import LocalCluster, PostgresServer, find_binaries

    if args.url is not None:
        yield PostgresServer(args.url).fresh_schema
        return
    binaries = find_binaries()
    if binaries is None:
        sys.exit("no PostgreSQL binaries found: pass --url, or --no-postgres")
    cluster = LocalCluster(binaries, settings=args.pg_setting)
    try:
        yield PostgresServer(cluster.start()).fresh_schema
    finally:
        cluster.stop()


def summary(measure_name: str, samples: list[float], messages: int) -> str:
    median = statistics.median(samples)
    if measure_name.startswith("commit"):
        return f"median {ms(median)}  p99 {ms(percentile(samples, 0.99))}"
    return f"median {ms(median)} ({messages / median:,.0f} msg/s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="commits to time (default 300)")
    parser.add_argument(
        "--messages", type=int, default=10_000, help="stored messages to load (default 10000)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="loads timed per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per checkout")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--url", default=None, help="a PostgreSQL to use (default: start one)")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time the in-process measures by this process's CPU time (its code's own cost,"
        " without waiting for the disk or the database server); over stdio stays wall time",
    )
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the started PostgreSQL (repeatable), e.g. synchronous_commit=off",
    )
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child is not None:
        backend, location, work = args.child
        print(json.dumps(measure(backend, location, Path(work), args)))
        return

    checkouts = [("this checkout", REPO)]
    if args.baseline is not None:
        checkouts.append(("baseline", args.baseline.resolve()))
    backends = BACKENDS[:1] if args.no_postgres else BACKENDS
    results: dict[tuple[str, str], Figures] = {}
    with ExitStack() as stack:
        fresh_schema = None if args.no_postgres else stack.enter_context(postgres_urls(args))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="zeroclaw-bench-")))
        for round_number in range(args.repeat):
            order = checkouts if round_number % 2 == 0 else checkouts[::-1]
            for backend in backends:
                for label, tree in order:
                    print(f"round {round_number + 1}: {backend} on {label}", file=sys.stderr)
                    work = tmp / f"{backend}-{label.replace(' ', '-')}-{round_number}"
                    work.mkdir()
                    with ExitStack() as schema:
                        location = ""
                        if backend == "postgres":
                            assert fresh_schema is not None
                            location = schema.enter_context(fresh_schema())
                        figures = measure_in_child(tree, backend, location, work, args)
                    pooled = results.setdefault((backend, label), {})
                    for name, samples in figures.items():
                        pooled.setdefault(name, []).extend(samples)

    print(
        f"{MESSAGES_PER_TURN}-message turns: {args.turns} commits, loads of {args.messages}"
        f" messages ({args.rounds} per measurement), {args.repeat} measurements per checkout,"
        " alternating"
    )
    labels = [label for label, _tree in checkouts]
    print(f"  {'':<44}" + "".join(f"{label:<38}" for label in labels))
    for backend in backends:
        for name in results[(backend, labels[0])]:
            cells = [
                summary(name, results[(backend, label)][name], args.messages) for label in labels
            ]
            print(f"  {backend + ' ' + name:<44}" + "".join(f"{cell:<38}" for cell in cells))


if __name__ == "__main__":
    main()
