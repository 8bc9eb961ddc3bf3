"""A test run that is killed (``kill -9``) leaves no PostgreSQL cluster or gateway behind.

Each case runs an inner pytest on a one-test file, with this repository's conftest
(tests/run_guard.py guards it). The inner test starts the throwaway PostgreSQL cluster and a
real ``zeroclaw gateway`` (whose stdin is /dev/null: nothing else would ever end it), notes
their pids and directory, and blocks. The outer test kills the inner pytest with SIGKILL and
watches everything go: at once, through the run's watchdog; or, when the watchdog was
killed as well, when the next test run starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psutil
import pytest
import trio

from tests import run_guard
from tests.helpers import poll_until
from tests.postgres_harness import URL_ENV, find_binaries, unavailable

pytestmark = pytest.mark.e2e

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
STARTED_WITHIN_SECS: Final = 90
GONE_WITHIN_SECS: Final = 30

INNER_TEST: Final = """
import json, os, subprocess, sys, threading
from pathlib import Path

import psycopg

from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, write_config


def test_block_until_killed(tmp_path, postgres_server_or_reason):
    assert not isinstance(postgres_server_or_reason, str), postgres_server_or_reason
    with psycopg.connect(postgres_server_or_reason.url) as conn:
        data = Path(conn.execute("SHOW data_directory").fetchone()[0])
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    config_dir = write_config(tmp_path / "cfg", echo_config())
    gateway = subprocess.Popen(
        [str(console_script("zeroclaw")), "gateway", "--port", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=child_env(config_dir),
    )
    for line in gateway.stderr:  # its log, until it listens
        if b"gateway listening" in line:
            break
    started = {"postmaster": postmaster, "gateway": gateway.pid, "cluster": str(data.parent)}
    Path(os.environ["STARTED_FILE"]).write_text(json.dumps(started))
    threading.Event().wait()  # until the outer test kills this run
"""


@dataclass(frozen=True)
class Started:
    """What the inner run started: pids that must go, and the cluster's directory."""

    pids: tuple[int, ...]
    cluster: Path

    def gone(self) -> bool:
        alive = [pid for pid in self.pids if _alive_pid(pid)]
        return not alive and not self.cluster.exists()


def _alive_pid(pid: int) -> bool:
    try:
        return _alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _inner_env(started_file: Path) -> dict[str, str]:
    """This environment, as a fresh run of its own would have it: no run token, no xdist
    worker, a cluster of its own."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (run_guard.RUN_ENV, URL_ENV, "PYTEST_CURRENT_TEST")
        and not key.startswith("PYTEST_XDIST_")
    }
    return {**env, "PYTHONPATH": str(REPO_ROOT), "STARTED_FILE": str(started_file)}


def _inner_argv(tmp_path: Path, *extra: str) -> list[str]:
    test_file = tmp_path / "inner" / "test_inner.py"
    test_file.parent.mkdir(exist_ok=True)
    test_file.write_text(INNER_TEST)
    # Its own rootdir and ini (none of this repository's options), this repository's
    # conftest as a plugin: the guard and the PostgreSQL fixture.
    (test_file.parent / "pytest.ini").write_text("[pytest]\n")
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
        "-n0", *extra, str(test_file),
    ]  # fmt: skip


@asynccontextmanager
async def inner_run(tmp_path: Path) -> AsyncIterator[tuple[trio.Process, Started]]:
    """The inner pytest, once its test has started everything; killed on the way out."""
    if find_binaries() is None:
        unavailable("a killed run's cluster: no PostgreSQL binaries to start one from")
    started_file = tmp_path / "started.json"
    with (tmp_path / "inner.log").open("wb") as log:
        process = await trio.lowlevel.open_process(
            _inner_argv(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=_inner_env(started_file),
            cwd=tmp_path,
        )
    try:

        def ready() -> bool:
            assert process.returncode is None, (tmp_path / "inner.log").read_text()
            return started_file.exists()

        await poll_until(ready, within=STARTED_WITHIN_SECS)
        noted = json.loads(started_file.read_text())
        started = Started((noted["postmaster"], noted["gateway"]), Path(noted["cluster"]))
        assert all(_alive_pid(pid) for pid in started.pids)
        assert started.cluster.is_dir()
        yield process, started
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _watchdog_of(token: str) -> psutil.Process:
    [watchdog] = [
        process
        for process in psutil.process_iter(["cmdline"])
        if token in (process.info["cmdline"] or []) and "run_guard.py" in str(process.cmdline())
    ]
    return watchdog


async def test_a_killed_run_takes_its_cluster_and_servers_along(tmp_path: Path) -> None:
    async with inner_run(tmp_path) as (process, started):
        process.send_signal(signal.SIGKILL)
        await process.wait()
        await poll_until(started.gone, within=GONE_WITHIN_SECS)


async def test_the_next_run_cleans_up_after_a_run_killed_with_its_watchdog(
    tmp_path: Path,
) -> None:
    async with inner_run(tmp_path) as (process, started):
        token = run_guard.token_for(process.pid)
        assert token is not None
        watchdog = _watchdog_of(token)
        watchdog.suspend()  # so that it cannot see the run end before it is killed
        process.send_signal(signal.SIGKILL)
        await process.wait()
        watchdog.kill()
        await poll_until(lambda: not _alive(watchdog), within=GONE_WITHIN_SECS)
        assert not started.gone()  # nothing cleaned up after this run yet

        # The next run (here one that only collects) sweeps at its start.
        with trio.fail_after(STARTED_WITHIN_SECS):
            after = await trio.run_process(
                _inner_argv(tmp_path, "--collect-only"),
                stdin=subprocess.DEVNULL,
                capture_stdout=True,
                capture_stderr=True,
                env=_inner_env(tmp_path / "unused.json"),
                cwd=tmp_path,
                check=False,
            )
        assert after.returncode == 0, after.stdout.decode() + after.stderr.decode()
        assert started.gone()
