"""A turn's domain events (acp_server/agent/runtime/turn_io.py) as an ACP client reads them.

Each event becomes the ``session/update`` or the ``session/request_permission`` built by the
same functions ``session/load``'s replay uses (tool_updates.py, permissions.py,
delivered.py), so a live turn and a replayed one show the same cards. ``TurnEvents`` only
renders; where the messages go is its subclass's (turn_channel.py: one session of one
connection).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import trio

from acp_core import schema
from acp_server.agent.runtime.permissions import Verdict
from acp_server.agent.skills.commands import SkillCommand
from acp_server.agent.tools.base import ClientSide, ToolDefinition, ToolOutput
from acp_server.model import CallView, DeliveredRecord, PlanStep
from acp_server.protocol.presentation.commands import commands_update
from acp_server.protocol.presentation.delivered import embed_delivered
from acp_server.protocol.presentation.permissions import (
    Asking,
    approval_request,
    choice_from_outcome,
    choice_request,
    verdict_from_outcome,
)
from acp_server.protocol.presentation.tool_updates import (
    completed_diff,
    plan_update,
    tool_call_finished,
    tool_call_started,
)


class TurnEvents:
    """The events of ``TurnIO`` rendered as ACP messages, sent through the subclass's
    ``send_update`` and ``request_permission``."""

    _session_id: str
    client: ClientSide | None

    async def send_update(self, update: schema.SessionUpdate) -> None:
        raise NotImplementedError

    async def request_permission(
        self, params: schema.RequestPermissionParams
    ) -> schema.PermissionOutcome | None:
        raise NotImplementedError

    async def usage(self, used: int, size: int) -> None:
        # ACP usage_update: what the context holds now is this round's prompt and answer.
        await self.send_update(schema.UsageUpdate(used=used, size=size))

    async def commands_changed(self, commands: Sequence[SkillCommand]) -> None:
        await self.send_update(commands_update(commands))

    async def tool_announced(
        self,
        call_id: str,
        definition: ToolDefinition,
        arguments: Mapping[str, Any],
        view: CallView | None = None,
    ) -> None:
        await self.send_update(
            tool_call_started(call_id, definition, arguments, status="pending", view=view)
        )

    async def tool_running(self, call_id: str) -> None:
        await self.send_update(schema.ToolCallUpdate(tool_call_id=call_id, status="in_progress"))

    async def tool_card(self, call_id: str, content: Sequence[schema.ToolCallContent]) -> None:
        await self.send_update(schema.ToolCallUpdate(tool_call_id=call_id, content=list(content)))

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
        resource: schema.EmbeddedResource | None = None
        if output.delivered is not None:
            resource = await trio.to_thread.run_sync(embed_delivered, output.delivered)
        await self.send_update(
            tool_call_finished(
                call_id,
                definition,
                shown_text,
                title=delivered.title if delivered is not None else definition.title_of(arguments),
                resource=resource,
                # A delivered file that changed since the tool checked it is not shown:
                # the card says the delivery failed.
                failed=not output.ok or (delivered is not None and resource is None),
                diff=[
                    *output.card,
                    *(completed_diff(definition, arguments, ok=output.ok, view=view) or ()),
                ]
                or None,
                locations=output.locations,
            )
        )

    async def tool_cut_off(
        self, call_id: str, definition: ToolDefinition, arguments: Mapping[str, Any], text: str
    ) -> None:
        await self.send_update(
            tool_call_finished(
                call_id, definition, text, title=definition.title_of(arguments), failed=True
            )
        )

    async def plan_changed(self, steps: Sequence[PlanStep]) -> None:
        await self.send_update(plan_update(steps))

    async def ask_approval(
        self,
        call_id: str,
        definition: ToolDefinition,
        arguments: Mapping[str, Any],
        view: CallView,
    ) -> Verdict:
        outcome = await self.request_permission(
            approval_request(
                self._session_id,
                definition,
                arguments,
                tool_call_id=call_id,
                view=view,
                asking=Asking.of(self.client),
            )
        )
        return verdict_from_outcome(outcome)

    async def ask_choice(
        self, question: str, choices: Sequence[str], *, title: str, call_id: str | None
    ) -> int | None:
        outcome = await self.request_permission(
            choice_request(
                self._session_id,
                question,
                choices,
                title=title,
                asking=Asking.of(self.client),
                tool_call_id=call_id,
            )
        )
        return choice_from_outcome(outcome, len(choices))
