"""The permission back-channel: ``session/request_permission`` requests and their answers.

The ZeroClaw ACP documentation, "session/request_permission": the client must answer before the tool proceeds; no
answer within ``sessionTimeoutSecs`` denies the call. Option sets come from
``acp_core.schema.permission_options``; this module builds the ``toolCall`` the client
shows and turns the outcome into a ``Verdict`` the runtime acts on.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from acp_core import schema
from acp_server.agent.runtime.permissions import NO_DECISION, Verdict, VerdictKind
from acp_server.agent.tools._text import encodable
from acp_server.agent.tools.base import ClientSide, ToolDefinition
from acp_server.model import CallView
from acp_server.protocol.presentation.tool_updates import card_locations, diff_content

DEFAULT_MAX_SUMMARY_CHARS: Final = 2000
"""An approval prompt of a tool without a command argument shows at most this much of its
arguments summary; a longer one says plainly how much was left out and carries the full
arguments in ``rawInput.arguments``. A shell command is always shown in full (the
classifier refuses commands over ``security.DEFAULT_MAX_COMMAND_CHARS`` before anyone is
asked)."""


_BY_ZEROCLAW_ID: Final = {
    schema.ALLOW_ONCE.option_id: VerdictKind.ALLOW_ONCE,
    schema.ALLOW_ALWAYS.option_id: VerdictKind.ALLOW_ALWAYS,
    schema.REJECT_ONCE.option_id: VerdictKind.REJECT,
    "reject-always": VerdictKind.REJECT,
    schema.REJECT_WITH_EDIT.option_id: VerdictKind.REJECT_WITH_EDIT,
}
# An answer counts in either spelling of the ids (acp_core OptionIds), whichever the
# client was sent: a client written against the ZeroClaw ACP docs answers ``allow-once``.
_BY_OPTION_ID: Final = {
    **_BY_ZEROCLAW_ID,
    **{
        schema.KIND_OPTION_IDS[key]: kind
        for key, kind in _BY_ZEROCLAW_ID.items()
        if key in schema.KIND_OPTION_IDS
    },
    "reject_always": VerdictKind.REJECT,
}


def verdict_from_outcome(outcome: schema.PermissionOutcome | None) -> Verdict:
    """Map a client's answer; anything unclear denies (as ZeroClaw: "no decision")."""
    if not isinstance(outcome, schema.SelectedOutcome):
        return NO_DECISION
    kind = _BY_OPTION_ID.get(outcome.option_id)
    if kind is None:
        return NO_DECISION
    return Verdict(kind, outcome.replacement_content or "")


@dataclass(frozen=True, slots=True)
class ArgumentsSummary:
    """The text an approval prompt shows; ``shortened_by`` characters were left out."""

    text: str
    shortened_by: int = 0


def arguments_summary(
    arguments: Mapping[str, Any], *, limit: int | None = DEFAULT_MAX_SUMMARY_CHARS
) -> ArgumentsSummary:
    """``command: git status --short, approved: false`` (ZeroClaw's style).

    Over ``limit`` characters the text is cut and says so, with the number of characters
    left out: a prompt never hides part of what is approved without saying it.
    """
    parts = []
    for key, value in arguments.items():
        shown = value if isinstance(value, str) else _json_scalar(value)
        parts.append(f"{key}: {shown}")
    text = ", ".join(parts) or "(no arguments)"
    if limit is None or len(text) <= limit:
        return ArgumentsSummary(text)
    left_out = len(text) - limit
    return ArgumentsSummary(
        text[:limit]
        + f"\n[shortened by {left_out} characters: the full arguments are in rawInput.arguments]",
        shortened_by=left_out,
    )


def _json_scalar(value: object) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True, slots=True)
class Asking:
    """How one client is asked (acp_server/protocol/client_profile.py): the spelling of the
    approval options' ids, whether edits offer ``reject-with-edit``, whether ask_user's
    choices must be one option per kind."""

    option_ids: schema.OptionIds = "zeroclaw"
    reject_with_edit: bool = False
    one_per_kind: bool = False

    @classmethod
    def of(cls, client: ClientSide | None) -> Asking:
        if client is None:
            return cls()
        return cls(
            option_ids=client.option_ids,
            reject_with_edit=client.reject_with_edit,
            one_per_kind=client.choice_questions == "one_per_kind",
        )


def approval_request(
    session_id: str,
    definition: ToolDefinition,
    arguments: Mapping[str, Any],
    *,
    tool_call_id: str | None = None,
    view: CallView | None = None,
    asking: Asking = Asking(),
) -> schema.RequestPermissionParams:
    """Params of the approval request for one tool call, as the ZeroClaw ACP documentation's example shows them:
    ``rawInput`` ``{"tool": name, "summary": …}``, the summary being the whole command of
    a shell-like tool (the argument its ``ToolRules.command_argument`` names, or the line a
    skill's tool composes with ``ToolRules.command_of``) or else the
    arguments summary (cut at ``DEFAULT_MAX_SUMMARY_CHARS``, then with the full arguments
    in ``rawInput.arguments``). An ``edit`` prompt shows the call's diff (its ``view``'s)
    and, when ``asking.reject_with_edit`` (the client can send the replacement text), offers
    ``reject-with-edit`` with the new text in ``_meta.zeroclaw.proposedEdit``; any other
    shows the arguments
    summary (a command in full). Unpaired surrogates in the arguments are shown as
    ``\\udXXX`` escapes (the tool itself refuses such arguments).

    ``title`` and ``kind`` are the call's card's (``ToolDefinition.title_of``: the command
    itself, ``Edit `app.py```): clients merge the request into the card it names, and
    show the title as the question (CodeCompanion.nvim ``Execute: `ls```, acpx ``Allow
    `ls` [execute]?``), so the command approved is on screen and answering does not
    rename the card. ``tool_call_id`` is the call's own id (its ``tool_call`` announced
    it); without it the prompt gets an ``approval-`` id. The options' ids are spelled as
    ``asking.option_ids`` says."""
    arguments = encodable(arguments)
    presentation = definition.presentation
    edit = presentation.approval_kind == "edit"
    command_argument = definition.rules.command_argument
    command = arguments.get(command_argument) if command_argument else None
    summary = arguments_summary(
        arguments, limit=None if command_argument else DEFAULT_MAX_SUMMARY_CHARS
    )
    composed = command_of(arguments) if (command_of := definition.rules.command_of) else None
    if composed is not None:
        # A skill's tool runs a command line built from its arguments: that line is what
        # is approved, shown whole (the arguments follow in rawInput.arguments).
        command, summary = composed, arguments_summary({"command": composed}, limit=None)
    shown = command if isinstance(command, str) else summary.text
    raw_input: dict[str, Any] = {"tool": definition.name, "summary": shown}
    if summary.shortened_by or composed is not None:
        raw_input["arguments"] = dict(arguments)
    reject_with_edit = edit and asking.reject_with_edit
    content: list[schema.ToolCallContent] | None = None
    meta: dict[str, Any] | None = None
    if edit:
        content = diff_content(view) if view is not None else presentation.diff(arguments)
        proposed = presentation.proposed_edit(arguments) if reject_with_edit else None
        if proposed is not None:
            meta = {"zeroclaw": {"proposedEdit": proposed}}
    if content is None:
        content = [schema.text_tool_content(summary.text)]
    return schema.RequestPermissionParams(
        session_id=session_id,
        options=schema.permission_options(
            edit=edit,
            ids=asking.option_ids,
            reject_with_edit=reject_with_edit,
        ),
        tool_call=schema.PermissionToolCall(
            tool_call_id=tool_call_id or f"approval-{uuid.uuid4()}",
            title=definition.title_of(arguments),
            kind="edit" if edit else definition.kind,
            status="pending",
            raw_input=raw_input,
            content=content,
            locations=card_locations(view.locations) if view is not None else None,
            meta=meta,
        ),
    )


def choice_request(
    session_id: str,
    question: str,
    choices: Sequence[str],
    *,
    title: str,
    asking: Asking = Asking(),
    tool_call_id: str | None = None,
) -> schema.RequestPermissionParams:
    """ask_user with choices over the permission path (the ZeroClaw ACP docs,
    "session/request_permission"): one option per choice
    (``asking.one_per_kind``: no two of one kind, acp_core ``choice_options``), on the asking
    call's own card (``tool_call_id``; its update closes it, else an ``ask-user-`` id)
    under that card's ``title``. The content shows the question and the numbered choices,
    for clients that show the card's content but not the options' names."""
    numbered = "\n".join(f"{index}. {choice}" for index, choice in enumerate(choices, start=1))
    return schema.RequestPermissionParams(
        session_id=session_id,
        options=schema.choice_options(choices, one_per_kind=asking.one_per_kind),
        tool_call=schema.PermissionToolCall(
            tool_call_id=tool_call_id or f"ask-user-{uuid.uuid4()}",
            title=title,
            kind="other",
            status="pending",
            content=[schema.text_tool_content(f"{question}\n\n{numbered}")],
        ),
    )


def choice_from_outcome(outcome: schema.PermissionOutcome | None, count: int) -> int | None:
    """The index the client picked, or None when dismissed or unrecognised."""
    if outcome is None:
        return None
    return schema.chosen_index(outcome, count)
