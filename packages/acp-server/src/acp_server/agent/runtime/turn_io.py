"""``TurnIO``: what a running turn says and asks, as events of the agent's own domain.

The turn (acp_server/agent/runtime/turn.py) reports text, usage, each tool call's life
(announced, running, its card's content, finished or cut off), plan changes, and asks for
an approval or a choice; it never builds a protocol message. The protocol side implements
the port (acp_server/protocol/presentation/turn_channel.py) and renders each event with the
same builders ``session/load``'s replay uses, so a live turn and a replayed one look alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from acp_core import schema
from acp_server.agent.runtime.permissions import Verdict
from acp_server.agent.skills.commands import SkillCommand
from acp_server.agent.tools.base import ClientSide, ToolDefinition, ToolOutput
from acp_server.model import CallView, DeliveredRecord, PlanStep


class TurnIO(Protocol):
    """The events of one turn, in the order they happen, and its two questions."""

    async def text(self, text: str, *, thought: bool = False) -> None:
        """A chunk of the model's answer (or of its reasoning, ``thought``)."""
        ...

    async def usage(self, used: int, size: int) -> None:
        """After a model round: the context now holds ``used`` of ``size`` tokens."""
        ...

    async def commands_changed(self, commands: Sequence[SkillCommand]) -> None:
        """The session's skill commands changed since the last list sent."""
        ...

    async def tool_announced(
        self,
        call_id: str,
        definition: ToolDefinition,
        arguments: Mapping[str, Any],
        view: CallView | None = None,
    ) -> None:
        """A call the model asked for, before anyone decided on it."""
        ...

    async def tool_running(self, call_id: str) -> None:
        """The call was allowed and its tool starts."""
        ...

    async def tool_card(self, call_id: str, content: Sequence[schema.ToolCallContent]) -> None:
        """A running tool replaced what its call's card shows (a client terminal)."""
        ...

    async def tool_finished(
        self,
        call_id: str,
        definition: ToolDefinition,
        output: ToolOutput,
        *,
        shown_text: str,
        delivered: DeliveredRecord | None,
        arguments: Mapping[str, Any],
        view: CallView | None,
    ) -> None:
        """The call's result: ``shown_text`` is what the client reads of it; a delivered
        file is shown only while its uploads copy is still the one the tool validated."""
        ...

    async def tool_cut_off(
        self, call_id: str, definition: ToolDefinition, arguments: Mapping[str, Any], text: str
    ) -> None:
        """The turn was cancelled while the call ran: it ends failed with ``text``."""
        ...

    async def plan_changed(self, steps: Sequence[PlanStep]) -> None:
        """The session's plan, as a tool just wrote it."""
        ...

    async def ask_approval(
        self,
        call_id: str,
        definition: ToolDefinition,
        arguments: Mapping[str, Any],
        view: CallView,
    ) -> Verdict:
        """Ask the operator whether the call may run; a verdict of no decision when nobody
        answered in time or the answer could not be read."""
        ...

    async def ask_choice(
        self, question: str, choices: Sequence[str], *, title: str, call_id: str | None
    ) -> int | None:
        """Ask on the call's own card, under its title; the index chosen, or None."""
        ...

    @property
    def client(self) -> ClientSide | None:
        """What else the client offers the tools (elicitation, files, terminals)."""
        ...
