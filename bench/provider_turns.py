"""Prompt turns on the path real users take: `zeroclaw acp` calling a model over HTTP.

A local model server (bench/support/fake_provider.py: stdlib ``http.server`` in a thread,
keep-alive, both providers' real streaming wire shapes, answering at once) stands in for
the service. The same client (bench/support/peer.py) drives, in one run and alternating:

* ``zeroclaw acp`` with an ``openai_compatible`` provider (Chat Completions) at the server;
* ``zeroclaw acp`` with an ``anthropic`` provider (Messages API) at the server;
* the official ACP SDK echo agent (bench/support/sdk_echo_agent.py) sending the same
  frames without any model: the floor;
* with ``--base DIR``, the first two again from another checkout (``DIR/.venv``), to compare
  before and after a change in the same minutes.

Per agent and round it measures:

* short turns: a one-word prompt answered with five words (one model round); median and
  p90 of the turn time, and the OVERHEAD: the turn time minus the server's own time for
  that turn (the part of the turn that is ours);
* tool turns: the model asks for ``shell`` with ``echo hi``, the client approves, the
  command runs, the model answers (two model rounds); median and p90 end to end;
* long turns: a reply of ``--words`` words, one chunk each; streamed chunks per second.

Short and tool turns run ``--turns-per-session`` to a session (a model call sends the
whole history, so a longer session makes every call bigger); each long turn has its own.

Each agent runs ``--rounds`` times (the order rotates each round). Turn times are pooled
over the rounds; chunks/s are the median of the rounds.

Usage: ``uv run python bench/provider_turns.py [--rounds 3] [--short-turns 100]
[--tool-turns 20] [--long-turns 2] [--words 20000] [--in-memory] [--base /path/to/checkout]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psutil
import tomli_w
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support.checkouts import add_base_argument, venv_bin
from bench.support.fake_provider import LONG_TRIGGER, SHORT_REPLY, TOOL_TRIGGER, FakeProvider
from bench.support.peer import Peer

HERE: Final = Path(__file__).resolve().parent
SDK_NAME: Final = "SDK echo agent (floor)"
EXIT_WAIT_SECS: Final = 10.0
BENCH_MAX_SESSIONS: Final = 100_000


@dataclass(frozen=True)
class Prompts:
    short: str
    tool: str
    long: str


@dataclass(frozen=True)
class Agent:
    name: str
    argv: list[str]
    env: dict[str, str]
    prompts: Prompts


@dataclass
class Samples:
    short: list[float] = field(default_factory=list)
    short_server: list[float] = field(default_factory=list)
    short_cpu: list[float] = field(default_factory=list)
    """CPU seconds per short turn, one figure per round (the agent and its children)."""
    tool: list[float] = field(default_factory=list)
    tool_server: list[float] = field(default_factory=list)
    tool_cpu: list[float] = field(default_factory=list)
    chunks_per_sec: list[float] = field(default_factory=list)
    chunk_cpu: list[float] = field(default_factory=list)
    """CPU seconds per streamed chunk, one figure per round."""
    chunks_per_long_turn: int = 0


def cpu_seconds(process: psutil.Process) -> float:
    """CPU time of ``process`` and of the children it has reaped (the tool's shell)."""
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def text_prompt(session_id: str, text: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


async def new_session(peer: Peer, cwd: str) -> str:
    new, _ = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    session_id: str = new["sessionId"]
    return session_id


async def timed_turns(
    peer: Peer, text: str, count: int, server: FakeProvider, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    """(turn seconds, server seconds) for ``count`` prompts of ``text``, one after another,
    in a new session every ``--turns-per-session`` turns (the history a model call sends
    grows with the session: a conversation of a few turns is the common case)."""
    turns, served = [], []
    params: dict[str, Any] = {}
    for index in range(count):
        if index % args.turns_per_session == 0:
            params = text_prompt(await new_session(peer, args.cwd), text)
        server.take_server_seconds()
        start = time.perf_counter()
        await peer.call("session/prompt", params)
        turns.append(time.perf_counter() - start)
        served.append(server.take_server_seconds())
    return turns, served


async def measure(
    agent: Agent, args: argparse.Namespace, server: FakeProvider, samples: Samples
) -> None:
    process = await trio.lowlevel.open_process(
        agent.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None if args.show_stderr else subprocess.DEVNULL,
        env=agent.env,
    )
    try:
        peer = Peer(process)
        usage = psutil.Process(process.pid)
        await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        prompts = agent.prompts
        # Warm-up: the first call of each kind pays for lazy imports and connecting.
        await timed_turns(peer, prompts.short, args.warmup, server, args)
        await timed_turns(peer, prompts.tool, 1, server, args)
        cpu = cpu_seconds(usage)
        turns, served = await timed_turns(peer, prompts.short, args.short_turns, server, args)
        samples.short += turns
        samples.short_server += served
        samples.short_cpu.append((cpu_seconds(usage) - cpu) / args.short_turns)
        cpu = cpu_seconds(usage)
        turns, served = await timed_turns(peer, prompts.tool, args.tool_turns, server, args)
        samples.tool += turns
        samples.tool_server += served
        samples.tool_cpu.append((cpu_seconds(usage) - cpu) / args.tool_turns)
        long_turns = [
            text_prompt(await new_session(peer, args.cwd), prompts.long)
            for _ in range(args.long_turns + 1)
        ]
        await peer.call("session/prompt", long_turns.pop())  # warm the long path too
        chunks = 0
        cpu = cpu_seconds(usage)
        start = time.perf_counter()
        for long in long_turns:
            _, notes = await peer.call("session/prompt", long)
            chunks += notes
        samples.chunks_per_sec.append(chunks / (time.perf_counter() - start))
        samples.chunk_cpu.append((cpu_seconds(usage) - cpu) / max(1, chunks))
        samples.chunks_per_long_turn = chunks // max(1, args.long_turns)
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        with trio.move_on_after(EXIT_WAIT_SECS):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


def write_config(config_dir: Path, base_url: str, *, persist: bool) -> None:
    providers = {
        "openai_compatible": {"bench": {"model": "fake-model", "uri": f"{base_url}/v1"}},
        "anthropic": {
            "bench": {"model": "fake-model", "uri": base_url, "api_key": "sk-bench-not-a-key"}
        },
    }
    profiles = {"risk_profile": "default", "runtime_profile": "default"}
    document = {
        "schema_version": 3,
        # Every --turns-per-session turns a new session: room for all of them.
        "acp": {"session_persistence": persist, "max_sessions": BENCH_MAX_SESSIONS},
        "providers": {"models": providers},
        "agents": {
            "openai": {"model_provider": "openai_compatible.bench", **profiles},
            "anthropic": {"model_provider": "anthropic.bench", **profiles},
        },
        "risk_profiles": {"default": {"level": "supervised"}},
        "runtime_profiles": {"default": {}},
    }
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(tomli_w.dumps(document))


def zeroclaw_agents(label: str, venv_bin: Path, config_dir: Path) -> list[Agent]:
    env = dict(os.environ, ZEROCLAW_CONFIG_DIR=str(config_dir), ZEROCLAW_LOG="warning")
    for scrubbed in ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(scrubbed, None)
    prompts = Prompts(short="hello", tool=f"please {TOOL_TRIGGER} hi", long=f"a {LONG_TRIGGER}")
    return [
        Agent(
            f"{label}, {wire}", [str(venv_bin / "zeroclaw"), "acp", "--agent", wire], env, prompts
        )
        for wire in ("openai", "anthropic")
    ]


def sdk_agent(words: int) -> Agent:
    prompts = Prompts(
        short="".join(SHORT_REPLY),
        tool="/tool shell " + json.dumps({"command": "echo hi"}),
        long=" ".join(f"word{index}" for index in range(words)),
    )
    argv = [sys.executable, str(HERE / "support" / "sdk_echo_agent.py")]
    return Agent(SDK_NAME, argv, dict(os.environ), prompts)


async def main(args: argparse.Namespace) -> None:
    server = FakeProvider(long_words=args.words)
    results: dict[str, Samples] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="zc-provider-bench-") as tmp:
            # A session's cwd may not contain the server's config directory
            # (acp_server/protocol/services/roots.py): the sessions get a workspace beside it.
            workspace = Path(tmp) / "workspace"
            workspace.mkdir()
            args.cwd = str(workspace)
            config_dir = Path(tmp) / "config"
            write_config(config_dir, server.base_url, persist=not args.in_memory)
            agents = [sdk_agent(args.words)]
            agents += zeroclaw_agents("zeroclaw acp", Path(sys.executable).parent, config_dir)
            if args.base is not None:
                base_bin = venv_bin(args.base)
                agents += zeroclaw_agents("base checkout", base_bin, config_dir)
            for agent in agents:
                results[agent.name] = Samples()
            for round_index in range(args.rounds):
                shift = round_index % len(agents)
                for agent in agents[shift:] + agents[:shift]:
                    await measure(agent, args, server, results[agent.name])
    finally:
        server.close()
    report(results, args, server)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def report(results: dict[str, Samples], args: argparse.Namespace, server: FakeProvider) -> None:
    print(
        f"{'agent':<28} {'short turn ms':>14} {'overhead':>9} {'CPU':>6} {'tool turn ms':>14}"
        f" {'overhead':>9} {'CPU':>6} {'chunks/s':>9} {'(min-max)':>15} {'CPU':>6}"
    )
    print(
        f"{'':<28} {'median/p90':>14} {'median':>9} {'ms':>6} {'median/p90':>14} {'median':>9}"
        f" {'ms':>6} {'':>25} {'us/ch':>6}"
    )
    for name, samples in results.items():
        short_overhead = [t - s for t, s in zip(samples.short, samples.short_server, strict=True)]
        tool_overhead = [t - s for t, s in zip(samples.tool, samples.tool_server, strict=True)]
        chunks = samples.chunks_per_sec
        print(
            f"{name:<28}"
            f" {ms(statistics.median(samples.short)) + '/' + ms(percentile(samples.short, 0.9)):>14}"
            f" {ms(statistics.median(short_overhead)):>9}"
            f" {ms(statistics.median(samples.short_cpu)):>6}"
            f" {ms(statistics.median(samples.tool)) + '/' + ms(percentile(samples.tool, 0.9)):>14}"
            f" {ms(statistics.median(tool_overhead)):>9}"
            f" {ms(statistics.median(samples.tool_cpu)):>6}"
            f" {statistics.median(chunks):>9,.0f} {f'({min(chunks):,.0f}-{max(chunks):,.0f})':>15}"
            f" {statistics.median(samples.chunk_cpu) * 1e6:>6.0f}"
        )
    served = [seconds for samples in results.values() for seconds in samples.short_server]
    server_short = statistics.median([seconds for seconds in served if seconds > 0] or [0.0])
    print(
        f"overhead = turn time minus the model server's own time (the SDK agent calls no"
        f" server: its overhead is its turn); CPU = the agent's CPU time per turn (its tool"
        f" commands included), steadier than wall time on a busy machine. {args.rounds} rounds of {args.short_turns} short"
        f" turns, {args.tool_turns} tool turns (2 model rounds each) and {args.long_turns}"
        f" turns of {args.words} words per agent; persisting: {not args.in_memory};"
        f" {server.requests} model requests over {server.connections} connections"
        f" (server time per short answer ~{server_short * 1e6:.0f} us)."
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--short-turns", type=int, default=100)
    parser.add_argument("--tool-turns", type=int, default=20)
    parser.add_argument("--long-turns", type=int, default=2)
    parser.add_argument("--words", type=int, default=20_000, help="words of a long reply")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--turns-per-session", type=int, default=10, help="a new session after this many turns"
    )
    parser.add_argument(
        "--in-memory", action="store_true", help="[acp] session_persistence = false"
    )
    add_base_argument(parser, "run zeroclaw acp")
    parser.add_argument("--show-stderr", action="store_true", help="the agents' logs")
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse_args())
