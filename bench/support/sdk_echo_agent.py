"""An echo agent built on the official ACP Python SDK, for ``bench/server_turns.py``.

It streams the prompt back word by word (the same chunking as ZeroClaw's echo provider:
each chunk is one word with its leading whitespace) as ``agent_message_chunk`` updates,
then ends the turn, so both agents send the same frames for the same prompt.

A prompt of the form ``/tool shell {"command": "..."}`` (the echo provider's directive) makes
it act out one approved tool call instead, as ``zeroclaw acp`` does for a model that asks
for one: a pending ``tool_call``, ``session/request_permission`` to the client, the command
run with ``sh -c`` once allowed, a completed ``tool_call_update`` with its output, then a
one-line summary. That is the floor for bench/provider_turns.py's tool turn.

Run: ``python bench/support/sdk_echo_agent.py`` (speaks ACP on stdin/stdout).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import acp
from acp import schema

_WORD = re.compile(r"\s*\S+|\s+$")
TOOL_DIRECTIVE = "/tool shell "
ALLOW_ONCE = "allow-once"


class EchoAgent:
    def __init__(self) -> None:
        self._client: Any = None

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=1, agent_capabilities=schema.AgentCapabilities()
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id=str(uuid.uuid4()))

    async def prompt(
        self, prompt: list[Any], session_id: str, **kwargs: Any
    ) -> schema.PromptResponse:
        text = "\n\n".join(getattr(block, "text", "") for block in prompt)
        if text.startswith(TOOL_DIRECTIVE):
            arguments = json.loads(text.removeprefix(TOOL_DIRECTIVE))
            text = await self._run_tool(session_id, str(arguments["command"]))
        for match in _WORD.finditer(text):
            await self._client.session_update(
                session_id=session_id, update=acp.update_agent_message_text(match.group(0))
            )
        return schema.PromptResponse(stop_reason="end_turn")

    async def _run_tool(self, session_id: str, command: str) -> str:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        raw_input = {"command": command}
        await self._client.session_update(
            session_id=session_id,
            update=acp.start_tool_call(
                call_id, command, kind="execute", status="pending", raw_input=raw_input
            ),
        )
        options = [
            schema.PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
            schema.PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
        ]
        answer = await self._client.request_permission(
            session_id=session_id,
            tool_call=schema.ToolCallUpdate(tool_call_id=call_id, title=command, kind="execute"),
            options=options,
        )
        if getattr(answer.outcome, "option_id", None) != ALLOW_ONCE:
            return "The command was not allowed."
        await self._client.session_update(
            session_id=session_id, update=acp.update_tool_call(call_id, status="in_progress")
        )
        child = await asyncio.create_subprocess_exec(
            "sh", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        output, _ = await child.communicate()
        await self._client.session_update(
            session_id=session_id,
            update=acp.update_tool_call(
                call_id,
                status="completed",
                content=[acp.tool_content(acp.text_block(output.decode(errors="replace")))],
                raw_output={"exit_code": child.returncode},
            ),
        )
        return "The command printed hi."

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(acp.run_agent(EchoAgent()))  # type: ignore[arg-type]
