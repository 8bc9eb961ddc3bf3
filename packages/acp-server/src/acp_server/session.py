"""One ACP session's live state, and the reservation of its single running turn.

A session belongs to one connection. At most one prompt turn runs at a time (a second
``session/prompt`` is -32002, seed "session/prompt"); the turn owns a ``trio.CancelScope``
that ``session/cancel`` and ``session/close`` cancel synchronously.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import trio

from acp_server.config import AgentConfig, RuntimeProfileConfig
from acp_server.conversation import ChatMessage, PlanEntry
from acp_server.providers.base import Provider, ToolSpec
from acp_server.security import SecurityPolicy
from acp_server.tools.base import Tool


@dataclass(eq=False)
class Turn:
    """A running prompt turn.

    ``streamed`` collects every text chunk sent to the client, so a cancelled turn can
    answer with the partial text (seed, "session/cancel").
    """

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    streamed: list[str] = field(default_factory=list)

    def cancel(self) -> None:
        self.scope.cancel()

    @property
    def partial_text(self) -> str:
        return "".join(self.streamed)


@dataclass(eq=False)
class Session:
    session_id: str
    agent: AgentConfig
    workspace: Path
    provider: Provider
    tools: Mapping[str, Tool]
    policy: SecurityPolicy
    runtime_profile: RuntimeProfileConfig
    history: list[ChatMessage] = field(default_factory=list)
    plan: tuple[PlanEntry, ...] | None = None
    # Tools the client answered "allow-always" for; remembered for this session only.
    allow_always: set[str] = field(default_factory=set)
    last_activity: float = 0.0
    turn: Turn | None = None
    # What the model is told about the tools (built once: the tool set never changes).
    tool_specs: list[ToolSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.tool_specs:
            self.tool_specs = [
                ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters)
                for tool in self.tools.values()
            ]

    def touch(self) -> None:
        self.last_activity = trio.current_time()

    @property
    def busy(self) -> bool:
        return self.turn is not None

    def start_turn(self) -> Turn:
        """Reserve the session's turn slot (the caller has checked ``busy``)."""
        turn = Turn()
        self.turn = turn
        self.touch()
        return turn

    def finish_turn(self, turn: Turn) -> None:
        if self.turn is turn:
            self.turn = None
        turn.done.set()
        self.touch()
