"""A permission request shows the whole command it approves, through a real `zeroclaw acp`
and a real `zeroclaw prompt`: no hidden tail, and the command in ``rawInput``. (That `zeroclaw prompt`
has no default answer is in test_acp_terminal_client.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import child_env, console_script, open_session, reject_once, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

PADDING = " " * 3000
PADDED_COMMAND = f"ls{PADDING}; echo hidden-tail > tail.txt"


def tool_line(name: str, arguments: dict[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


async def test_shell_approval_carries_the_whole_command(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            prompt = tool_line("shell", {"command": PADDED_COMMAND})
            response = await client.prompt(session_id, prompt, on_request=reject_once)
    assert response["result"]["stopReason"] == "end_turn"
    [request] = client.server_requests
    tool_call = request["params"]["toolCall"]
    assert tool_call["rawInput"] == {"tool": "shell", "summary": PADDED_COMMAND}
    [block] = tool_call["content"]
    assert block["content"]["text"] == f"command: {PADDED_COMMAND}"
    assert not (workspace / "tail.txt").exists()


def test_prompt_shows_the_tail_of_a_padded_command(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    completed = subprocess.run(
        [
            str(console_script("zeroclaw")),
            "prompt",
            tool_line("shell", {"command": PADDED_COMMAND}),
            "--cwd",
            str(workspace),
            "--deny",
        ],
        capture_output=True,
        text=True,
        env=child_env(config_dir, {"NO_COLOR": "1"}),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "  command: ls⟨3000 blanks⟩; echo hidden-tail > tail.txt\n" in completed.stdout
    assert not (workspace / "tail.txt").exists()
