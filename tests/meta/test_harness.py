"""The test harness itself: ports parallel workers cannot race for, a run token that names
one live process, and ``python3`` pinned to the interpreter running the tests."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import sys
from pathlib import Path

import pytest

from tests import run_guard
from tests.helpers import TIMING_SENSITIVE
from tests.ports import ephemeral_low, unused_port, worker_block


def test_each_worker_draws_from_its_own_block_below_the_ephemeral_range() -> None:
    blocks = [
        worker_block({"PYTEST_XDIST_WORKER": f"gw{n}", "PYTEST_XDIST_WORKER_COUNT": "3"}, 32768)
        for n in range(3)
    ]
    ports = [set(block) for block in blocks]
    assert all(len(block) >= 3000 for block in blocks)
    for one, other in itertools.combinations(ports, 2):
        assert not one & other
    assert max(max(block) for block in blocks) < 32768
    assert worker_block({}, 32768) == range(32768 - 12_000, 32768)


def test_unused_ports_are_free_distinct_and_outside_the_ephemeral_range() -> None:
    ports = [unused_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    assert all(port < ephemeral_low() for port in ports)
    for port in ports:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_skipped() -> None:
    first = unused_port()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", first))
        squatter.listen()
        whole_block = len(worker_block(os.environ, ephemeral_low()))
        assert first not in {unused_port() for _ in range(whole_block)}


def test_python3_on_path_is_the_interpreter_running_the_tests() -> None:
    """What the shell tool finds as ``python3`` in every test, whatever PATH the developer's
    shell had (a pyenv shim, or a failing ``python3`` put first)."""
    found = shutil.which("python3")
    assert found is not None
    assert Path(found).parent == Path(sys.executable).parent


def test_a_run_token_names_one_live_process() -> None:
    token = run_guard.token_for(os.getpid())
    assert token is not None
    assert run_guard.token_alive(token)
    pid, _, ticks = token.partition(".")
    assert not run_guard.token_alive(f"{pid}.{int(ticks) + 1}")  # a reused pid
    assert not run_guard.token_alive("not-a-token")
    assert run_guard.current_token() is not None  # this run is guarded


@pytest.mark.parametrize("owned", [True, False])
def test_a_claimed_directory_goes_with_its_run_and_no_other(
    owned: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(run_guard, "CLAIM_ROOTS", (tmp_path,))
    claimed = tmp_path / "zeroclaw-claimed"
    claimed.mkdir()
    monkeypatch.setenv(run_guard.RUN_ENV, "1.2" if owned else "3.4")
    run_guard.claim_directory(claimed)
    unclaimed = tmp_path / "zeroclaw-unclaimed"
    unclaimed.mkdir()
    assert run_guard.claimed_directories() == {claimed: "1.2" if owned else "3.4"}
    swept = run_guard.sweep(lambda token: token == "1.2")
    assert claimed.exists() is not owned
    assert unclaimed.exists()
    assert swept == run_guard.Swept(processes=0, directories=int(owned))


@TIMING_SENSITIVE
def test_timing_sensitive_tests_share_one_worker(request: pytest.FixtureRequest) -> None:
    """Under ``--dist loadgroup`` the scheduler groups tests by the ``@<group>`` suffix of
    their node ids: this test's must carry it."""
    if not request.config.getoption("loadgroup", False):
        pytest.skip("not distributed with --dist loadgroup")
    assert request.node.nodeid.endswith("@timing")
