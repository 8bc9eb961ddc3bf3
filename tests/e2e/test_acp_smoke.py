"""`zeroclaw acp` end to end: the first turn an editor would run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import allow_once, open_session, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


async def test_acp_streams_a_turn_with_a_permission_request_and_exits_on_eof(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "hello.txt").write_text("hi\n")
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            prompt = 'Hello from the test\n/tool shell {"command": "ls"}'
            response = await client.prompt(session_id, prompt, on_request=allow_once)
            result = response["result"]
            assert result["stopReason"] == "end_turn"
            assert result["content"].startswith("Hello from the test")
            assert "hello.txt" in result["content"]
            updates = client.updates(session_id)
            kinds = [update["sessionUpdate"] for update in updates]
            assert kinds[:4] == ["agent_message_chunk"] * 4
            call = next(u for u in updates if u["sessionUpdate"] == "tool_call")
            done = next(
                u
                for u in updates
                if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
            )
            assert call["toolCallId"] == done["toolCallId"]
            assert call["kind"] == "execute"
            # Approved by the operator, yet rawInput is the model's arguments verbatim:
            # exactly what session/load replays later.
            assert call["rawInput"] == {"command": "ls"}
            assert done["status"] == "completed"
            assert "hello.txt" in done["rawOutput"]
            [permission] = client.server_requests
            assert permission["id"] == "zc-out-0"
            # The card's title, the command itself: approving does not rename the card.
            assert permission["params"]["toolCall"]["title"] == call["title"] == "`ls`"
        assert client.process.returncode == 0
    for line in client.raw_lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
