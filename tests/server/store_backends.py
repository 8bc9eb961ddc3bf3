"""The session store's backends as the store tests see them: open one (again), read its
rows from another connection, make its next insert of a given tool call fail.

``backend`` (a fixture parametrized over "sqlite" and "postgres") runs a test once per
backend; the PostgreSQL run skips (or fails, in CI) without a server: tests/postgres_harness.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from acp_server.storage import SessionBackend
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.sqlite import SessionStore

TABLES = ("acp_sessions", "acp_messages", "acp_tool_calls")


def _sqlite_implements_the_contract(store: SessionStore) -> SessionBackend:
    return store  # checked by mypy: the backends satisfy storage/contract.py


def _postgres_implements_the_contract(store: PostgresSessionStore) -> SessionBackend:
    return store


@dataclass
class Backend:
    name: str
    open: Callable[[], SessionBackend]
    """A new store on the same database (reopening sees what an earlier one wrote)."""
    query: Callable[[str], list[tuple[Any, ...]]]
    """Rows of a SELECT run on a connection of the test's own."""
    execute: Callable[[str], None]
    """A statement run (and committed) on a connection of the test's own."""

    def snapshot(self) -> tuple[object, ...]:
        return tuple(self.query(f"SELECT * FROM {table} ORDER BY id") for table in TABLES)

    def count(self, table: str) -> int:
        return int(self.query(f"SELECT count(*) FROM {table}")[0][0])

    def fail_inserts_of_tool_call(self, call_id: str) -> None:
        """From now on inserting the tool row of ``call_id`` fails with 'injected'."""
        if self.name == "sqlite":
            self.execute(
                "CREATE TRIGGER injected_failure BEFORE INSERT ON acp_tool_calls"
                f" WHEN NEW.tool_call_id = '{call_id}' BEGIN SELECT RAISE(ABORT, 'injected'); END"
            )
            return
        self.execute(
            "CREATE FUNCTION injected_failure() RETURNS trigger LANGUAGE plpgsql AS $$"
            f" BEGIN IF NEW.tool_call_id = '{call_id}' THEN RAISE EXCEPTION 'injected'; END IF;"
            " RETURN NEW; END $$"
        )
        self.execute(
            "CREATE TRIGGER injected_failure BEFORE INSERT ON acp_tool_calls"
            " FOR EACH ROW EXECUTE FUNCTION injected_failure()"
        )

    def stop_failing(self) -> None:
        if self.name == "sqlite":
            self.execute("DROP TRIGGER injected_failure")
        else:
            self.execute("DROP TRIGGER injected_failure ON acp_tool_calls")


def sqlite_backend(path: Path) -> Backend:
    def query(sql: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(path) as conn:
            return conn.execute(sql).fetchall()

    def execute(sql: str) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(sql)

    return Backend("sqlite", lambda: SessionStore.open(path), query, execute)


def postgres_backend(url: str) -> Backend:
    def query(sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            return conn.execute(sql).fetchall()

    def execute(sql: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)

    return Backend("postgres", lambda: PostgresSessionStore.open(url), query, execute)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield sqlite_backend(tmp_path / "data" / "sessions" / "acp-sessions.db")
    else:
        yield postgres_backend(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(backend: Backend) -> Iterator[SessionBackend]:
    """A store on ``backend``'s database, closed after the test."""
    opened = backend.open()
    try:
        yield opened
    finally:
        opened.close()
