"""Start-up cost of one shell command under each OS sandbox backend, next to unconfined and
next to another revision's sandbox code (``main`` by default), in the same run.

Run: ``uv run python bench/sandbox_startup.py [--runs N] [--baseline REF]`` (a benchmark, not
a test: it prints figures, exits 0). Each run is what the shell tool does for one command:
plan the spawn (``plan_spawn``: the Landlock ruleset, or the bubblewrap command line) and run
``bash -c true`` through ``run_shell_command`` (a new session, the pipe, the process-group
reap). The unconfined row is ``sandbox_enabled = false`` (resource limits only); the
difference to it is what a sandbox adds per command.

``REF``'s ``acp_server/security/sandbox`` package is read with ``git show`` and imported
under another name, so its ``plan_spawn`` runs in this process, interleaved with this tree's
(rounds alternate every row, so drift on a shared machine hits them alike). This tree's rows
run as the shell tool runs them: with the session's grants, the server's private paths
hidden. Two layouts: the private paths where nothing grants them (the home directory, the
usual case: no carving), and, when this user may create one, a config directory under
``/etc``, which Landlock then grants child by child.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import trio

from acp_server.agent.tools.shell import run_shell_command
from acp_server.config import PrivatePath, RiskProfileConfig
from acp_server.security.grants import session_grants
from acp_server.security.sandbox import plan_spawn, resolve_posture, spawned

DEFAULT_RUNS: Final = 200
WARM_UP_ROUNDS: Final = 5
COMMAND: Final = "true"
SANDBOX_PACKAGE: Final = "acp_server.security.sandbox"
SANDBOX_SOURCE: Final = "packages/acp-server/src/acp_server/security/sandbox"
BASELINE_PACKAGE: Final = "zeroclaw_bench_baseline_sandbox"
BACKENDS: Final = ("landlock", "bubblewrap")

Planner = Callable[[RiskProfileConfig, Any, Path, str], Any]


@dataclass(frozen=True)
class Row:
    name: str
    profile: RiskProfileConfig
    posture: Any
    plan: Planner


def load_baseline(ref: str, into: Path) -> ModuleType:
    """``ref``'s sandbox package, imported as ``BASELINE_PACKAGE`` from ``into``."""
    root = Path(__file__).resolve().parent.parent
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{ref}:{SANDBOX_SOURCE}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    package = into / BASELINE_PACKAGE
    package.mkdir()
    for name in names:
        if not name.endswith(".py"):
            continue
        source = subprocess.run(
            ["git", "show", f"{ref}:{SANDBOX_SOURCE}/{name}"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (package / name).write_text(re.sub(re.escape(SANDBOX_PACKAGE), BASELINE_PACKAGE, source))
    sys.path.insert(0, str(into))
    return importlib.import_module(BASELINE_PACKAGE)


def this_tree(profile: RiskProfileConfig, posture: Any, workspace: Path, shell: str) -> Any:
    """The shell tool's spawn: the session's grants (computed once per session, with the
    jail; here per command, which only costs more) and the command line."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return plan_spawn(
        [shell, "-c", COMMAND],
        posture=posture,
        profile=profile,
        workspace=workspace,
        session_id="bench",
        env=env,
        grants=session_grants(profile, workspace),
    )


def baseline_planner(module: ModuleType) -> Planner:
    def plan(profile: RiskProfileConfig, posture: Any, workspace: Path, shell: str) -> Any:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        return module.plan_spawn(
            [shell, "-c", COMMAND],
            posture=posture,
            profile=profile,
            workspace=workspace,
            session_id="bench-baseline",
            env=env,
        )

    return plan


async def one_command(row: Row, workspace: Path, shell: str) -> float:
    """Milliseconds for the shell tool's spawn path to plan, run and reap one command."""
    started = time.perf_counter()
    plan = await trio.to_thread.run_sync(row.plan, row.profile, row.posture, workspace, shell)
    with spawned(plan):
        result = await run_shell_command(
            COMMAND, cwd=workspace, timeout_secs=30, env=plan.env, sandbox=plan
        )
    elapsed = (time.perf_counter() - started) * 1000
    if result.returncode != 0:
        raise SystemExit(f"{row.name}: `{COMMAND}` failed: {result.output!r}")
    return elapsed


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


def private_paths(config_dir: Path) -> tuple[PrivatePath, ...]:
    return (
        PrivatePath("the config directory", config_dir),
        PrivatePath("the data directory (workspace_dir)", config_dir / "data"),
        PrivatePath("the server user's home directory", Path.home()),
    )


def rows(baseline: ModuleType, etc_config: Path | None) -> list[Row]:
    found = [
        Row(
            "unconfined",
            RiskProfileConfig(level="full", sandbox_enabled=False),
            resolve_posture(RiskProfileConfig(sandbox_enabled=False)),
            this_tree,
        )
    ]
    home_config = Path.home() / ".zeroclaw"
    for backend in BACKENDS:
        profile = RiskProfileConfig(level="full", sandbox_backend=backend)
        mine = resolve_posture(profile)
        theirs = baseline.resolve_posture(profile)
        if mine.refuses:
            print(f"{backend:<12} unavailable: {mine.reason}")
            continue
        found.append(Row(f"{backend} (baseline)", profile, theirs, baseline_planner(baseline)))
        hidden = replace(profile, private_paths=private_paths(home_config))
        found.append(Row(f"{backend} (this tree)", hidden, mine, this_tree))
        if etc_config is not None:
            in_etc = replace(profile, private_paths=private_paths(etc_config))
            found.append(Row(f"{backend} (this, config in /etc)", in_etc, mine, this_tree))
    return found


async def main(runs: int, workspace: Path, shell: str, table: list[Row], ref: str) -> None:
    timings: dict[str, list[float]] = {row.name: [] for row in table}
    for round_index in range(runs + WARM_UP_ROUNDS):
        for row in table:
            elapsed = await one_command(row, workspace, shell)
            if round_index >= WARM_UP_ROUNDS:
                timings[row.name].append(elapsed)
    print(f"per-command start-up of `{shell} -c {COMMAND}`, {runs} runs each (ms); baseline {ref}")
    print(f"{'row':<34} {'median':>8} {'p90':>8} {'vs unconfined':>14}")
    unconfined = statistics.median(timings["unconfined"])
    for name, values in timings.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[max(0, int(len(values) * 0.9) - 1)]
        extra = "" if name == "unconfined" else f"{median - unconfined:+.2f}"
        print(f"{name:<34} {median:>8.2f} {p90:>8.2f} {extra:>14}")


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
        table = rows(baseline_module, etc_config)
        trio.run(
            main, arguments.runs, workspace.resolve(), shell_program, table, arguments.baseline
        )
