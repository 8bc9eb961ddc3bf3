"""What observing a turn costs: CPU per prompt turn with and without metrics and logs.

One in-process server (the echo provider, in-memory sessions, the in-memory transport of
tests/server/server_harness.py) runs the same short turns under each variant, alternating
round by round in one run:

* ``none``: no metrics, and the turn's log context and "turn ended" line switched off:
  the server as it was before observability (the baseline);
* ``stdio``: what `zeroclaw acp` does now: no metrics, the turn's log context and line;
* ``gateway``: what `zeroclaw gateway` does: ``PrometheusMetrics`` recording every turn,
  model call, token count and store commit, human log lines at ``info`` (to /dev/null);
* ``gateway-json``: the same with ``--log-format json``.

It reports the process CPU time per turn, and the CPU time of exactly the calls one turn
makes to observability, repeated in a loop (what the end-to-end figure's noise hides) (``time.process_time``; the client is in the
same process, so it is the whole round trip's CPU, and the differences are what each
variant adds), median over the rounds, and one scrape's cost after the run.

Usage: ``uv run python bench/metrics_overhead.py [--rounds 7] [--turns 2000]``
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers import make_config, session_dir
from tests.server.server_harness import harness_app, open_server

from acp_server.observability.logs import formatter_for
from acp_server.observability.metrics import NO_METRICS, Metrics, Timing
from acp_server.observability.prometheus import PrometheusMetrics
from acp_server.observability.turns import observed_turn
from acp_server.protocol.services import prompt as prompt_service

VARIANTS: Final = ("none", "stdio", "gateway", "gateway-json")
TURNS_PER_SESSION: Final = 50


@contextlib.contextmanager
def _unobserved_turn(_metrics: Metrics, _agent: str, _session_id: str) -> Iterator[Timing]:
    yield Timing()


@contextlib.contextmanager
def _variant(name: str) -> Iterator[Callable[[], Metrics]]:
    """Set up logging and the turn observer as ``name`` has them; yields the metrics
    factory."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    namespace = vars(prompt_service)  # the name the prompt service calls
    saved_observer = namespace["observed_turn"]
    with open(os.devnull, "w", encoding="utf-8") as sink:
        handler = logging.StreamHandler(sink)
        handler.setFormatter(formatter_for("json" if name == "gateway-json" else "human"))
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
        if name == "none":
            namespace["observed_turn"] = _unobserved_turn
            root.setLevel(logging.WARNING)  # before, a turn logged nothing at info
        try:
            yield (lambda: NO_METRICS) if name in ("none", "stdio") else PrometheusMetrics
        finally:
            namespace["observed_turn"] = saved_observer
            root.handlers[:], root.level = saved_handlers, saved_level


async def _run_turns(base: Path, metrics: Metrics, turns: int) -> float:
    """CPU seconds for ``turns`` one-word turns."""
    config = make_config(base / "cfg", risk={"level": "full"})
    app = harness_app(config)
    app.metrics = metrics
    cwd = session_dir(base)
    async with open_server(config, app=app) as client:
        await client.result("initialize", {"protocolVersion": 1})
        started = time.process_time()
        done = 0
        while done < turns:
            session_id = await client.new_session(cwd)
            for _ in range(min(TURNS_PER_SESSION, turns - done)):
                answer = await client.prompt(session_id, "hello")
                assert answer["result"]["stopReason"] == "end_turn", answer
                done += 1
            await client.result("session/close", {"sessionId": session_id})
            client.notifications.clear()
            client.frames.clear()
        return time.process_time() - started


async def _calls_per_turn(metrics: Metrics, repeats: int) -> float:
    """CPU seconds per turn of exactly the calls a turn makes to observability: its log
    context and "turn ended" line, one model call, its tokens, one store commit."""
    started = time.process_time()
    for _ in range(repeats):
        with observed_turn(metrics, "echo", "session") as timing:
            metrics.model_call("echo.default", "ok", trio.current_time())
            metrics.model_used("echo", 12, 34, 0.0)
            with metrics.timed_store_commit():
                pass
            timing.outcome = "end_turn"
    return (time.process_time() - started) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    per_turn: dict[str, list[float]] = {name: [] for name in VARIANTS}
    last_gateway: PrometheusMetrics | None = None
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        for round_index in range(args.rounds):
            order = (
                VARIANTS[round_index % len(VARIANTS) :] + VARIANTS[: round_index % len(VARIANTS)]
            )
            for name in order:
                base = Path(scratch) / f"{round_index}-{name}"
                with _variant(name) as metrics_factory:
                    metrics = metrics_factory()
                    seconds = trio.run(_run_turns, base, metrics, args.turns)
                if isinstance(metrics, PrometheusMetrics):
                    last_gateway = metrics
                per_turn[name].append(seconds / args.turns * 1e6)
        calls: dict[str, list[float]] = {name: [] for name in VARIANTS[1:]}
        for _round in range(args.rounds):
            for name in VARIANTS[1:]:
                with _variant(name) as metrics_factory:
                    seconds = trio.run(_calls_per_turn, metrics_factory(), args.turns * 10)
                calls[name].append(seconds * 1e6)
    baseline = statistics.median(per_turn["none"])
    print(f"{args.rounds} rounds x {args.turns} one-word echo turns, in-process; CPU per turn")
    print(f"{'variant':<14} {'median us':>10} {'min us':>8} {'vs none':>9}")
    for name in VARIANTS:
        median = statistics.median(per_turn[name])
        print(f"{name:<14} {median:>10.1f} {min(per_turn[name]):>8.1f} {median - baseline:>+8.1f}")
    print("the observability calls of one turn alone (log context and line, metrics):")
    for name, figures in calls.items():
        print(f"{name:<14} {statistics.median(figures):>10.1f} us")
    if last_gateway is not None:
        started = time.perf_counter()
        body, _content_type = last_gateway.exposition()
        print(f"one scrape: {len(body)} bytes in {(time.perf_counter() - started) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
