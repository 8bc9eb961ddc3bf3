# Generated from schema/v1/schema.json of @agentclientprotocol/sdk 2.4.0, the official
# ACP schema, by scripts/gen_acp_schema.py. Do not edit by hand: change the generator's
# tables and run `uv run python scripts/gen_acp_schema.py`. ZeroClaw's own types, which
# the fields marked "# ZeroClaw" use, are written by hand in schema/zeroclaw.py.

# ruff: noqa: F405

"""ACP's standard types (see scripts/gen_acp_schema.py for the rules)."""

from __future__ import annotations

from typing import TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from acp_core.schema.generated_leaves import *  # noqa: F403 (the leaves)
from acp_core.schema.wire import Json, WireStruct, default_null, narrow
from acp_core.schema.zeroclaw import InitializeMeta

__all__ = [
    "AgentAuthCapabilities",
    "AgentCapabilities",
    "AgentMessageChunk",
    "AgentThoughtChunk",
    "Annotations",
    "AudioContent",
    "AvailableCommand",
    "AvailableCommandInput",
    "AvailableCommandsUpdate",
    "BlobResource",
    "CancelledOutcome",
    "CompactionSummaryChunk",
    "CompactionUpdate",
    "ConfigOption",
    "ConfigOptionUpdate",
    "ConfigOptionValue",
    "ContentBlock",
    "Cost",
    "CurrentModeUpdate",
    "EmbeddedResource",
    "ImageContent",
    "Implementation",
    "InitializeResult",
    "ListSessionsResult",
    "LogoutCapabilities",
    "McpCapabilities",
    "NewSessionResult",
    "Notice",
    "PermissionOption",
    "PermissionOptionKind",
    "PermissionOutcome",
    "PermissionToolCall",
    "PlanEntry",
    "PlanEntryPriority",
    "PlanEntryStatus",
    "PlanUpdate",
    "PromptCapabilities",
    "PromptResult",
    "RequestPermissionParams",
    "RequestPermissionResult",
    "ResourceContents",
    "ResourceLink",
    "RestoredSessionResult",
    "Role",
    "SelectedOutcome",
    "SessionAdditionalDirectoriesCapabilities",
    "SessionCapabilities",
    "SessionCloseCapabilities",
    "SessionDeleteCapabilities",
    "SessionInfo",
    "SessionInfoUpdate",
    "SessionListCapabilities",
    "SessionMode",
    "SessionModeState",
    "SessionNotification",
    "SessionResumeCapabilities",
    "SessionUpdate",
    "SetConfigOptionResult",
    "StopReason",
    "TextContent",
    "TextResource",
    "ToolCallContent",
    "ToolCallContentBlock",
    "ToolCallDiff",
    "ToolCallLocation",
    "ToolCallStart",
    "ToolCallStatus",
    "ToolCallTerminal",
    "ToolCallUpdate",
    "ToolKind",
    "UsageUpdate",
    "UserMessageChunk",
]


class RequestPermissionParams(WireStruct, kw_only=True):
    """ACP ``RequestPermissionRequest``."""

    session_id: str
    options: list[PermissionOption]
    tool_call: PermissionToolCall
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PermissionToolCall(WireStruct, kw_only=True):
    """ACP ``ToolCallUpdate``."""

    tool_call_id: str
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Json | UnsetType = UNSET
    content: list[ToolCallContent] | None = None
    name: str | None = None
    locations: list[ToolCallLocation] | None = None
    raw_output: Json | UnsetType = UNSET
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ToolCallContentBlock(WireStruct, tag_field="type", tag="content", kw_only=True):
    """ACP ``Content``, the ``content`` ``ToolCallContent``."""

    content: ContentBlock
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ToolCallDiff(WireStruct, tag_field="type", tag="diff", kw_only=True):
    """ACP ``Diff``, the ``diff`` ``ToolCallContent``."""

    path: str
    old_text: str | None = msgspec.field(default_factory=default_null)
    new_text: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ToolCallTerminal(WireStruct, tag_field="type", tag="terminal", kw_only=True):
    """ACP ``Terminal``, the ``terminal`` ``ToolCallContent``."""

    terminal_id: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class TextContent(WireStruct, tag_field="type", tag="text", kw_only=True):
    """ACP ``TextContent``, the ``text`` ``ContentBlock``."""

    annotations: Annotations | None = None
    text: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ImageContent(WireStruct, tag_field="type", tag="image", kw_only=True):
    """ACP ``ImageContent``, the ``image`` ``ContentBlock``."""

    annotations: Annotations | None = None
    data: str
    mime_type: str
    uri: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AudioContent(WireStruct, tag_field="type", tag="audio", kw_only=True):
    """ACP ``AudioContent``, the ``audio`` ``ContentBlock``."""

    annotations: Annotations | None = None
    data: str
    mime_type: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ResourceLink(WireStruct, tag_field="type", tag="resource_link", kw_only=True):
    """ACP ``ResourceLink``, the ``resource_link`` ``ContentBlock``."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: Annotations | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class EmbeddedResource(WireStruct, tag_field="type", tag="resource", kw_only=True):
    """ACP ``EmbeddedResource``, the ``resource`` ``ContentBlock``."""

    annotations: Annotations | None = None
    resource: ResourceContents
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")

    def __post_init__(self) -> None:
        self.resource = narrow(self.resource, ResourceContents, (BlobResource, TextResource))


class InitializeResult(WireStruct, kw_only=True):
    """ACP ``InitializeResponse``."""

    protocol_version: int
    agent_capabilities: AgentCapabilities | None = None
    agent_info: Implementation | None = None
    auth_methods: list[Json]
    meta: InitializeMeta | None = msgspec.field(default=None, name="_meta")  # ZeroClaw


class AgentCapabilities(WireStruct, kw_only=True):
    load_session: bool
    prompt_capabilities: PromptCapabilities | None = None
    mcp_capabilities: McpCapabilities | None = None
    session_capabilities: SessionCapabilities | None = None
    auth: AgentAuthCapabilities | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionNotification(WireStruct, kw_only=True):
    session_id: str
    update: SessionUpdate
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class UserMessageChunk(
    WireStruct, tag_field="sessionUpdate", tag="user_message_chunk", kw_only=True
):
    """ACP ``SessionUpdate`` ``user_message_chunk`` (a ``ContentChunk``)."""

    content: ContentBlock
    message_id: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AgentMessageChunk(
    WireStruct, tag_field="sessionUpdate", tag="agent_message_chunk", kw_only=True
):
    """ACP ``SessionUpdate`` ``agent_message_chunk`` (a ``ContentChunk``)."""

    content: ContentBlock
    message_id: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AgentThoughtChunk(
    WireStruct, tag_field="sessionUpdate", tag="agent_thought_chunk", kw_only=True
):
    """ACP ``SessionUpdate`` ``agent_thought_chunk`` (a ``ContentChunk``)."""

    content: ContentBlock
    message_id: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ToolCallStart(WireStruct, tag_field="sessionUpdate", tag="tool_call", kw_only=True):
    """ACP ``ToolCall``, the ``tool_call`` ``SessionUpdate``."""

    tool_call_id: str
    title: str
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Json | UnsetType = UNSET
    name: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_output: Json | UnsetType = UNSET
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ToolCallUpdate(WireStruct, tag_field="sessionUpdate", tag="tool_call_update", kw_only=True):
    """ACP ``SessionUpdate`` ``tool_call_update`` (a ``ToolCallUpdate``)."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    raw_output: Json | UnsetType = UNSET
    name: str | None = None
    title: str | None = None
    kind: ToolKind | None = None
    body: str | None = None  # ZeroClaw
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Json | UnsetType = UNSET
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PlanUpdate(WireStruct, tag_field="sessionUpdate", tag="plan", kw_only=True):
    """ACP ``Plan``, the ``plan`` ``SessionUpdate``."""

    entries: list[PlanEntry]
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AvailableCommandsUpdate(
    WireStruct, tag_field="sessionUpdate", tag="available_commands_update", kw_only=True
):
    """ACP ``AvailableCommandsUpdate``, the ``available_commands_update`` ``SessionUpdate``."""

    available_commands: list[AvailableCommand]
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class CurrentModeUpdate(
    WireStruct, tag_field="sessionUpdate", tag="current_mode_update", kw_only=True
):
    """ACP ``CurrentModeUpdate``, the ``current_mode_update`` ``SessionUpdate``."""

    current_mode_id: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ConfigOptionUpdate(
    WireStruct, tag_field="sessionUpdate", tag="config_option_update", kw_only=True
):
    """ACP ``ConfigOptionUpdate``, the ``config_option_update`` ``SessionUpdate``."""

    config_options: list[ConfigOption]
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionInfoUpdate(
    WireStruct, tag_field="sessionUpdate", tag="session_info_update", kw_only=True
):
    """ACP ``SessionInfoUpdate``, the ``session_info_update`` ``SessionUpdate``."""

    title: str | None = None
    updated_at: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class UsageUpdate(WireStruct, tag_field="sessionUpdate", tag="usage_update", kw_only=True):
    """ACP ``UsageUpdate``, the ``usage_update`` ``SessionUpdate``."""

    used: int
    size: int
    cost: Cost | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class Notice(WireStruct, tag_field="sessionUpdate", tag="notice", kw_only=True):
    """ACP ``Notice``, the ``notice`` ``SessionUpdate``."""

    severity: str
    title: str
    description: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class CompactionUpdate(
    WireStruct, tag_field="sessionUpdate", tag="compaction_update", kw_only=True
):
    """ACP ``CompactionUpdate``, the ``compaction_update`` ``SessionUpdate``."""

    compaction_id: str
    status: str
    summary: list[ContentBlock] | None = None
    error: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class CompactionSummaryChunk(
    WireStruct, tag_field="sessionUpdate", tag="compaction_summary_chunk", kw_only=True
):
    """ACP ``CompactionSummaryChunk``, the ``compaction_summary_chunk`` ``SessionUpdate``."""

    compaction_id: str
    content: ContentBlock
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


ToolCallContent: TypeAlias = ToolCallContentBlock | ToolCallDiff | ToolCallTerminal


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
)


SessionUpdate: TypeAlias = (
    UserMessageChunk
    | AgentMessageChunk
    | AgentThoughtChunk
    | ToolCallStart
    | ToolCallUpdate
    | PlanUpdate
    | AvailableCommandsUpdate
    | CurrentModeUpdate
    | ConfigOptionUpdate
    | SessionInfoUpdate
    | UsageUpdate
    | Notice
    | CompactionUpdate
    | CompactionSummaryChunk
)
