"""The ``session/update`` objects of a tool call, built the same way live and on replay.

A live turn (``agent/runtime/turn.py``) and ``session/load``'s replay (``protocol/presentation/replay.py``) both
build a call's ``tool_call``, its ``tool_call_update``, what it streamed in between and
the ``plan`` update with these functions, so a replayed call is the one the client saw
(the ZeroClaw ACP documentation, "session/load"). Live announcements are ``pending``;
replayed ones ``completed`` (the call already ran).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from acp_core import schema
from acp_server.agent.tools.base import ToolDefinition
from acp_server.model import (
    CallView,
    FileLocation,
    PlanStep,
    StreamedPlan,
    StreamedText,
)


def tool_call_started(
    call_id: str,
    definition: ToolDefinition,
    arguments: Mapping[str, Any],
    *,
    status: schema.ToolCallStatus,
    view: CallView | None = None,
) -> schema.ToolCallStart:
    """A call's ``tool_call``: the action and its target as title (``ToolDefinition.title_of``),
    its kind, ``rawInput`` (the arguments as given), and the diffs and locations of its
    ``view``. Without a view (a call replayed from a record stored before views were) the
    diff comes from the arguments alone."""
    presentation = definition.presentation
    content = diff_content(view) if view is not None else presentation.diff(arguments)
    return schema.ToolCallStart(
        tool_call_id=call_id,
        title=definition.title_of(arguments),
        kind=definition.kind,
        status=status,
        raw_input=presentation.raw_input(arguments),
        name=definition.name,
        content=content,
        locations=card_locations(view.locations) if view is not None else None,
    )


def diff_content(view: CallView) -> list[schema.ToolCallContent] | None:
    """A view's diffs as ``diff`` content blocks (None when it has none)."""
    if not view.diffs:
        return None
    return [
        schema.ToolCallDiff(path=diff.path, old_text=diff.old_text, new_text=diff.new_text)
        for diff in view.diffs
    ]


def card_locations(locations: Sequence[FileLocation]) -> list[schema.ToolCallLocation] | None:
    """Locations as ACP ``ToolCallLocation`` objects (None when there are none)."""
    if not locations:
        return None
    return [schema.ToolCallLocation(path=place.path, line=place.line) for place in locations]


def tool_call_finished(
    call_id: str,
    definition: ToolDefinition | None,
    text: str,
    *,
    title: str | None = None,
    resource: schema.EmbeddedResource | None = None,
    failed: bool = False,
    diff: Sequence[schema.ToolCallContent] | None = None,
    locations: Sequence[FileLocation] = (),
) -> schema.ToolCallUpdate:
    """A call's ``tool_call_update``: ``text`` as ``rawOutput``, ``body`` and a text block,
    then ``resource`` (a delivered file) when given. ``status`` is ``failed`` when the
    tool failed (``ToolOutput.ok`` false: an error, a denial, a refusal; or a delivered file
    that could not be embedded), else ``completed``. ``title`` is the card's title as its
    ``tool_call`` gave it (so finishing does not rename the card), or a delivered file's
    chat label (the ZeroClaw ACP docs, deliver_file); None sends none. ``definition`` is
    None for a result whose tool name was not stored: it then carries no name or kind. ``diff`` (an
    edit's diff, as its ``tool_call`` showed it) comes first in ``content``: ACP clients
    replace a card's content with the completing update's, so an edit that leaves it out
    loses its diff when it finishes. ``locations`` (a search's matches) replace the
    card's; without them it keeps those of its ``tool_call``."""
    content: list[schema.ToolCallContent] = [*(diff or ()), schema.text_tool_content(text)]
    if resource is not None:
        content.append(schema.ToolCallContentBlock(content=resource))
    name = definition.name if definition is not None else None
    return schema.ToolCallUpdate(
        tool_call_id=call_id,
        status="failed" if failed else "completed",
        raw_output=text,
        name=name,
        title=title,
        kind=definition.kind if definition is not None else None,
        body=text,
        content=content,
        locations=card_locations(locations),
    )


def completed_diff(
    definition: ToolDefinition | None,
    arguments: Mapping[str, Any],
    *,
    ok: bool,
    view: CallView | None = None,
) -> list[schema.ToolCallContent] | None:
    """The diff a finished call's ``tool_call_update`` keeps: its announced diff (its
    view's, else the one its arguments give) when the call succeeded (a failed edit
    changed nothing, so its card shows only the error)."""
    if definition is None or not ok:
        return None
    if view is not None:
        return diff_content(view)
    return definition.presentation.diff(arguments)


def streamed_update(item: StreamedText | StreamedPlan) -> schema.SessionUpdate:
    """What a tool streamed while it ran, as the update the client received."""
    if isinstance(item, StreamedPlan):
        return plan_update(item.entries)
    return schema.AgentMessageChunk(content=schema.text_block(item.text))


def plan_update(plan: Sequence[PlanStep]) -> schema.PlanUpdate:
    """The ``plan`` update for a plan (todo_write live and replayed; ``session/resume``)."""
    return schema.PlanUpdate(
        entries=[
            schema.PlanEntry(
                content=entry.content,
                status=entry.status,
                priority=entry.priority,
                meta=None
                if entry.active_form is None
                else {"zeroclaw": {"activeForm": entry.active_form}},
            )
            for entry in plan
        ]
    )
