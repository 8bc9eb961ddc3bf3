"""`zeroclaw prompt` prints model text without the terminal control sequences in it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e

HOSTILE = "\x1b]0;pwned\x07hello\x1b]52;c;aGk=\x07 there\rX\x1b[2J\x9b1m!"


def test_prompt_strips_control_sequences_from_model_text(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    completed = subprocess.run(
        [str(console_script("zeroclaw")), "prompt", HOSTILE, "--cwd", str(session_dir(tmp_path))],
        capture_output=True,
        text=True,
        env=child_env(config_dir, {"NO_COLOR": "1"}),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "hello there" in out  # the echo model said it back, readable
    for control in ("\x1b", "\x07", "\r", "\x9b", "pwned", "aGk="):
        assert control not in out
