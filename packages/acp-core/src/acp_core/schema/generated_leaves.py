# Generated from schema/v1/schema.json of @agentclientprotocol/sdk 2.4.0, the official
# ACP schema, by scripts/gen_acp_schema.py. Do not edit by hand: change the generator's
# tables and run `uv run python scripts/gen_acp_schema.py`. ZeroClaw's own types, which
# the fields marked "# ZeroClaw" use, are written by hand in schema/zeroclaw.py.

"""ACP's standard types that refer to no type of generated.py (its building blocks)."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from acp_core.schema.wire import Json, WireStruct
from acp_core.schema.zeroclaw import NewSessionMeta, PromptUsage, SessionForkCapabilities

__all__ = [
    "AgentAuthCapabilities",
    "Annotations",
    "AvailableCommand",
    "AvailableCommandInput",
    "BlobResource",
    "CancelledOutcome",
    "ConfigOption",
    "ConfigOptionValue",
    "Cost",
    "Implementation",
    "ListSessionsResult",
    "LogoutCapabilities",
    "McpCapabilities",
    "NewSessionResult",
    "PermissionOption",
    "PermissionOptionKind",
    "PermissionOutcome",
    "PlanEntry",
    "PlanEntryPriority",
    "PlanEntryStatus",
    "PromptCapabilities",
    "PromptResult",
    "RequestPermissionResult",
    "ResourceContents",
    "RestoredSessionResult",
    "Role",
    "SelectedOutcome",
    "SessionAdditionalDirectoriesCapabilities",
    "SessionCapabilities",
    "SessionCloseCapabilities",
    "SessionDeleteCapabilities",
    "SessionInfo",
    "SessionListCapabilities",
    "SessionMode",
    "SessionModeState",
    "SessionResumeCapabilities",
    "SetConfigOptionResult",
    "StopReason",
    "TextResource",
    "ToolCallLocation",
    "ToolCallStatus",
    "ToolKind",
]


ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]


ToolCallStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]


Role: TypeAlias = Literal["assistant", "user"]


PermissionOptionKind: TypeAlias = Literal[
    "allow_once", "allow_always", "reject_once", "reject_always"
]


StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"
]


PlanEntryPriority: TypeAlias = Literal["high", "medium", "low"]


PlanEntryStatus: TypeAlias = Literal["pending", "in_progress", "completed"]


class Annotations(WireStruct, kw_only=True):
    audience: list[Role] | None = None
    last_modified: str | None = None
    priority: float | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ResourceContents(WireStruct, kw_only=True):
    """ACP ``EmbeddedResourceResource``, read as one of: BlobResource, TextResource."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class BlobResource(ResourceContents, kw_only=True):
    """ACP ``BlobResourceContents``."""

    blob: str


class TextResource(ResourceContents, kw_only=True):
    """ACP ``TextResourceContents``."""

    text: str


class ToolCallLocation(WireStruct, kw_only=True):
    path: str
    line: int | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PermissionOption(WireStruct, kw_only=True):
    option_id: str
    name: str
    kind: PermissionOptionKind
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PromptCapabilities(WireStruct, kw_only=True):
    image: bool
    audio: bool
    embedded_context: bool
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class McpCapabilities(WireStruct, kw_only=True):
    http: bool
    sse: bool
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionCapabilities(WireStruct, kw_only=True):
    resume: SessionResumeCapabilities | None = None
    close: SessionCloseCapabilities | None = None
    list: SessionListCapabilities | None = None
    delete: SessionDeleteCapabilities | None = None
    additional_directories: SessionAdditionalDirectoriesCapabilities | None = None
    fork: SessionForkCapabilities | None = None  # ZeroClaw
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionListCapabilities(WireStruct, kw_only=True):
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionDeleteCapabilities(WireStruct, kw_only=True):
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionAdditionalDirectoriesCapabilities(WireStruct, kw_only=True):
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionResumeCapabilities(WireStruct, kw_only=True):
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionCloseCapabilities(WireStruct, kw_only=True):
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AgentAuthCapabilities(WireStruct, kw_only=True):
    logout: LogoutCapabilities | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class LogoutCapabilities(WireStruct, kw_only=True):
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class Implementation(WireStruct, kw_only=True):
    name: str
    title: str | None = None
    version: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class NewSessionResult(WireStruct, kw_only=True):
    """ACP ``NewSessionResponse``."""

    session_id: str
    workspace_dir: str  # ZeroClaw
    modes: SessionModeState | None = None
    config_options: list[ConfigOption] | None = None
    meta: NewSessionMeta | None = msgspec.field(default=None, name="_meta")  # ZeroClaw


class SessionModeState(WireStruct, kw_only=True):
    current_mode_id: str
    available_modes: list[SessionMode]
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionMode(WireStruct, kw_only=True):
    id: str
    name: str
    description: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ConfigOption(WireStruct, kw_only=True):
    """ACP ``SessionConfigOption`` of ``type`` ``select`` (``SessionConfigSelect``)."""

    id: str
    name: str
    description: str | None = None
    category: str | None = None
    type: Literal["select"]
    current_value: str
    options: list[ConfigOptionValue]
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ConfigOptionValue(WireStruct, kw_only=True):
    """ACP ``SessionConfigSelectOption``."""

    value: str
    name: str
    description: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class RestoredSessionResult(WireStruct, kw_only=True):
    """ACP ``LoadSessionResponse``."""

    modes: SessionModeState | None = None
    config_options: list[ConfigOption] | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class ListSessionsResult(WireStruct, kw_only=True):
    """ACP ``ListSessionsResponse``."""

    sessions: list[SessionInfo]
    next_cursor: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SessionInfo(WireStruct, kw_only=True):
    session_id: str
    cwd: str
    additional_directories: list[str] | None = None
    title: str | None = None
    updated_at: str | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class SetConfigOptionResult(WireStruct, kw_only=True):
    """ACP ``SetSessionConfigOptionResponse``."""

    config_options: list[ConfigOption]
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PromptResult(WireStruct, kw_only=True):
    """ACP ``PromptResponse``."""

    session_id: str  # ZeroClaw
    stop_reason: StopReason
    content: str  # ZeroClaw
    usage: PromptUsage | None = None  # ZeroClaw
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class PlanEntry(WireStruct, kw_only=True):
    content: str
    status: PlanEntryStatus
    priority: PlanEntryPriority
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AvailableCommand(WireStruct, kw_only=True):
    name: str
    description: str
    input: AvailableCommandInput | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class AvailableCommandInput(WireStruct, kw_only=True):
    """ACP ``UnstructuredCommandInput``."""

    hint: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class Cost(WireStruct, kw_only=True):
    amount: float
    currency: str
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class RequestPermissionResult(WireStruct, kw_only=True):
    """ACP ``RequestPermissionResponse``."""

    outcome: PermissionOutcome
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class CancelledOutcome(WireStruct, tag_field="outcome", tag="cancelled", kw_only=True):
    """ACP ``RequestPermissionOutcome`` ``cancelled``."""


class SelectedOutcome(WireStruct, tag_field="outcome", tag="selected", kw_only=True):
    """ACP ``SelectedPermissionOutcome``, the ``selected`` ``RequestPermissionOutcome``."""

    option_id: str
    replacement_content: str | None = None  # ZeroClaw
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


PermissionOutcome: TypeAlias = CancelledOutcome | SelectedOutcome
