"""``session/update`` notifications the agent sends, and ``_zeroclaw/history_trimmed``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from acp_core.jsonrpc import JsonValue
from acp_core.schema.config_options import ConfigOptionUpdate, UsageUpdate
from acp_core.schema.content import (
    ContentBlock,
    ToolCallContent,
    ToolCallLocation,
    text_tool_content,
)
from acp_core.schema.wire import (
    PlanEntryPriority,
    PlanEntryStatus,
    ToolCallStatus,
    ToolKind,
    WireStruct,
)

if TYPE_CHECKING:
    Json: TypeAlias = JsonValue
else:
    # msgspec cannot evaluate the recursive JsonValue alias; Any decodes the same values.
    Json = Any

# --------------------------------------------------------------------------- session/update


class AgentMessageChunk(
    WireStruct, tag_field="sessionUpdate", tag="agent_message_chunk", kw_only=True
):
    content: ContentBlock


class AgentThoughtChunk(
    WireStruct, tag_field="sessionUpdate", tag="agent_thought_chunk", kw_only=True
):
    content: ContentBlock


class UserMessageChunk(
    WireStruct, tag_field="sessionUpdate", tag="user_message_chunk", kw_only=True
):
    """Only sent while ``session/load`` replays stored history."""

    content: ContentBlock


class ToolCallStart(WireStruct, tag_field="sessionUpdate", tag="tool_call", kw_only=True):
    """A tool is about to run (also the styled ``turn-cancelled`` marker, kind ``think``)."""

    tool_call_id: str
    title: str
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Json | UnsetType = UNSET
    name: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_output: Json | UnsetType = UNSET


class ToolCallUpdate(WireStruct, tag_field="sessionUpdate", tag="tool_call_update", kw_only=True):
    """A tool finished (or changed). ``name`` and ``body`` are ZeroClaw extensions."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    raw_output: Json | UnsetType = UNSET
    name: str | None = None
    title: str | None = None
    kind: ToolKind | None = None
    body: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Json | UnsetType = UNSET


class PlanEntry(WireStruct, kw_only=True):
    """One plan entry; its present-tense label (todo_write's ``activeForm``) travels in
    ``_meta.zeroclaw.activeForm``, since ACP's ``PlanEntry`` has no such field."""

    content: str
    status: PlanEntryStatus
    priority: PlanEntryPriority
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PlanUpdate(WireStruct, tag_field="sessionUpdate", tag="plan", kw_only=True):
    """The whole plan; clients replace what they had."""

    entries: list[PlanEntry]


class SessionInfoUpdate(
    WireStruct, tag_field="sessionUpdate", tag="session_info_update", kw_only=True
):
    """ACP ``session_info_update``: what a client lists the session as (its title)."""

    title: str | None = None
    updated_at: str | None = None


class AvailableCommandInput(WireStruct, kw_only=True):
    """ACP ``UnstructuredCommandInput``: the hint an editor shows after the command name."""

    hint: str


class AvailableCommand(WireStruct, kw_only=True):
    """One ACP slash command: ``name`` without the leading ``/``."""

    name: str
    description: str
    input: AvailableCommandInput | None = None


class AvailableCommandsUpdate(
    WireStruct, tag_field="sessionUpdate", tag="available_commands_update", kw_only=True
):
    """ACP ``available_commands_update``: the whole list of the session's commands."""

    available_commands: list[AvailableCommand]


SessionUpdate: TypeAlias = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallUpdate
    | PlanUpdate
    | SessionInfoUpdate
    | AvailableCommandsUpdate
    | ConfigOptionUpdate
    | UsageUpdate
)


class SessionNotification(WireStruct, kw_only=True):
    """Params of outbound ``session/update``."""

    session_id: str
    update: SessionUpdate


class HistoryTrimmedParams(WireStruct, kw_only=True):
    """Params of ``_zeroclaw/history_trimmed`` (restore had to drop old turns)."""

    session_id: str
    dropped_messages: int
    kept_turns: int
    reason: str


def turn_cancelled_update(
    session_id: str, marker: str, *, marker_id: str | None = None
) -> ToolCallStart:
    """The styled notice that a turn was cancelled (the ZeroClaw ACP docs:
    cancellation), sent only to a client that asks for it in ``initialize``
    (``_meta.zeroclaw.cancelMarkerToolCall``): every ACP client draws a ``tool_call`` as
    a tool, and the prompt result's ``stopReason`` and ``content`` carry the cancel.

    Its ``toolCallId`` is ``turn-cancelled-<sessionId>-<marker_id>``, a fresh random
    ``marker_id`` unless one is given: ACP tool call ids are unique within a session, and
    an editor that keeps one card per id would otherwise fold every cancel into one."""
    suffix = marker_id if marker_id is not None else uuid.uuid4().hex
    return ToolCallStart(
        tool_call_id=f"turn-cancelled-{session_id}-{suffix}",
        title="turn-cancelled",
        kind="think",
        status="completed",
        name="turn-cancelled",
        content=[text_tool_content(marker)],
    )
