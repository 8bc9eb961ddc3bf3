"""Start-up cost of one shell command under each OS sandbox backend, next to unconfined,
started through the process supervisor and, for comparison, forked by the server itself.

Run: ``uv run python bench/sandbox_startup.py [--runs N]`` (a benchmark, not a test: it
prints figures, exits 0). Each run is what the shell tool does for one command: plan the
spawn (``plan_spawn``: the Landlock ruleset, or the bubblewrap command line) and run
``bash -c true`` through ``run_shell_command`` (the supervisor starts it, reports its exit,
and stops what it left). The ``direct`` rows start the same plan the way the shell tool
did before the supervisor existed: forked by the server (``preexec_fn``), a process-group
kill at the end, which leaves whatever left the group running. The unconfined row is
``sandbox_enabled = false`` (resource limits only). Rounds interleave every row, so drift
on a shared machine hits them alike. Expect a few milliseconds.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import trio

from acp_server.agent.tools.shell import run_shell_command
from acp_server.config import RiskProfileConfig
from acp_server.security.sandbox import (
    SandboxPosture,
    SpawnPlan,
    plan_spawn,
    resolve_posture,
    spawned,
)

DEFAULT_RUNS: Final = 200
WARM_UP_ROUNDS: Final = 5
COMMAND: Final = "true"
PROFILES: Final = {
    "unconfined": RiskProfileConfig(level="full", sandbox_enabled=False),
    "landlock": RiskProfileConfig(level="full", sandbox_backend="landlock"),
    "bubblewrap": RiskProfileConfig(level="full", sandbox_backend="bubblewrap"),
}
Runner = Callable[[SpawnPlan, Path], Awaitable[int | None]]


async def supervised(plan: SpawnPlan, workspace: Path) -> int | None:
    result = await run_shell_command(
        COMMAND, cwd=workspace, timeout_secs=30, env=plan.env, sandbox=plan
    )
    return result.returncode


async def direct(plan: SpawnPlan, workspace: Path) -> int | None:
    """The server forks the command and kills its process group afterwards."""
    process = await trio.lowlevel.open_process(
        plan.argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=workspace,
        env=plan.env,
        start_new_session=True,
        preexec_fn=plan.preexec_fn,
    )
    assert process.stdout is not None
    async with process.stdout:
        while await process.stdout.receive_some(65536):
            pass
    await process.wait()
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return process.returncode


async def one_command(
    run: Runner, profile: RiskProfileConfig, posture: SandboxPosture, workspace: Path, shell: str
) -> float:
    """Milliseconds to plan, run and reap one command."""
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
        returncode = await run(plan, workspace)
    elapsed = (time.perf_counter() - started) * 1000
    if returncode != 0:
        raise SystemExit(f"{posture.describe()}: `{COMMAND}` exited {returncode}")
    return elapsed


async def main(runs: int, workspace: Path, shell: str) -> None:
    postures: dict[str, SandboxPosture] = {}
    for name, profile in PROFILES.items():
        posture = resolve_posture(profile)
        if posture.refuses:
            print(f"{name:<12} unavailable: {posture.reason}")
            continue
        postures[name] = posture
    runners: dict[str, Runner] = {"direct": direct, "supervised": supervised}
    timings: dict[tuple[str, str], list[float]] = {
        (name, how): [] for name in postures for how in runners
    }
    for round_index in range(runs + WARM_UP_ROUNDS):
        for name, how in timings:
            elapsed = await one_command(
                runners[how], PROFILES[name], postures[name], workspace, shell
            )
            if round_index >= WARM_UP_ROUNDS:
                timings[name, how].append(elapsed)
    print(f"per-command start-up of `{shell} -c {COMMAND}`, {runs} runs each (ms)")
    print(f"{'backend':<12} {'started':<11} {'median':>8} {'p90':>8} {'vs unconfined':>14}")
    for (name, how), values in timings.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[max(0, int(len(values) * 0.9) - 1)]
        baseline = statistics.median(timings["unconfined", how])
        extra = "" if name == "unconfined" else f"{median - baseline:+.2f}"
        print(f"{name:<12} {how:<11} {median:>8.2f} {p90:>8.2f} {extra:>14}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    shell_program = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
    with tempfile.TemporaryDirectory(prefix="zeroclaw-bench-") as scratch:
        trio.run(main, parser.parse_args().runs, Path(scratch).resolve(), shell_program)
