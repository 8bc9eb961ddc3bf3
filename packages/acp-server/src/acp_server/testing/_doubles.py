"""Stand-ins for the model and for tools: scripted, recording, holdable mid-way."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from acp_server.agent.providers.base import (
    ModelRequest,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ToolCallRequested,
)
from acp_server.agent.tools.base import ToolContext, ToolOutput
from acp_server.model import ToolCall


@dataclass
class ScriptedProvider:
    """A provider that plays back ``rounds`` (one list of events per model call).

    ``gate`` (when set) is awaited before each event after the first, so a test can hold a
    turn mid-stream; ``delay`` sleeps between events (use with autojump_clock).
    """

    rounds: list[list[ProviderEvent]]
    delay: float = 0.0
    requests: list[ModelRequest] = field(default_factory=list)
    gate: trio.Event | None = None

    @property
    def model(self) -> str:
        return "scripted"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        index = min(len(self.requests) - 1, len(self.rounds) - 1)
        for position, event in enumerate(self.rounds[index]):
            if position and self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await trio.sleep(self.delay)
            yield event


def text_round(*words: str) -> list[ProviderEvent]:
    """One model call that streams ``words`` and ends."""
    return [*(TextDelta(word) for word in words), StreamEnd()]


def tool_round(
    name: str, arguments: Mapping[str, Any], call_id: str = "call-1"
) -> list[ProviderEvent]:
    """One model call that asks for one tool call."""
    return [
        ToolCallRequested(ToolCall(id=call_id, name=name, arguments=dict(arguments))),
        StreamEnd("tool_use"),
    ]


@dataclass
class StubTool:
    """A tool that records its calls; ``block`` makes it wait (for cancel-mid-tool tests)."""

    name: str = "stub"
    description: str = "a stub tool"
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    side_effects: bool = True
    output: str = "stub output"
    calls: list[dict[str, Any]] = field(default_factory=list)
    block: trio.Event | None = None
    started: trio.Event = field(default_factory=trio.Event)
    cancelled: bool = False
    action: Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutput]] | None = None

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls.append(arguments)
        self.started.set()
        if self.action is not None:
            return await self.action(arguments, ctx)
        if self.block is not None:
            try:
                await self.block.wait()
            except trio.Cancelled:
                self.cancelled = True
                raise
        return ToolOutput(self.output)
