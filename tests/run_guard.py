"""Nothing a test run starts outlives it, even a run that is killed (``kill -9``, a closed
terminal, a CI time-out).

The outermost pytest process (the pytest-xdist controller, or the only process under
``-n0``) puts ``ZEROCLAW_TEST_RUN=<token>`` into its environment before anything starts, so
every process of the run inherits it: the xdist workers, ``zeroclaw acp`` and ``zeroclaw
gateway`` children, HAProxy, the throwaway PostgreSQL clusters (tests/postgres_harness.py).
It then starts a watchdog, this file run as a script, in a session of its own (a Ctrl-C or a
hang-up of the terminal does not reach it). The watchdog waits for the pytest process to end
(a pidfd: it sees the end however it comes) and then stops every process that still carries
the token, PostgreSQL with SIGQUIT (its immediate shutdown, which also frees its System V
shared memory), the others with SIGTERM and SIGKILL after a grace period, and removes the
directories claimed for the run (``claim_directory``).

The parent-death signal (``PR_SET_PDEATHSIG``) cannot do this: it fires when the *thread*
that started a process ends, and trio starts processes from worker threads that end after
ten idle seconds, so it would stop a gateway in the middle of a test.

A run whose watchdog was killed as well is cleaned up by the next run: at start, processes
and directories whose run's pytest process is gone are stopped and removed
(``sweep_dead_runs``). A token names its pytest process by pid and start time, so a reused
pid never passes for a live run.

This module uses the standard library only: the watchdog runs it with ``python -I``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

RUN_ENV: Final = "ZEROCLAW_TEST_RUN"
"""The environment variable that tags every process of a test run with the run's token."""
CLAIM_FILE: Final = ".zeroclaw-test-run"
"""Written into a directory the run owns (its content: the token); removed with the run."""
CLAIM_ROOTS: Final = (Path("/var/tmp"),)
"""Where claimed directories live (the PostgreSQL clusters: /tmp is root-only here)."""
CLAIM_PREFIX: Final = "zeroclaw-"
GRACE_SECS: Final = 3.0
"""How long a process has to end after SIGTERM / SIGQUIT before SIGKILL."""
KILLED_WAIT_SECS: Final = 5.0
SWEEP_ROUNDS: Final = 5
"""A process may start another while the sweep stops it: look again, this many times."""
_ENV_PREFIX: Final = RUN_ENV.encode() + b"="
_QUIT_ON_SIGQUIT: Final = frozenset({"postgres", "postmaster"})


# -- tokens -----------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot, /proc/<pid>/stat field 22); None when
    there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # Field 2 (the command name, in parentheses) may hold spaces and parentheses itself.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[19])


def token_for(pid: int) -> str | None:
    """The token that names process ``pid`` (None when it does not exist)."""
    ticks = _start_ticks(pid)
    return None if ticks is None else f"{pid}.{ticks}"


def token_alive(token: str) -> bool:
    """Whether the pytest process a token names is still running."""
    pid, _, ticks = token.partition(".")
    if not pid.isdigit() or not ticks.isdigit():
        return False
    return _start_ticks(int(pid)) == int(ticks)


def current_token() -> str | None:
    """This run's token (None outside a guarded run)."""
    return os.environ.get(RUN_ENV) or None


# -- what a run owns --------------------------------------------------------------------


def _process_token(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(_ENV_PREFIX):
            return entry[len(_ENV_PREFIX) :].decode(errors="replace")
    return None


def tagged_processes() -> dict[int, str]:
    """Every process carrying a run token, with its token (this process excepted)."""
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            token = _process_token(int(entry.name))
            if token is not None:
                found[int(entry.name)] = token
    return found


def claim_directory(path: Path) -> None:
    """Mark ``path`` (a directory under ``CLAIM_ROOTS`` named ``zeroclaw-...``) as this
    run's: it is removed when the run ends, however it ends."""
    token = current_token()
    if token is not None:
        (path / CLAIM_FILE).write_text(token, encoding="utf-8")


def claimed_directories() -> dict[Path, str]:
    """Every claimed directory, with the token of the run that claimed it."""
    found: dict[Path, str] = {}
    for root in CLAIM_ROOTS:
        with contextlib.suppress(OSError):
            for entry in os.scandir(root):
                if entry.name.startswith(CLAIM_PREFIX) and entry.is_dir(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        claim = Path(entry.path) / CLAIM_FILE
                        found[Path(entry.path)] = claim.read_text(encoding="utf-8").strip()
    return found


# -- stopping ---------------------------------------------------------------------------


@contextlib.contextmanager
def _pidfds(pids: Iterable[int], tokens: Mapping[int, str]) -> Iterator[dict[int, int]]:
    """A pidfd for each of ``pids`` that still carries its token (a pidfd keeps naming the
    same process even if the pid is reused later), closed afterwards."""
    opened: dict[int, int] = {}
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            if _process_token(pid) == tokens[pid]:
                opened[pid] = fd
            else:
                os.close(fd)
        yield opened
    finally:
        for fd in opened.values():
            os.close(fd)


def _signal_all(fds: Mapping[int, int], pick: Mapping[int, int] | int) -> None:
    for pid, fd in fds.items():
        number = pick if isinstance(pick, int) else pick[pid]
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, number)


def _wait_all(fds: Mapping[int, int], within: float) -> set[int]:
    """Wait until every process behind ``fds`` has ended, up to ``within`` seconds; the
    pids still running."""
    running = dict(fds)
    deadline = time.monotonic() + within
    poller = select.poll()
    for fd in running.values():
        poller.register(fd, select.POLLIN)
    while running:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for fd, _event in poller.poll(left * 1000):
            poller.unregister(fd)
            running = {pid: other for pid, other in running.items() if other != fd}
    return set(running)


def _polite_signal(pid: int) -> int:
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return signal.SIGTERM
    return signal.SIGQUIT if name in _QUIT_ON_SIGQUIT else signal.SIGTERM


def stop_processes(tokens: Mapping[int, str]) -> int:
    """Stop the processes ``tokens`` names (pid → token they must still carry): a polite
    signal, then SIGKILL after ``GRACE_SECS``. Returns how many there were."""
    with _pidfds(tokens, tokens) as fds:
        _signal_all(fds, {pid: _polite_signal(pid) for pid in fds})
        stubborn = _wait_all(fds, GRACE_SECS)
        survivors = {pid: fds[pid] for pid in stubborn}
        _signal_all(survivors, signal.SIGKILL)
        _wait_all(survivors, KILLED_WAIT_SECS)
        return len(fds)


@dataclass(frozen=True)
class Swept:
    processes: int
    directories: int

    def __bool__(self) -> bool:
        return bool(self.processes or self.directories)

    def describe(self) -> str:
        return f"{self.processes} process(es) and {self.directories} directory(ies)"


def sweep(belongs: Callable[[str], bool]) -> Swept:
    """Stop the tagged processes and remove the claimed directories whose token
    ``belongs`` (processes first: a server may still write into its directory)."""
    stopped = 0
    for _ in range(SWEEP_ROUNDS):
        mine = {pid: token for pid, token in tagged_processes().items() if belongs(token)}
        if not mine:
            break
        stopped += stop_processes(mine)
    removed = 0
    for path, token in claimed_directories().items():
        if belongs(token):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return Swept(stopped, removed)


def sweep_dead_runs() -> Swept:
    """Clean up after earlier runs that were killed together with their watchdog."""
    return sweep(lambda token: not token_alive(token))


# -- the guard and its watchdog ----------------------------------------------------------

_watchdog: subprocess.Popen[bytes] | None = None
"""Kept, not waited for: it outlives this process by design."""


def start_guard() -> Swept | None:
    """In the outermost pytest process: tag the run and start its watchdog; first sweep
    what killed runs left. None in a process of a run already guarded (an xdist worker)."""
    if current_token() is not None:
        return None
    swept = sweep_dead_runs()
    token = token_for(os.getpid())
    assert token is not None, "this process has no /proc entry"
    untagged = {key: value for key, value in os.environ.items() if key != RUN_ENV}
    global _watchdog
    _watchdog = subprocess.Popen(
        [sys.executable, "-I", str(Path(__file__).resolve()), token],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env=untagged,
        start_new_session=True,
    )
    os.environ[RUN_ENV] = token
    return swept


def _watch(token: str) -> None:
    """Wait for the pytest process ``token`` names to end, then sweep the run."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pid = int(token.partition(".")[0])
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        fd = None
    if fd is not None and token_alive(token):
        select.select([fd], [], [])
    swept = sweep(lambda found: found == token)
    if swept:
        with contextlib.suppress(OSError):
            sys.stderr.write(
                f"zeroclaw test guard: the run ended leaving {swept.describe()}; removed them\n"
            )


if __name__ == "__main__":
    _watch(sys.argv[1])
