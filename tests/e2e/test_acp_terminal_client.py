"""`zeroclaw demo` and `zeroclaw prompt`: the commands a person runs first."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e


def run(
    args: list[str], *, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(console_script("zeroclaw")), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def test_demo_runs_offline_with_no_config(tmp_path: Path) -> None:
    env = child_env(None, {"HOME": str(tmp_path), "NO_COLOR": "1"})
    env.pop("ZEROCLAW_CONFIG_DIR", None)
    completed = run(["demo", "--fast"], env=env)
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "Hello! This is ZeroClaw" in out
    assert "? Allow `find . -type f`?" in out
    assert "→ Allow once" in out
    assert "✓ `find . -type f` completed" in out
    assert "README.md" in out
    assert "stopReason: end_turn" in out
    assert not (tmp_path / ".zeroclaw").exists()  # the demo leaves no config behind


def test_demo_json_prints_only_frames(tmp_path: Path) -> None:
    completed = run(["demo", "--fast", "--json"], env=child_env(None, {"HOME": str(tmp_path)}))
    assert completed.returncode == 0, completed.stderr
    frames = [json.loads(line) for line in completed.stdout.splitlines()]
    assert frames[-1]["result"]["stopReason"] == "end_turn"
    assert any(frame.get("method") == "session/request_permission" for frame in frames)


def test_prompt_yes_deny_and_json(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = child_env(config_dir, {"NO_COLOR": "1"})
    tool = 'Writing a file\n/tool file_write {"path": "made.txt", "content": "hi"}'
    denied = run(["prompt", tool, "--cwd", str(workspace)], env=env)  # no terminal: denied
    assert denied.returncode == 0, denied.stderr
    assert "Denied by user." in denied.stdout
    assert not (workspace / "made.txt").exists()
    allowed = run(["prompt", tool, "--cwd", str(workspace), "--yes"], env=env)
    assert allowed.returncode == 0, allowed.stderr
    assert (workspace / "made.txt").read_text() == "hi"
    as_json = run(["prompt", "just text", "--json"], env=env, cwd=workspace)
    frames = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert frames[-1]["result"]["content"] == "just text"
    unknown_agent = run(["prompt", "x", "--agent", "ghost"], env=env, cwd=workspace)
    assert unknown_agent.returncode == 1
    assert "Unknown agent `ghost`" in unknown_agent.stderr
    assert "Traceback" not in unknown_agent.stderr


@pytest.mark.parametrize("answer", ["--yes", "--deny"])
def test_prompt_never_answers_a_question_by_itself(tmp_path: Path, answer: str) -> None:
    """--yes and --deny answer approvals; a question's choice is the person's or none."""
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = child_env(config_dir, {"NO_COLOR": "1"})
    tool = '/tool ask_user {"question": "Which colour?", "choices": ["red", "blue"]}'
    completed = run(["prompt", tool, "--cwd", str(workspace), answer], env=env)
    assert completed.returncode == 0, completed.stderr
    assert "? Which colour?\n  1) red\n  2) blue\n" in completed.stdout
    assert "→ dismissed" in completed.stdout
    assert "The user did not pick a choice" in completed.stdout


def test_prompt_passes_on_a_config_error(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", "[acp]\nmax_sessions = 0\n")
    completed = run(["prompt", "hi"], env=child_env(config_dir))
    assert completed.returncode == 2
    assert "`acp.max_sessions`" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_prompt_turns_ctrl_c_into_session_cancel(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(chunk_delay_ms=20))
    words = " ".join(f"w{i}" for i in range(400))
    process = subprocess.Popen(
        [str(console_script("zeroclaw")), "prompt", words, "--cwd", str(session_dir(tmp_path))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=child_env(config_dir, {"NO_COLOR": "1"}),
    )
    assert process.stdout is not None
    assert process.stdout.read(10)  # streaming has started
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err
    assert "(turn cancelled)" in out.decode()
    assert "Traceback" not in err.decode()


def test_prompt_reads_the_text_from_stdin(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    completed = subprocess.run(
        [
            str(console_script("zeroclaw")),
            "prompt",
            "-",
            "--json",
            "--cwd",
            str(session_dir(tmp_path)),
        ],
        input="from\nstdin",
        capture_output=True,
        text=True,
        env=child_env(config_dir),
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    frames = [json.loads(line) for line in completed.stdout.splitlines()]
    assert frames[-1]["result"]["content"] == "from\nstdin"


@pytest.mark.parametrize(("typed", "written"), [("1", True), ("3", False), ("\n3", False)])
def test_prompt_asks_on_the_terminal_when_interactive(
    tmp_path: Path, typed: str, written: bool
) -> None:
    """With a terminal on stdin and neither --yes nor --deny, the permission question is
    put to the person, and their pick (1 = Allow once, 3 = Reject) decides. There is no
    default answer: Enter alone asks again."""
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    tool = '/tool file_write {"path": "made.txt", "content": "hi"}'
    controller, terminal = pty.openpty()
    try:
        os.write(controller, f"{typed}\n".encode())  # typed ahead; the terminal buffers it
        completed = subprocess.run(
            [str(console_script("zeroclaw")), "prompt", tool, "--cwd", str(workspace)],
            stdin=terminal,
            capture_output=True,
            text=True,
            env=child_env(config_dir, {"NO_COLOR": "1"}),
            timeout=60,
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert completed.returncode == 0, completed.stderr
    assert "? Allow Write `made.txt`?" in completed.stdout
    assert "choose" in completed.stdout
    assert (workspace / "made.txt").exists() is written
    assert ("Denied by user." in completed.stdout) is not written
