"""A throwaway PostgreSQL server for the tests, and a fresh schema per test.

``ZEROCLAW_TEST_POSTGRES_URL`` names a server to use as it is; otherwise one is started per
test process (per pytest-xdist worker) from the machine's binaries (``initdb`` and
``postgres`` under /usr/lib/postgresql/*/bin or on PATH), listening on 127.0.0.1 only, its
data in a temporary directory under /var/tmp that is removed afterwards. As root the server
runs as the ``postgres`` user (``initdb`` and ``postgres`` refuse root).

``postgres`` runs as a direct child of the test process (no ``pg_ctl``, which detaches it),
so it is stopped by its pid, and tests/run_guard.py stops it and removes its directory even
when the run is killed. Its port comes from tests/ports.py; should another program take it
first anyway, the server says "could not bind" and starts again on another port.

Without either, the tests that need PostgreSQL skip with the reason; with
``ZEROCLAW_REQUIRE_POSTGRES_TESTS=1`` (CI) they fail instead.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests import run_guard
from tests.ports import unused_port

URL_ENV: Final = "ZEROCLAW_TEST_POSTGRES_URL"
REQUIRE_ENV: Final = "ZEROCLAW_REQUIRE_POSTGRES_TESTS"
_SERVER_USER: Final = "postgres"
_START_TIMEOUT_SECS: Final = 60
_STOP_TIMEOUT_SECS: Final = 30
_READY_POLL_SECS: Final = 0.05
_BIND_ATTEMPTS: Final = 5
FAST_SETTINGS: Final = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")
"""A throwaway cluster need not survive a power cut (no test kills PostgreSQL itself)."""


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
    """The directory holding initdb and postgres, newest PostgreSQL first."""
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
        if (directory / "initdb").is_file() and (directory / "postgres").is_file():
            return directory
    return None


class _PortTaken(Exception):
    """The server could not bind its port: another program took it first."""


class LocalCluster:
    """One PostgreSQL cluster under /var/tmp, started from ``binaries``."""

    def __init__(self, binaries: Path, *, settings: Sequence[str] = ()) -> None:
        self.binaries = binaries
        self.settings = tuple(settings)
        self.as_root = os.geteuid() == 0
        self.directory = Path(tempfile.mkdtemp(prefix="zeroclaw-pg-", dir="/var/tmp"))
        run_guard.claim_directory(self.directory)
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    def _server_user(self) -> dict[str, Any]:
        """Popen arguments that run a child as the ``postgres`` user when we are root."""
        if not self.as_root:
            return {}
        return {"user": _SERVER_USER, "group": _SERVER_USER, "extra_groups": []}

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
        init = subprocess.run(
            [str(self.binaries / "initdb"), "-D", str(self.data), "-A", "trust",
             "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"],
            capture_output=True, text=True, timeout=_START_TIMEOUT_SECS, check=False,
            cwd=self.directory, **self._server_user(),
        )  # fmt: skip
        if init.returncode != 0:
            raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        for _ in range(_BIND_ATTEMPTS):
            self.port = unused_port()
            try:
                self._serve()
            except _PortTaken:
                continue
            return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        raise RuntimeError(f"no free port after {_BIND_ATTEMPTS} attempts: {self._log_tail()}")

    def _serve(self) -> None:
        """Run ``postgres`` on ``self.port`` until it accepts connections."""
        argv = [
            str(self.binaries / "postgres"), "-D", str(self.data), "-p", str(self.port),
            "-k", str(self.data), "-c", "listen_addresses=127.0.0.1",
        ]  # fmt: skip
        for setting in self.settings:
            argv += ["-c", setting]
        with self.log.open("ab") as log:
            # A session of its own: a Ctrl-C meant for pytest must not stop the server
            # under the tests that are being torn down.
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.directory,
                start_new_session=True, **self._server_user(),
            )  # fmt: skip
        url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        deadline = time.monotonic() + _START_TIMEOUT_SECS
        while True:
            if self.process.poll() is not None:
                tail = self._log_tail()
                if "could not bind" in tail or "Address already in use" in tail:
                    raise _PortTaken(tail)
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {tail}")
            try:
                with psycopg.connect(url, connect_timeout=2) as conn:
                    row = conn.execute("SHOW data_directory").fetchone()
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    self.stop_server()
                    raise RuntimeError(
                        f"postgres did not accept connections within {_START_TIMEOUT_SECS} s:"
                        f" {self._log_tail()}"
                    ) from None
                time.sleep(_READY_POLL_SECS)  # no event announces readiness
                continue
            if row is None or Path(row[0]) != self.data:
                # Another program's server answered on the port before ours failed to bind.
                self.stop_server()
                raise _PortTaken(f"another server answers on port {self.port}: {row}")
            return

    def _log_tail(self) -> str:
        if not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")[-2000:].strip()

    def stop_server(self) -> None:
        """Immediate shutdown (SIGQUIT): the data is thrown away anyway."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=_STOP_TIMEOUT_SECS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def stop(self) -> None:
        self.stop_server()
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
            f"{URL_ENV}, or install PostgreSQL (initdb and postgres were not found under "
            "/usr/lib/postgresql/*/bin or on PATH; Debian: apt-get install postgresql-15)"
        )
        return
    cluster = LocalCluster(binaries, settings=FAST_SETTINGS)
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
