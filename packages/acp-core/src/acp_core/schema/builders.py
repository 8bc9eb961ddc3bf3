"""The messages acp_core builds from the generated ACP types: text blocks, the
``initialize`` result, and the styled turn-cancelled marker."""

from __future__ import annotations

import uuid

from acp_core.schema.generated import (
    AgentCapabilities,
    Implementation,
    InitializeResult,
    McpCapabilities,
    PromptCapabilities,
    SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionDeleteCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    TextContent,
    ToolCallContentBlock,
    ToolCallStart,
)
from acp_core.schema.wire import AGENT_NAME, AGENT_TITLE, PROTOCOL_VERSION, Json
from acp_core.schema.zeroclaw import InitializeMeta, SessionForkCapabilities, ZeroclawMeta


def text_block(text: str) -> TextContent:
    return TextContent(text=text)


def text_tool_content(text: str) -> ToolCallContentBlock:
    """``{"type":"content","content":{"type":"text","text":…}}``."""
    return ToolCallContentBlock(content=TextContent(text=text))


def initialize_result(
    *,
    store_available: bool,
    version: str,
    default_model: str | None,
    max_sessions: int,
    session_timeout_secs: int,
    sandbox: dict[str, Json] | None = None,
    image: bool = False,
    mcp_over_http: bool = False,
    auth_methods: list[Json] | None = None,
) -> InitializeResult:
    """The ``initialize`` result exactly as the ZeroClaw ACP documentation shows it.

    With a session store: ``loadSession: true`` and ``sessionCapabilities {resume, close}``,
    plus ACP's ``list`` and ``delete`` markers (the store serves both) and
    ``additionalDirectories`` (extra jail roots, stored with the session) and ACP's
    unstable ``fork`` (``session/fork`` copies a stored session). ``image``:
    ``promptCapabilities.image`` (the agent's provider takes images). ``mcp_over_http``:
    ``mcpCapabilities.http`` and ``.sse`` (the agent connects the HTTP MCP servers a client
    names, over either transport).
    Without one the documentation says "all three are absent or false": ``loadSession:
    false`` and no ``sessionCapabilities``. ``defaultModel`` is omitted when no model is
    configured. ``auth_methods``: ACP ``authMethods`` (none by default).
    """
    return InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        agent_capabilities=AgentCapabilities(
            load_session=store_available,
            prompt_capabilities=PromptCapabilities(image=image, audio=False, embedded_context=True),
            mcp_capabilities=McpCapabilities(http=mcp_over_http, sse=mcp_over_http),
            session_capabilities=(
                SessionCapabilities(
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                    list=SessionListCapabilities(),
                    delete=SessionDeleteCapabilities(),
                    additional_directories=SessionAdditionalDirectoriesCapabilities(),
                    fork=SessionForkCapabilities(),
                )
                if store_available
                else None
            ),
        ),
        agent_info=Implementation(name=AGENT_NAME, title=AGENT_TITLE, version=version),
        auth_methods=list(auth_methods or ()),
        meta=InitializeMeta(
            zeroclaw=ZeroclawMeta(
                default_model=default_model,
                max_sessions=max_sessions,
                session_timeout_secs=session_timeout_secs,
                sandbox=sandbox,
            )
        ),
    )


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
