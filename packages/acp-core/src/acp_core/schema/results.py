"""Results of the client-to-agent requests (``initialize``, ``session/new``, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec

from acp_core.jsonrpc import JsonValue
from acp_core.schema.config_options import ConfigOption, PromptUsage
from acp_core.schema.wire import (
    AGENT_NAME,
    AGENT_TITLE,
    PROTOCOL_VERSION,
    EmptyObject,
    StopReason,
    WireStruct,
)

if TYPE_CHECKING:
    Json: TypeAlias = JsonValue
else:
    # msgspec cannot evaluate the recursive JsonValue alias; Any decodes the same values.
    Json = Any

# --------------------------------------------------------------------------- results


class PromptCapabilities(WireStruct, kw_only=True):
    image: bool
    audio: bool
    embedded_context: bool


class McpCapabilities(WireStruct, kw_only=True):
    http: bool
    sse: bool


class SessionCapabilities(WireStruct, kw_only=True):
    resume: EmptyObject | None = None
    close: EmptyObject | None = None
    list: EmptyObject | None = None
    delete: EmptyObject | None = None
    additional_directories: EmptyObject | None = None


class AgentCapabilities(WireStruct, kw_only=True):
    load_session: bool
    prompt_capabilities: PromptCapabilities
    mcp_capabilities: McpCapabilities
    session_capabilities: SessionCapabilities | None = None


class Implementation(WireStruct, kw_only=True):
    name: str
    title: str | None = None
    version: str


class ZeroclawMeta(WireStruct, kw_only=True):
    default_model: str | None = None
    max_sessions: int
    session_timeout_secs: int
    sandbox: dict[str, Json] | None = None
    """The default agent's OS sandbox for shell commands (requested, active, reason)."""


class InitializeMeta(WireStruct, kw_only=True):
    zeroclaw: ZeroclawMeta


class InitializeResult(WireStruct, kw_only=True):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation
    auth_methods: list[Json]
    meta: InitializeMeta | None = msgspec.field(default=None, name="_meta")


def initialize_result(
    *,
    store_available: bool,
    version: str,
    default_model: str | None,
    max_sessions: int,
    session_timeout_secs: int,
    sandbox: dict[str, Json] | None = None,
    image: bool = False,
) -> InitializeResult:
    """The ``initialize`` result exactly as the seed shows it.

    With a session store: ``loadSession: true`` and ``sessionCapabilities {resume, close}``,
    plus ACP's ``list`` and ``delete`` markers (the store serves both) and
    ``additionalDirectories`` (extra jail roots, stored with the session). ``image``:
    ``promptCapabilities.image`` (the agent's provider takes images).
    Without one the seed says "all three are absent or false": ``loadSession: false`` and no
    ``sessionCapabilities``. ``defaultModel`` is omitted when no model is configured.
    """
    return InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        agent_capabilities=AgentCapabilities(
            load_session=store_available,
            prompt_capabilities=PromptCapabilities(image=image, audio=False, embedded_context=True),
            mcp_capabilities=McpCapabilities(http=False, sse=False),
            session_capabilities=(
                SessionCapabilities(
                    resume=EmptyObject(),
                    close=EmptyObject(),
                    list=EmptyObject(),
                    delete=EmptyObject(),
                    additional_directories=EmptyObject(),
                )
                if store_available
                else None
            ),
        ),
        agent_info=Implementation(name=AGENT_NAME, title=AGENT_TITLE, version=version),
        auth_methods=[],
        meta=InitializeMeta(
            zeroclaw=ZeroclawMeta(
                default_model=default_model,
                max_sessions=max_sessions,
                session_timeout_secs=session_timeout_secs,
                sandbox=sandbox,
            )
        ),
    )


class SessionZeroclawMeta(WireStruct, kw_only=True):
    sandbox: dict[str, Json] | None = None
    """The session's own OS sandbox for shell commands (from its agent's risk profile)."""
    skipped_mcp_servers: list[str] | None = None
    """``mcpServers`` entries not started: http/sse servers (only stdio is supported)."""


class NewSessionMeta(WireStruct, kw_only=True):
    zeroclaw: SessionZeroclawMeta


class NewSessionResult(WireStruct, kw_only=True):
    session_id: str
    workspace_dir: str
    config_options: list[ConfigOption] | None = None
    meta: NewSessionMeta | None = msgspec.field(default=None, name="_meta")


class PromptResult(WireStruct, kw_only=True):
    session_id: str
    stop_reason: StopReason
    content: str
    usage: PromptUsage | None = None


class StopResult(WireStruct, omit_defaults=False, kw_only=True):
    session_id: str
    stopped: bool = True


class EmptyResult(WireStruct, kw_only=True):
    """``{}``: load, resume, close, cancel."""


class InboundUpdateResult(WireStruct, omit_defaults=False, kw_only=True):
    """Answer to an inbound ``session/update`` / ``session/event`` request."""

    session_id: str
    type: str
    status: str = "processed"


class SessionInfo(WireStruct, kw_only=True):
    """One entry of ``session/list`` (ACP ``SessionInfo``): ``title`` is absent until the
    session's first prompt names it (never null: Lua clients decode null as a truthy
    value, and CodeCompanion.nvim's ``/resume`` then fails on it); ``updatedAt`` is
    ISO 8601."""

    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str


class ListSessionsResult(WireStruct, kw_only=True):
    """``session/list``: one page, newest first; ``nextCursor`` is absent on the last."""

    sessions: list[SessionInfo]
    next_cursor: str | None = None
