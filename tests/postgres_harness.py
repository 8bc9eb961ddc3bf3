"""A throwaway PostgreSQL server for the tests, and a fresh schema per test.

``ZEROCLAW_TEST_POSTGRES_URL`` names a server to use as it is; otherwise one is started once
per test session from the machine's binaries (``initdb``/``pg_ctl`` under
/usr/lib/postgresql/*/bin or on PATH), listening on 127.0.0.1 only, its data in a
temporary directory under /var/tmp that is removed afterwards. ``initdb`` and ``pg_ctl``
refuse to run as root, so as root they run as the ``postgres`` user (``runuser``).

Without either, the tests that need PostgreSQL skip with the reason; with
``ZEROCLAW_REQUIRE_POSTGRES_TESTS=1`` (CI) they fail instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

URL_ENV: Final = "ZEROCLAW_TEST_POSTGRES_URL"
REQUIRE_ENV: Final = "ZEROCLAW_REQUIRE_POSTGRES_TESTS"
_SERVER_USER: Final = "postgres"
_START_TIMEOUT_SECS: Final = 60


@dataclass(frozen=True)
class PostgresServer:
    url: str
    """A URL for the server's ``postgres`` database as its superuser."""

    @contextmanager
    def fresh_schema(self) -> Iterator[str]:
        """A URL whose connections see a new, empty schema first on their search path;
        the schema and everything in it is dropped afterwards."""
        schema = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            params = {**conninfo_to_dict(self.url), "options": f"-c search_path={schema}"}
            # A postgresql:// URL, as [storage] url takes: every parameter in the query.
            yield f"postgresql://?{urlencode(params, quote_via=quote)}"
        finally:
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def unavailable(reason: str) -> None:
    """Skip (or, when CI requires these tests, fail) for ``reason``."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: PostgreSQL tests must run)")
    pytest.skip(reason)


def find_binaries() -> Path | None:
    """The directory holding initdb and pg_ctl, newest PostgreSQL first."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: int(Path(path).parent.name) if Path(path).parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path is not None:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        directory = Path(candidate)
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LocalCluster:
    """One PostgreSQL cluster under /var/tmp, started from ``binaries``."""

    def __init__(self, binaries: Path, *, settings: Sequence[str] = ()) -> None:
        self.binaries = binaries
        self.settings = tuple(settings)
        self.as_root = os.geteuid() == 0
        self.directory = Path(tempfile.mkdtemp(prefix="zeroclaw-pg-", dir="/var/tmp"))
        self.data = self.directory / "data"
        self.port = _free_port()

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.binaries / argv[0]), *argv[1:]]
        if self.as_root:
            command = ["runuser", "-u", _SERVER_USER, "--", *command]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT_SECS,
            check=False,
            cwd=self.directory,
        )

    def start(self) -> str:
        """Start the cluster; its URL, or raise RuntimeError with what went wrong."""
        if self.as_root:
            try:
                server_user = pwd.getpwnam(_SERVER_USER)
            except KeyError:
                raise RuntimeError(
                    f"running as root and there is no `{_SERVER_USER}` user"
                ) from None
            os.chown(self.directory, server_user.pw_uid, server_user.pw_gid)
        init = self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
            "-E", "UTF8", "--locale=C.UTF-8",
        )  # fmt: skip
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        options = " ".join(
            [f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data}"]
            + [f"-c {setting}" for setting in self.settings]
        )
        started = self._run(
            "pg_ctl", "-D", str(self.data), "-w", "-t", str(_START_TIMEOUT_SECS),
            "-l", str(self.data / "server.log"), "-o", options, "start",
        )  # fmt: skip
        if started.returncode != 0:
            log = self.data / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {tail}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


def postgres_server() -> Iterator[PostgresServer | str]:
    """The session's server, or the reason there is none (a generator for a fixture)."""
    given = os.environ.get(URL_ENV, "").strip()
    if given:
        try:
            conninfo_to_dict(given)
        except psycopg.ProgrammingError as exc:
            yield f"{URL_ENV} is not a PostgreSQL URL: {exc}"
            return
        yield PostgresServer(given)
        return
    binaries = find_binaries()
    if binaries is None:
        yield (
            "PostgreSQL tests need a server: set "
            f"{URL_ENV}, or install PostgreSQL (initdb and pg_ctl were not found under "
            "/usr/lib/postgresql/*/bin or on PATH; Debian: apt-get install postgresql-15)"
        )
        return
    cluster = LocalCluster(binaries, settings=("fsync=off", "full_page_writes=off"))
    try:
        try:
            url = cluster.start()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            yield f"could not start a throwaway PostgreSQL from {binaries}: {exc}"
            return
        yield PostgresServer(url)
    finally:
        cluster.stop()


def advisory_lock_holders(url: str) -> list[int]:
    """The server processes (pids) holding an advisory lock, one entry per lock."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return [int(row[0]) for row in rows]
