"""The session store opened by separate processes: file modes enforced by the OS, and
several `zeroclaw acp` processes creating the same new store file at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.storage.sqlite import SessionStore
from tests.e2e.helpers import unprivileged_prefix

pytestmark = pytest.mark.e2e  # spawns processes

PROCESS_DEADLINE_SECS = 60


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "sessions" / "acp-sessions.db"


_OPEN_SCRIPT = """
import sys
from pathlib import Path
from acp_server.storage import StoreUnavailable
from acp_server.storage.sqlite import SessionStore
try:
    SessionStore.open(Path(sys.argv[1]))
except StoreUnavailable as exc:
    print("unavailable:", exc)
else:
    print("opened")
"""


def _open_in_subprocess(path: Path) -> str:
    result = subprocess.run(
        [*unprivileged_prefix(), sys.executable, "-c", _OPEN_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_read_only_directory(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    sessions.chmod(0o555)
    try:
        output = _open_in_subprocess(sessions / "acp-sessions.db")
    finally:
        sessions.chmod(0o755)
    assert output.startswith("unavailable:"), output
    assert list(sessions.iterdir()) == []


@pytest.mark.parametrize("mode", [0o000, 0o444])
def test_unusable_existing_file_is_kept(db_path: Path, mode: int) -> None:
    SessionStore.open(db_path).close()
    before = db_path.read_bytes()
    db_path.chmod(mode)
    try:
        output = _open_in_subprocess(db_path)
    finally:
        db_path.chmod(0o644)
    assert output.startswith("unavailable:"), output
    assert db_path.read_bytes() == before


_OPEN_WHEN_TOLD_SCRIPT = """
import sys
from pathlib import Path
from acp_server.storage.sqlite import SessionStore
from tests.e2e.helpers import unprivileged_prefix
print("ready", flush=True)
sys.stdin.readline()
store = SessionStore.open(Path(sys.argv[1]))
store.create_session(sys.argv[2], "default", "/w")
store.close()
print("created", flush=True)
"""


def test_processes_starting_together_on_a_new_file_all_open_it(db_path: Path) -> None:
    """Editor windows launch `zeroclaw acp` at once: they race to create and migrate."""
    openers = 4
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _OPEN_WHEN_TOLD_SCRIPT, str(db_path), f"s{index}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for index in range(openers)
    ]
    try:
        for child in children:  # every child has imported the store and waits for "go"
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outputs = [child.communicate(timeout=PROCESS_DEADLINE_SECS)[0] for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert [child.returncode for child in children] == [0] * openers
    assert outputs == ["created\n"] * openers
    store = SessionStore.open(db_path)
    try:
        assert sorted(info.session_id for info in store.list_sessions()) == [
            f"s{index}" for index in range(openers)
        ]
    finally:
        store.close()
