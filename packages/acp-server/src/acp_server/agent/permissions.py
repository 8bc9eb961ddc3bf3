"""The permission back-channel: ``session/request_permission`` requests and their answers.

Seed, "session/request_permission": the client must answer before the tool proceeds; no
answer within ``sessionTimeoutSecs`` denies the call. Option sets come from
``acp_core.schema.permission_options``; this module builds the ``toolCall`` the client
shows and turns the outcome into a ``Verdict`` the runtime acts on.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from acp_core import schema
from acp_server.agent.tools._text import encodable
from acp_server.agent.tools.base import ToolDefinition

DEFAULT_MAX_SUMMARY_CHARS: Final = 2000
"""An approval prompt shows at most this much of the arguments summary."""

DENIED_BY_USER: Final = "Denied by user."


def runtime_denial(tool_name: str) -> str:
    """Model-facing text when nobody decided (timeout, dismissal, error): reference wording."""
    return (
        f"Tool call not executed: '{tool_name}' requires approval and no operator decision "
        "was available, so the runtime denied it by policy. This was not a user's decision."
    )


class VerdictKind(enum.Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT = "reject"  # the operator said no
    REJECT_WITH_EDIT = "reject_with_edit"  # no, and use this text as the tool result
    NO_DECISION = "no_decision"  # dismissed, timed out, unknown answer: runtime denies


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    replacement: str = ""

    @property
    def allowed(self) -> bool:
        return self.kind in (VerdictKind.ALLOW_ONCE, VerdictKind.ALLOW_ALWAYS)


NO_DECISION: Final = Verdict(VerdictKind.NO_DECISION)

_BY_OPTION_ID: Final = {
    schema.ALLOW_ONCE.option_id: VerdictKind.ALLOW_ONCE,
    schema.ALLOW_ALWAYS.option_id: VerdictKind.ALLOW_ALWAYS,
    schema.REJECT_ONCE.option_id: VerdictKind.REJECT,
    "reject-always": VerdictKind.REJECT,
    schema.REJECT_WITH_EDIT.option_id: VerdictKind.REJECT_WITH_EDIT,
}


def verdict_from_outcome(outcome: schema.PermissionOutcome | None) -> Verdict:
    """Map a client's answer; anything unclear denies (reference: "no decision")."""
    if not isinstance(outcome, schema.SelectedOutcome):
        return NO_DECISION
    kind = _BY_OPTION_ID.get(outcome.option_id)
    if kind is None:
        return NO_DECISION
    return Verdict(kind, outcome.replacement_content or "")


def arguments_summary(arguments: Mapping[str, Any]) -> str:
    """``command: git status --short, approved: false`` (reference style), bounded."""
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else _json_scalar(value)
        parts.append(f"{key}: {shown}")
    text = ", ".join(parts) or "(no arguments)"
    if len(text) > DEFAULT_MAX_SUMMARY_CHARS:
        text = text[: DEFAULT_MAX_SUMMARY_CHARS - 1] + "…"
    return text


def _json_scalar(value: object) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def approval_request(
    session_id: str, definition: ToolDefinition, arguments: Mapping[str, Any]
) -> schema.RequestPermissionParams:
    """Params of the approval request for one tool call (the reference server's shape), as the tool's
    definition presents it: an ``edit`` prompt shows the diff and offers the new text for
    ``reject-with-edit``; any other shows an arguments summary. Unpaired surrogates in the
    arguments are shown as ``\\udXXX`` escapes (the tool itself refuses such arguments)."""
    arguments = encodable(arguments)
    presentation = definition.presentation
    edit = presentation.approval_kind == "edit"
    raw_input: Any = presentation.raw_input(arguments) if edit else {"tool": definition.name}
    content = presentation.diff(arguments) if edit else None
    if content is None:
        content = [schema.text_tool_content(arguments_summary(arguments))]
    return schema.RequestPermissionParams(
        session_id=session_id,
        options=schema.permission_options(edit=edit),
        tool_call=schema.PermissionToolCall(
            tool_call_id=f"approval-{uuid.uuid4()}",
            title=f"Approve {definition.name}?",
            kind=presentation.approval_kind,
            status="pending",
            raw_input=raw_input,
            content=content,
            proposed_edit=presentation.proposed_edit(arguments) if edit else None,
        ),
    )


def choice_request(
    session_id: str, question: str, choices: Sequence[str]
) -> schema.RequestPermissionParams:
    """ask_user with choices over the permission path (seed): one option per choice."""
    return schema.RequestPermissionParams(
        session_id=session_id,
        options=schema.choice_options(choices),
        tool_call=schema.PermissionToolCall(
            tool_call_id=f"ask-user-{uuid.uuid4()}",
            title=question,
            kind="other",
            status="pending",
        ),
    )


def choice_from_outcome(outcome: schema.PermissionOutcome | None, count: int) -> int | None:
    """The index the client picked, or None when dismissed or unrecognised."""
    if outcome is None:
        return None
    return schema.chosen_index(outcome, count)
