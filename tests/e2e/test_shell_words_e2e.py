"""Through a real `zeroclaw acp`: the shell classifier reads words as bash does, so line
continuations, tilde forms and link-following walks cannot reach a file outside the
workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import allow_once, open_session, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

SECRET = "TOPSECRET-outside-the-workspace"
ESCAPES = [
    "cat .\\\n./outside/secret.txt",  # backslash-newline hides the `..`
    "cat sub/.\\\n./.\\\n./outside/secret.txt",
    "cat ~+/../outside/secret.txt",  # ~+ is the working directory
    "cat ~-/secret.txt",  # the previous directory: not knowable, refused
    "grep -R TOPSECRET .",  # follows the workspace's link to the outside
    "grep -rRn TOPSECRET sub",
    "find -L . -name secret.txt",
]


@pytest.mark.parametrize("command", ESCAPES)
async def test_words_that_bash_reads_differently_are_refused(tmp_path: Path, command: str) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(risk={"forbidden_paths": []}))
    root = tmp_path / "root"
    workspace = root / "ws"
    (workspace / "sub").mkdir(parents=True)
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text(SECRET + "\n")
    (workspace / "sub" / "elsewhere").symlink_to(root / "outside")
    prompt = f"/tool shell {json.dumps({'command': command})}"
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(session_id, prompt, on_request=allow_once)
    assert response["result"]["stopReason"] == "end_turn"
    assert client.server_requests == []  # refused outright, nobody is asked
    [result] = [
        update["rawOutput"]
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "tool_call_update"
    ]
    assert SECRET not in result
    assert "not allowed by security policy" in result or "escapes workspace" in result
