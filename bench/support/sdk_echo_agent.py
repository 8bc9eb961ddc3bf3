"""An echo agent built on the official ACP Python SDK, for ``bench/server_turns.py``.

It streams the prompt back word by word (the same chunking as ZeroClaw's echo provider:
each chunk is one word with its leading whitespace) as ``agent_message_chunk`` updates,
then ends the turn, so both agents send the same frames for the same prompt.

Run: ``python bench/support/sdk_echo_agent.py`` (speaks ACP on stdin/stdout).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import acp
from acp import schema

_WORD = re.compile(r"\s*\S+|\s+$")


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
        for match in _WORD.finditer(text):
            await self._client.session_update(
                session_id=session_id, update=acp.update_agent_message_text(match.group(0))
            )
        return schema.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(acp.run_agent(EchoAgent()))  # type: ignore[arg-type]
