"""Interop: the official ACP Python SDK's client drives a full `zeroclaw acp` turn.

The SDK (agent-client-protocol, asyncio) spawns the real console script, runs initialize
and session/new, sends a prompt that makes the echo provider call the shell tool, answers
our session/request_permission, and reads the streamed updates and the result through
its own pydantic models: proof that what we emit is what a stock ACP client expects.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import acp
import pytest
from acp import schema as acp_schema

from tests.e2e.acp_sdk_http import RecordingClient as SdkRecordingClient
from tests.e2e.acp_sdk_http import allow_once
from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


class RecordingClient(SdkRecordingClient):
    """A minimal SDK client: records updates, allows every permission once, and answers
    a question with the choice named "Python" (as an app showing option names would)."""

    def __init__(self) -> None:
        super().__init__()
        self.permission_requests: list[Any] = []

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        self.permission_requests.append((session_id, tool_call, options))
        if any(option.option_id.startswith("choice-") for option in options):
            picked = next(option for option in options if option.name.endswith("Python"))
            return acp_schema.RequestPermissionResponse(
                outcome=acp_schema.AllowedOutcome(outcome="selected", option_id=picked.option_id)
            )
        return allow_once(options)


async def drive(config_dir: Path, workspace: Path) -> tuple[RecordingClient, Any, Any]:
    client = RecordingClient()
    env = child_env(config_dir)
    async with acp.spawn_agent_process(
        cast(Any, client),
        str(console_script("zeroclaw")),
        "acp",
        env=env,
        transport_kwargs={"stderr": None},  # inherit: never a pipe nobody drains
    ) as (connection, process):
        init = await connection.initialize(
            protocol_version=1,
            client_capabilities=acp_schema.ClientCapabilities(),
            client_info=acp_schema.Implementation(name="sdk-test", version="1"),
        )
        session = await connection.new_session(cwd=str(workspace), mcp_servers=[])
        prompt = (
            'Listing the workspace\n/tool shell {"command": "ls"}\n'
            '/tool ask_user {"question": "Which language?", "choices": ["Go", "Python", "Rust"]}'
        )
        result = await connection.prompt(
            session_id=session.session_id, prompt=[acp.text_block(prompt)]
        )
    await asyncio.wait_for(process.wait(), 15)
    return client, init, (session, result, process.returncode)


def test_official_sdk_client_runs_a_turn_with_a_permission_request(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "from-the-sdk.txt").write_text("hi")
    client, init, (session, result, returncode) = asyncio.run(
        asyncio.wait_for(drive(config_dir, workspace), 60)
    )
    assert init.protocol_version == 1
    assert init.agent_capabilities.load_session is True
    assert session.session_id
    assert result.stop_reason == "end_turn"
    [(session_id, tool_call, options), (_, question, choices)] = client.permission_requests
    assert session_id == session.session_id
    # A client this server does not know gets one option per kind, so however it keys
    # them, the option it sends back is the choice picked.
    assert [(choice.name, choice.kind) for choice in choices] == [
        ("1. Go", "allow_once"),
        ("2. Python", "reject_once"),
        ("3. Rust", "reject_always"),
    ]
    assert question.title == "Which language?"
    assert tool_call.title == "`ls`"  # the command approved, as the card shows it
    assert [option.option_id for option in options] == ["allow-once", "allow-always", "reject-once"]
    kinds = [type(update).__name__ for update in client.updates]
    assert "AgentMessageChunk" in kinds
    start, asked = [u for u in client.updates if type(u).__name__ == "ToolCallStart"]
    progress_of = [u for u in client.updates if type(u).__name__ == "ToolCallProgress"]
    running, progress = [u for u in progress_of if u.tool_call_id == start.tool_call_id]
    answered = [u for u in progress_of if u.tool_call_id == asked.tool_call_id][-1]
    assert answered.raw_output == "The user chose: Python"
    assert start.tool_call_id == running.tool_call_id == progress.tool_call_id
    assert running.status == "in_progress"
    assert progress.status == "completed"
    assert "from-the-sdk.txt" in str(progress.raw_output)
    assert returncode == 0
