"""What the file tools' no-follow walk (acp_server/security/beneath.py) costs a file_read,
next to the open it replaced, in the same run.

Run: ``uv run python bench/file_tools.py [--runs N]`` (a benchmark, not a test: it prints
figures, exits 0). Each sample is file_read's disk path for one small file, from the
argument to the numbered lines: the jail's ``resolve_path``, the open, the regular-file
check and ``numbered_lines``. ``before`` opens the resolved path at once with
``O_NOFOLLOW`` (which guards only the last component: what the tool did before the walk);
``walk`` reaches it from the jail root one directory at a time (what it does now). The two
alternate sample by sample at each depth, so drift on a shared machine hits both alike.
The thread hop and the JSON-RPC turn around a call are the same for both and left out.
"""

from __future__ import annotations

import argparse
import os
import stat
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from acp_server.agent.tools.files import numbered_lines, open_regular_file
from acp_server.config import RiskProfileConfig
from acp_server.security import SecurityPolicy
from acp_server.security.beneath import READ_FLAGS

DEFAULT_RUNS: Final = 20_000
WARM_UP: Final = 500
DEPTHS: Final = (0, 3, 8)
"""Directories between the workspace and the file."""


def read_before(policy: SecurityPolicy, argument: str) -> str:
    """file_read's open as it was: the resolved path, O_NOFOLLOW on the last name only."""
    path = policy.resolve_path(argument)
    fd = os.open(path, READ_FLAGS)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SystemExit(f"{path} is not a regular file")
    with open(fd, "rb") as handle:
        return numbered_lines(handle, argument, 1, 2000)


def read_walking(policy: SecurityPolicy, argument: str) -> str:
    """file_read's open now: reached from the jail root following no link."""
    path = policy.resolve_path(argument)
    with open(open_regular_file(policy, path, argument), "rb") as handle:
        return numbered_lines(handle, argument, 1, 2000)


def sample(read: Callable[[SecurityPolicy, str], str], policy: SecurityPolicy, arg: str) -> float:
    started = time.perf_counter()
    read(policy, arg)
    return (time.perf_counter() - started) * 1_000_000


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="zeroclaw-bench-") as directory:
        workspace = Path(directory)
        policy = SecurityPolicy(RiskProfileConfig(), workspace)
        print(f"file_read of a 3-line file, {runs} samples each (µs; workspace {workspace})")
        print(
            f"{'depth':>5} {'before':>8} {'walk':>8} {'extra':>8} {'p90 before':>11} {'p90 walk':>9}"
        )
        for depth in DEPTHS:
            names = [f"d{level}" for level in range(depth)]
            parent = workspace.joinpath(*names)
            parent.mkdir(parents=True, exist_ok=True)
            (parent / "notes.txt").write_text("one\ntwo\nthree\n")
            argument = "/".join([*names, "notes.txt"])
            assert read_before(policy, argument) == read_walking(policy, argument)
            timings: dict[str, list[float]] = {"before": [], "walk": []}
            variants = (("before", read_before), ("walk", read_walking))
            for index in range(runs + WARM_UP):
                for name, read in variants if index % 2 else variants[::-1]:
                    elapsed = sample(read, policy, argument)
                    if index >= WARM_UP:
                        timings[name].append(elapsed)
            before, walking = timings["before"], timings["walk"]
            b, w = statistics.median(before), statistics.median(walking)
            print(
                f"{depth:>5} {b:>8.1f} {w:>8.1f} {w - b:>+8.1f} "
                f"{p90(before):>11.1f} {p90(walking):>9.1f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="samples per variant")
    main(parser.parse_args().runs)
