"""Prompt turns per second and streamed chunks per second over stdio.

Runs three agents with the *same* client in the same run:

* ``zeroclaw acp`` with the offline echo provider (``chunk_delay_ms = 0``), persisting
  every turn to its SQLite store before answering (the product default);
* the same with ``[acp] session_persistence = false`` (in-memory sessions, like the SDK
  agent: the like-for-like comparison the targets apply to);
* ``bench/support/sdk_echo_agent.py``: an echo agent on the official ACP Python SDK, streaming the
  same word chunks, persisting nothing.

The client is a plain trio JSON-RPC peer over the child's pipes (acp_core framing,
msgspec decoding). "turns/s" runs many one-word prompts (per-turn overhead: request,
one chunk, result); "chunks/s" runs prompts of ``--words`` words (one
``agent_message_chunk`` per word). Targets: chunks/s ≥ 2× the SDK agent, turns/s not
below it. Every agent is measured once per round (the order rotates) and the report gives
medians over the rounds, with each ratio taken against the SDK agent of the same round.

Usage: ``uv run python bench/server_turns.py [--rounds 5] [--turns 400] [--words 2000]
[--long-turns 10]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import tomli_w
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support.peer import Peer

HERE = Path(__file__).resolve().parent


@dataclass
class Figures:
    name: str
    turns_per_sec: float
    chunks_per_sec: float
    chunks_per_long_turn: int


async def measure(
    name: str, argv: Sequence[str], env: dict[str, str], args: argparse.Namespace
) -> Figures:
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        peer = Peer(process)
        await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new, _ = await peer.call("session/new", {"cwd": os.getcwd(), "mcpServers": []})
        session_id = new["sessionId"]
        short = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
        for _ in range(args.warmup):
            await peer.call("session/prompt", short)
        start = time.perf_counter()
        for _ in range(args.turns):
            await peer.call("session/prompt", short)
        turns_per_sec = args.turns / (time.perf_counter() - start)

        text = " ".join(f"word{i}" for i in range(args.words))
        long = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        await peer.call("session/prompt", long)  # warm the long path too
        chunks = 0
        start = time.perf_counter()
        for _ in range(args.long_turns):
            _, notes = await peer.call("session/prompt", long)
            chunks += notes
        chunks_per_sec = chunks / (time.perf_counter() - start)
        return Figures(name, turns_per_sec, chunks_per_sec, chunks // args.long_turns)
    finally:
        await process.stdin.aclose()  # type: ignore[union-attr]
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()


def write_config(config_dir: Path, *, persist: bool) -> None:
    config_dir.mkdir(parents=True)
    document = {
        "acp": {"session_persistence": persist},
        "providers": {"models": {"echo": {"bench": {"model": "echo", "chunk_delay_ms": 0}}}},
        "agents": {"bench": {"model_provider": "echo.bench"}},
    }
    (config_dir / "config.toml").write_text(tomli_w.dumps(document))


SDK_NAME: Final = "official SDK echo agent"
IN_MEMORY: Final = "zeroclaw acp, in-memory"
PERSISTING: Final = "zeroclaw acp, persisting"


async def main(args: argparse.Namespace) -> None:
    zeroclaw = [str(Path(sys.executable).parent / "zeroclaw"), "acp"]
    sdk = [sys.executable, str(HERE / "support" / "sdk_echo_agent.py")]
    results: dict[str, list[Figures]] = {SDK_NAME: [], IN_MEMORY: [], PERSISTING: []}
    with tempfile.TemporaryDirectory(prefix="zc-bench-") as tmp:
        agents: list[tuple[str, list[str], dict[str, str]]] = [(SDK_NAME, sdk, dict(os.environ))]
        for name, persist in ((IN_MEMORY, False), (PERSISTING, True)):
            config_dir = Path(tmp) / ("persisting" if persist else "in-memory")
            write_config(config_dir, persist=persist)
            env = dict(os.environ, ZEROCLAW_CONFIG_DIR=str(config_dir), ZEROCLAW_LOG="warning")
            agents.append((name, zeroclaw, env))
        for round_index in range(args.rounds):
            # Rotate the order each round: drift in machine load spreads over all agents.
            shift = round_index % len(agents)
            for name, argv, env in agents[shift:] + agents[:shift]:
                results[name].append(await measure(name, argv, env, args))
    report(results, args)


def report(results: dict[str, list[Figures]], args: argparse.Namespace) -> None:
    """Medians over the rounds; each ratio is the median of per-round ratios against the
    SDK agent measured in the same round (robust to a machine whose load drifts)."""

    def column(name: str, attribute: str) -> list[float]:
        return [float(getattr(row, attribute)) for row in results[name]]

    def ratio(name: str, attribute: str) -> float:
        pairs = zip(column(name, attribute), column(SDK_NAME, attribute), strict=True)
        return statistics.median(ours / theirs for ours, theirs in pairs)

    print(
        f"{'agent':<26} {'turns/s':>9} {'(min-max)':>13} {'chunks/s':>10} {'(min-max)':>17}"
        f" {'chunks/turn':>12}"
    )
    for name, rows in results.items():
        turns, chunks = column(name, "turns_per_sec"), column(name, "chunks_per_sec")
        print(
            f"{name:<26} {statistics.median(turns):>9.0f} "
            f"{f'({min(turns):.0f}-{max(turns):.0f})':>13} {statistics.median(chunks):>10.0f} "
            f"{f'({min(chunks):.0f}-{max(chunks):.0f})':>17} {rows[0].chunks_per_long_turn:>12}"
        )
    print("against the SDK agent (median of per-round ratios):")
    for name in (IN_MEMORY, PERSISTING):
        print(
            f"  {name:<24} turns/s {ratio(name, 'turns_per_sec'):.2f}x (target >= 1)"
            f"  chunks/s {ratio(name, 'chunks_per_sec'):.2f}x (target >= 2)"
        )
    print(
        f"({args.rounds} rounds; {args.turns} short turns, "
        f"{args.long_turns} turns of {args.words} words per agent per round)"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=400, help="short turns for turns/s")
    parser.add_argument("--words", type=int, default=2000, help="words (chunks) per long turn")
    parser.add_argument("--long-turns", type=int, default=10, help="long turns for chunks/s")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--rounds", type=int, default=5, help="measure every agent this many times (medians)"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse_args())
