"""Shared pytest configuration.

Test helpers are importable as ``tests.<folder>.<module>`` (``pythonpath = ["."]``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres_harness import PostgresServer, postgres_server, unavailable


@pytest.fixture(scope="session")
def postgres_server_or_reason() -> Iterator[PostgresServer | str]:
    """One throwaway PostgreSQL for the whole run (tests/postgres_harness.py), started on
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
