"""Start-up cost of one shell command under each OS sandbox backend, next to unconfined,
started through the process supervisor and, for comparison, forked by the server itself,
and planned by this tree's sandbox code and by another revision's (``main`` by default).

Run: ``uv run python bench/sandbox_startup.py [--runs N] [--baseline REF]`` (a benchmark,
not a test: it prints figures, exits 0). Each run is what the shell tool does for one
command: plan the spawn (``plan_spawn``: the Landlock ruleset, or the bubblewrap command
line) and run ``bash -c true`` through ``run_shell_command`` (the supervisor starts it,
reports its exit, and stops what it left). Rounds interleave every row, so drift on a shared
machine hits them alike. Expect a few milliseconds.

Rows, per backend:

* ``supervised``: this tree's plan as the shell tool makes it, with the session's grants
  and the server's private paths (a config directory in the home directory, the usual
  case: nothing to carve out of a granted directory);
* ``direct``: the same plan started the way the shell tool did before the supervisor
  existed: forked by the server (``preexec_fn``), a process-group kill at the end;
* ``REF's plan``: ``REF``'s ``acp_server/security/sandbox`` package, read with ``git show``
  and imported under another name, plans the command (no grants, nothing hidden); it runs
  like ``supervised``, so the difference is what the file-system checks cost;
* ``config in /etc``: this tree's plan with the config directory under ``/etc`` (made and
  removed here, when this user may), which Landlock then grants child by child.

The unconfined row is ``sandbox_enabled = false`` (resource limits only).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import trio
from msgspec.structs import replace

from acp_server.agent.tools.shell import run_shell_command
from acp_server.config import PrivatePath, RiskProfileConfig
from acp_server.security.grants import SessionGrants, session_grants
from acp_server.security.sandbox import SpawnPlan, plan_spawn, resolve_posture, spawned

DEFAULT_RUNS: Final = 200
WARM_UP_ROUNDS: Final = 5
COMMAND: Final = "true"
BACKENDS: Final = ("landlock", "bubblewrap")
SANDBOX_PACKAGE: Final = "acp_server.security.sandbox"
SANDBOX_SOURCE: Final = "packages/acp-server/src/acp_server/security/sandbox"
BASELINE_PACKAGE: Final = "zeroclaw_bench_baseline_sandbox"
Runner = Callable[[SpawnPlan, Path], Awaitable[int | None]]
Planner = Callable[[Path, str], SpawnPlan]


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


@dataclass(frozen=True)
class Row:
    backend: str
    started: str
    plan: Planner
    run: Runner


def command_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def planner(
    spawn: Callable[..., SpawnPlan], posture: Any, profile: RiskProfileConfig, *, grants: bool
) -> Planner:
    """Plans with ``spawn`` (a revision's ``plan_spawn``); ``grants``: as the shell tool
    does, with the session's grants (computed once per session, with its jail)."""
    computed: dict[Path, SessionGrants] = {}

    def plan(workspace: Path, shell: str) -> SpawnPlan:
        extra: dict[str, SessionGrants] = {}
        if grants:
            extra["grants"] = computed.setdefault(workspace, session_grants(profile, workspace))
        return spawn(
            [shell, "-c", COMMAND],
            posture=posture,
            profile=profile,
            workspace=workspace,
            session_id="bench",
            env=command_env(),
            **extra,
        )

    return plan


def this_tree(profile: RiskProfileConfig) -> Planner:
    return planner(plan_spawn, resolve_posture(profile), profile, grants=True)


def baseline_plan(module: ModuleType, profile: RiskProfileConfig) -> Planner:
    return planner(module.plan_spawn, module.resolve_posture(profile), profile, grants=False)


def load_baseline(ref: str, into: Path) -> ModuleType:
    """``ref``'s sandbox package, imported as ``BASELINE_PACKAGE`` from ``into``."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    package = into / BASELINE_PACKAGE
    package.mkdir()
    for name in git("ls-tree", "--name-only", f"{ref}:{SANDBOX_SOURCE}").split():
        if name.endswith(".py"):
            source = git("show", f"{ref}:{SANDBOX_SOURCE}/{name}")
            (package / name).write_text(
                re.sub(re.escape(SANDBOX_PACKAGE), BASELINE_PACKAGE, source)
            )
    sys.path.insert(0, str(into))
    return importlib.import_module(BASELINE_PACKAGE)


@contextmanager
def config_under_etc() -> Iterator[Path | None]:
    """A throwaway config directory under /etc (None when this user cannot make one)."""
    try:
        path = Path(tempfile.mkdtemp(prefix="zeroclaw-bench-", dir="/etc"))
    except OSError:
        yield None
        return
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def with_private_paths(profile: RiskProfileConfig, config_dir: Path) -> RiskProfileConfig:
    return replace(
        profile,
        private_paths=(
            PrivatePath("the config directory", config_dir),
            PrivatePath("the data directory (workspace_dir)", config_dir / "data"),
            PrivatePath("the server user's home directory", Path.home()),
        ),
    )


def rows(baseline: ModuleType, ref: str, etc_config: Path | None) -> list[Row]:
    unconfined = RiskProfileConfig(level="full", sandbox_enabled=False)
    table = [
        Row("unconfined", "direct", this_tree(unconfined), direct),
        Row("unconfined", "supervised", this_tree(unconfined), supervised),
    ]
    for backend in BACKENDS:
        profile = RiskProfileConfig(level="full", sandbox_backend=backend)
        posture = resolve_posture(profile)
        if posture.refuses:
            print(f"{backend:<12} unavailable: {posture.reason}")
            continue
        usual = this_tree(with_private_paths(profile, Path.home() / ".zeroclaw"))
        table += [
            Row(backend, "direct", usual, direct),
            Row(backend, "supervised", usual, supervised),
            Row(backend, f"{ref}'s plan", baseline_plan(baseline, profile), supervised),
        ]
        if etc_config is not None:
            in_etc = this_tree(with_private_paths(profile, etc_config))
            table.append(Row(backend, "config in /etc", in_etc, supervised))
    return table


async def one_command(row: Row, workspace: Path, shell: str) -> float:
    """Milliseconds to plan, run and reap one command."""
    started = time.perf_counter()
    plan = await trio.to_thread.run_sync(row.plan, workspace, shell)
    with spawned(plan):
        returncode = await row.run(plan, workspace)
    elapsed = (time.perf_counter() - started) * 1000
    if returncode != 0:
        raise SystemExit(f"{row.backend} ({row.started}): `{COMMAND}` exited {returncode}")
    return elapsed


async def main(runs: int, workspace: Path, shell: str, table: list[Row]) -> None:
    timings: dict[Row, list[float]] = {row: [] for row in table}
    for round_index in range(runs + WARM_UP_ROUNDS):
        for row in table:
            elapsed = await one_command(row, workspace, shell)
            if round_index >= WARM_UP_ROUNDS:
                timings[row].append(elapsed)
    unconfined = {row.started: statistics.median(timings[row]) for row in table[:2]}
    print(f"per-command start-up of `{shell} -c {COMMAND}`, {runs} runs each (ms)")
    print(f"{'backend':<12} {'started':<16} {'median':>8} {'p90':>8} {'vs unconfined':>14}")
    for row, values in timings.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[max(0, int(len(values) * 0.9) - 1)]
        base = unconfined.get(row.started, unconfined["supervised"])
        extra = "" if row.backend == "unconfined" else f"{median - base:+.2f}"
        print(f"{row.backend:<12} {row.started:<16} {median:>8.2f} {p90:>8.2f} {extra:>14}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--baseline", default="main", metavar="REF")
    arguments = parser.parse_args()
    shell_program = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
    with (
        tempfile.TemporaryDirectory(prefix="zeroclaw-bench-") as scratch,
        config_under_etc() as etc_config,
    ):
        baseline_module = load_baseline(arguments.baseline, Path(scratch))
        workspace = Path(scratch) / "workspace"
        workspace.mkdir()
        table = rows(baseline_module, arguments.baseline, etc_config)
        trio.run(main, arguments.runs, workspace.resolve(), shell_program, table)
