"""Through a real `zeroclaw acp`: one allow-always of shell does not let code runners or
machine-state changes through, and never covers a higher risk class than it approved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import open_session, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

RUNNERS = [
    "python3 -c \"open('python.txt', 'w')\"",
    "node -e \"require('fs').writeFileSync('node.txt', '')\"",
    "git grep -O'echo x > grep.txt' foo",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='echo x' git status",
    "GIT_EXTERNAL_DIFF=./run.sh git diff",
    "npm test",
    "cargo run",
    "pip install ./pkg",
    "hostname zeroclaw-evil",
    "date -s 2001-01-01",
]


def shell(command: str) -> str:
    return f"/tool shell {json.dumps({'command': command})}"


def answering(*option_ids: str) -> Any:
    """Answer the permission requests in order with ``option_ids``."""
    answers = iter(option_ids)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "selected", "optionId": next(answers)}}

    return answer


def tool_results(client: Any, session_id: str) -> list[str]:
    return [
        update["rawOutput"]
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "tool_call_update" and update["status"] != "in_progress"
    ]


async def test_allow_always_does_not_let_code_runners_through(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    prompt = "\n".join([shell("ls"), *(shell(command) for command in RUNNERS)])
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(session_id, prompt, on_request=answering("allow-always"))
    assert response["result"]["stopReason"] == "end_turn"
    assert len(client.server_requests) == 1  # only `ls` was asked about
    _ls, *refused = tool_results(client, session_id)
    assert len(refused) == len(RUNNERS)
    for command, result in zip(RUNNERS, refused, strict=True):
        assert result.startswith("High-risk command blocked by security policy"), command
    assert sorted(path.name for path in workspace.iterdir()) == []


async def test_allow_always_covers_only_the_risk_class_it_approved(tmp_path: Path) -> None:
    config = echo_config(risk={"require_approval_for_medium_risk": False})
    config_dir = write_config(tmp_path / "cfg", config)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    prompt = "\n".join(
        [
            shell("ls"),  # asked: allow-always (low risk)
            shell("echo a > a.txt"),  # medium: asked again, rejected
            shell("echo b > b.txt"),  # medium: asked, allow-always
            shell("echo c > c.txt"),  # medium, now covered
            shell("ls"),  # low, covered
        ]
    )
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            await client.prompt(
                session_id,
                prompt,
                on_request=answering("allow-always", "reject-once", "allow-always"),
            )
    assert len(client.server_requests) == 3
    assert sorted(path.name for path in workspace.iterdir()) == ["b.txt", "c.txt"]
