"""Start-up cost of one shell command under each OS sandbox backend, next to unconfined.

Run: ``uv run python bench/sandbox_startup.py [--runs N]`` (a benchmark, not a test: it
prints figures, exits 0). Each run is what the shell tool does for one command: plan the
spawn (``plan_spawn``: the Landlock ruleset, or the bubblewrap command line) and run
``bash -c true`` through ``run_shell_command`` (a new session, the pipe, the process-group
reap). The unconfined row is ``sandbox_enabled = false`` (resource limits only); the
difference to it is what a sandbox adds per command. Expect a few milliseconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Final

import trio

from acp_server.agent.tools.shell import run_shell_command
from acp_server.config import RiskProfileConfig
from acp_server.security.sandbox import SandboxPosture, plan_spawn, resolve_posture, spawned

DEFAULT_RUNS: Final = 200
WARM_UP_ROUNDS: Final = 5
COMMAND: Final = "true"
PROFILES: Final = {
    "unconfined": RiskProfileConfig(level="full", sandbox_enabled=False),
    "landlock": RiskProfileConfig(level="full", sandbox_backend="landlock"),
    "bubblewrap": RiskProfileConfig(level="full", sandbox_backend="bubblewrap"),
}


async def one_command(
    profile: RiskProfileConfig, posture: SandboxPosture, workspace: Path, shell: str
) -> float:
    """Milliseconds for the shell tool's spawn path to plan, run and reap one command."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    started = time.perf_counter()
    plan = await trio.to_thread.run_sync(
        lambda: plan_spawn(
            [shell, "-c", COMMAND],
            posture=posture,
            profile=profile,
            workspace=workspace,
            session_id="bench",
            env=env,
        )
    )
    with spawned(plan):
        result = await run_shell_command(
            COMMAND, cwd=workspace, timeout_secs=30, env=plan.env, sandbox=plan
        )
    elapsed = (time.perf_counter() - started) * 1000
    if result.returncode != 0:
        raise SystemExit(f"{posture.describe()}: `{COMMAND}` failed: {result.output!r}")
    return elapsed


async def main(runs: int, workspace: Path, shell: str) -> None:
    postures: dict[str, SandboxPosture] = {}
    for name, profile in PROFILES.items():
        posture = resolve_posture(profile)
        if posture.refuses:
            print(f"{name:<12} unavailable: {posture.reason}")
            continue
        postures[name] = posture
    timings: dict[str, list[float]] = {name: [] for name in postures}
    # Rounds interleave the backends, so drift on a shared machine hits them alike.
    for round_index in range(runs + WARM_UP_ROUNDS):
        for name, posture in postures.items():
            elapsed = await one_command(PROFILES[name], posture, workspace, shell)
            if round_index >= WARM_UP_ROUNDS:
                timings[name].append(elapsed)
    print(f"per-command start-up of `{shell} -c {COMMAND}`, {runs} runs each (ms)")
    print(f"{'backend':<12} {'median':>8} {'p90':>8} {'vs unconfined':>14}")
    baseline = statistics.median(timings["unconfined"])
    for name, values in timings.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[max(0, int(len(values) * 0.9) - 1)]
        extra = "" if name == "unconfined" else f"{median - baseline:+.2f}"
        print(f"{name:<12} {median:>8.2f} {p90:>8.2f} {extra:>14}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    shell_program = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
    with tempfile.TemporaryDirectory(prefix="zeroclaw-bench-") as scratch:
        trio.run(main, parser.parse_args().runs, Path(scratch).resolve(), shell_program)
