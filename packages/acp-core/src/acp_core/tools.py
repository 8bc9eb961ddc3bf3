"""Tool name → ACP ``ToolKind``, as ZeroClaw's implementation maps them.

The server's built-in tools declare their kind in their own ``ToolDefinition``
(``acp_server.agent.tools.base``) and agree with this table; it labels every other tool
(MCP tools, names ZeroClaw's implementation knows but this server does not implement), so the table
keeps ZeroClaw's names.

``tool_kind`` labels ``tool_call`` / ``tool_call_update`` notifications (as ZeroClaw's implementation
server labels them). ZeroClaw deliberately never emits ``read``/``search``/``fetch``: clients
collapse those kinds' output, and users should see what a read or search returned, so
file_read, web_fetch and friends are ``other``; so is ask_user, which executes nothing
(labelling it ``execute`` made CodeCompanion.nvim show "Execute: …"). ``approval_kind``
says which ``session/request_permission`` prompts are edit prompts: ``edit`` for the two
file-mutating tools (their prompt carries a diff); any other prompt carries its call's
own kind, so answering it does not change the card.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

ToolKindName: TypeAlias = Literal["execute", "edit", "delete", "other"]
ApprovalKind: TypeAlias = Literal["execute", "edit"]

EXECUTE_TOOLS: Final = frozenset(
    {
        "calculator",
        "claude_code",
        "claude_code_runner",
        "codex_cli",
        "composio",
        "cron_run",
        "delegate",
        "escalate_to_human",
        "execute_pipeline",
        "gemini_cli",
        "jira",
        "llm_task",
        "opencode_cli",
        "schedule",
        "security_ops",
        "sessions_send",
        "shell",
        "sop_advance",
        "sop_approve",
        "sop_execute",
        "vi_verify",
    }
)
EDIT_TOOLS: Final = frozenset(
    {
        "backup",
        "browser_open",
        "canvas",
        "cloud_ops",
        "cron_add",
        "file_edit",
        "file_write",
        "memory_export",
        "memory_store",
        "poll",
        "reaction",
        "report_template",
    }
)
DELETE_TOOLS: Final = frozenset({"cron_remove", "memory_forget", "memory_purge"})
FILE_EDIT_TOOLS: Final = frozenset({"file_edit", "file_write"})
"""Tools whose approval prompt shows a diff and offers ``reject-with-edit``."""


def tool_kind(name: str) -> ToolKindName:
    """The ACP ``kind`` for a tool call; unknown tools (MCP, plugins) are ``other``."""
    if name in EXECUTE_TOOLS:
        return "execute"
    if name in EDIT_TOOLS:
        return "edit"
    if name in DELETE_TOOLS:
        return "delete"
    return "other"


def approval_kind(name: str) -> ApprovalKind:
    """The ``kind`` of a ``session/request_permission`` tool call."""
    return "edit" if name in FILE_EDIT_TOOLS else "execute"


def is_file_edit_tool(name: str) -> bool:
    """True for file_edit / file_write: their approvals get a diff and ``reject-with-edit``."""
    return name in FILE_EDIT_TOOLS
