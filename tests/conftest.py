"""Shared pytest configuration.

Test helpers are importable as ``tests.<folder>.<module>`` (``pythonpath = ["."]``).

The run is guarded (tests/run_guard.py): whatever it starts is stopped when it ends, even
when it is killed. Under pytest-xdist each worker starts its own throwaway PostgreSQL on
first use (the session-scoped fixture below is per worker).

``python3`` is the interpreter running the tests, whatever PATH says (``pin_python``).
Compiled bytecode is cached for every process of the run, outside the source tree when the
environment forbids writing it there (``cache_bytecode``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from hypothesis import settings

from tests import run_guard
from tests.postgres_harness import PostgresServer, postgres_server, unavailable

# Hypothesis' per-example deadline is a timed assertion: on a loaded two-core machine the
# first example of a test that imports a parser on first use takes seconds. Speed is measured
# in bench/, so examples run without one.
settings.register_profile("zeroclaw", deadline=None)
settings.load_profile("zeroclaw")

_SWEPT = pytest.StashKey[run_guard.Swept]()


def pin_python() -> None:
    """Put the directory of the interpreter running the tests first on PATH, as `uv run`
    does. Commands the tests have a server run say ``python3`` (the name the security
    policy allows), and it must be this interpreter: on a PATH of the user's it may be a
    pyenv shim, a script that the OS sandbox gives no access to, or anything else."""
    bin_dir = str(Path(sys.executable).parent)
    entries = os.environ.get("PATH", "").split(os.pathsep)
    if entries[:1] != [bin_dir]:
        os.environ["PATH"] = os.pathsep.join([bin_dir, *entries])


BYTECODE_CACHE_DIR_NAME: Final = "pycache"
"""Under the virtual environment's root: where the run caches bytecode when
``PYTHONDONTWRITEBYTECODE`` is set (removed with the environment)."""


def cache_bytecode() -> None:
    """Let this run's processes cache compiled bytecode, in a directory of the virtual
    environment rather than beside the sources, when ``PYTHONDONTWRITEBYTECODE`` is set.

    With that variable every `zeroclaw` a test starts compiled all of its modules (trio,
    httpx, acp_server...) from source: ~0.5 s of CPU per start instead of ~0.2 s, and the
    end-to-end tests start hundreds. The variable asks that nothing be written beside the
    sources; ``PYTHONPYCACHEPREFIX`` keeps that promise (Python reads and writes every
    ``.pyc`` under the prefix). A prefix the user chose is kept. Set in the controller before
    pytest-xdist starts its workers, so they, and everything they start, inherit it."""
    if os.environ.get("PYTHONPYCACHEPREFIX") or not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix = Path(sys.prefix) / BYTECODE_CACHE_DIR_NAME
    try:
        prefix.mkdir(exist_ok=True)
    except OSError:
        return  # a read-only environment: compile from source, as before
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = str(prefix)  # this process too (its test modules, under -n0)
    sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    pin_python()
    if not hasattr(config, "workerinput"):  # the controller, or the one process under -n0
        cache_bytecode()
    swept = run_guard.start_guard()
    if swept:
        config.stash[_SWEPT] = swept


def pytest_report_header(config: pytest.Config) -> list[str]:
    swept = config.stash.get(_SWEPT, None)
    if swept is None:
        return []
    return [f"stopped and removed what killed test runs left: {swept.describe()}"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--dist loadgroup`` sends every test whose node id ends in ``@<group>`` to one
    worker; pytest-xdist adds that suffix on each worker by assigning the legacy ``_nodeid``
    attribute, which pytest 9.2 no longer reads (its node ids are structured), so the groups
    silently vanish. Add it where it is missing (tests/meta/test_harness.py checks)."""
    if not config.getoption("loadgroup", False):
        return
    for item in items:
        groups = sorted({str(mark.args[0]) for mark in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = type(item._id).parse(item.nodeid + suffix)


@pytest.fixture(scope="session")
def postgres_server_or_reason() -> Iterator[PostgresServer | str]:
    """One throwaway PostgreSQL per test process (tests/postgres_harness.py), started on
    first use, or why there is none."""
    yield from postgres_server()


@pytest.fixture
def postgres_url(postgres_server_or_reason: PostgresServer | str) -> Iterator[str]:
    """A URL to an empty schema of its own on the test PostgreSQL (skips without one)."""
    if isinstance(postgres_server_or_reason, str):
        unavailable(postgres_server_or_reason)
        raise AssertionError("unreachable")
    with postgres_server_or_reason.fresh_schema() as url:
        yield url
