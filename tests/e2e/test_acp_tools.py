"""Tools that talk back to the client, through a real `zeroclaw acp`: ask_user,
escalate_to_human, todo_write, deliver_file, and prompt blobs written under uploads/."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import ZED_CLIENT_INFO, open_session, spawn_acp
from tests.helpers import echo_config, rpc_error, write_config

pytestmark = pytest.mark.e2e


async def test_interaction_tools_reach_the_client(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()

    def pick_second(request: dict[str, Any]) -> dict[str, Any]:
        return {
            "outcome": {
                "outcome": "selected",
                "optionId": request["params"]["options"][1]["optionId"],
            }
        }

    prompt = "\n".join(
        [
            '/tool ask_user {"question": "Which colour?", "choices": ["red", "blue"]}',
            '/tool ask_user {"question": "Free text?"}',
            '/tool escalate_to_human {"summary": "Needs a human look"}',
            '/tool todo_write {"todos": [{"content": "write tests", "status": "in_progress"}]}',
        ]
    )
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            # A client that shows each option by name gets the ZeroClaw docs' mapping.
            session_id = await open_session(client, workspace, client_info=ZED_CLIENT_INFO)
            response = await client.prompt(session_id, prompt, on_request=pick_second)
    assert response["result"]["stopReason"] == "end_turn"
    [question] = client.server_requests
    assert question["params"]["toolCall"]["title"] == "Which colour?"
    assert [o["name"] for o in question["params"]["options"]] == ["red", "blue"]
    updates = client.updates(session_id)
    outputs = [
        u["rawOutput"]
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert "blue" in outputs[0]
    assert outputs[1].startswith("Error")
    assert "choices" in outputs[1]
    chunks = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "Needs a human look" in chunks
    [plan] = [u for u in updates if u["sessionUpdate"] == "plan"]
    assert plan["entries"][0]["content"] == "write tests"
    assert plan["entries"][0]["status"] == "in_progress"


async def test_deliver_file_and_prompt_blobs(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "report.txt").write_text("quarterly numbers\n")
    digest = hashlib.sha256(b"quarterly numbers\n").hexdigest()
    attachment = {
        "type": "resource",
        "resource": {
            "uri": "file:///home/me/notes.md",
            "blob": base64.b64encode(b"# notes").decode(),
        },
    }
    parts = [
        {"type": "text", "text": '/tool deliver_file {"path": "report.txt", "title": "Q3"}'},
        attachment,
    ]
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": parts},
                on_request=lambda _r: {
                    "outcome": {"outcome": "selected", "optionId": "allow-once"}
                },
            )
    assert response["result"]["stopReason"] == "end_turn"
    stored_blob = workspace / "uploads" / f"{hashlib.sha256(b'# notes').hexdigest()}.md"
    assert stored_blob.read_bytes() == b"# notes"
    [update] = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    ]
    assert update["status"] == "completed"
    assert update["title"] == "Q3"
    resource = update["content"][1]["content"]["resource"]
    assert resource["uri"] == f"attachment://deliver/{digest}.txt"
    assert base64.b64decode(resource["blob"]) == b"quarterly numbers\n"
    assert resource["blob"] not in update["rawOutput"]


async def test_a_10_mib_blob_is_accepted_and_one_byte_more_is_not(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    limit = 10 * 1024 * 1024
    data = bytes(range(256)) * (limit // 256)

    def part(payload: bytes) -> dict[str, Any]:
        blob = base64.b64encode(payload).decode()
        return {"type": "resource", "resource": {"uri": "file:///big.bin", "blob": blob}}

    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            accepted = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"text": "size check"}, part(data)]},
            )
            refused = await client.call(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"text": "too big"}, part(data + b"!")]},
            )
    assert accepted["result"]["stopReason"] == "end_turn"
    stored = workspace / "uploads" / f"{hashlib.sha256(data).hexdigest()}.bin"
    assert stored.stat().st_size == limit
    assert refused["error"] == rpc_error(
        -32602, f"Embedded resource exceeds 10 MB limit ({limit + 1} bytes)"
    )
