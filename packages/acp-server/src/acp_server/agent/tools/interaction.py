"""Tools that talk to the person rather than the machine: ask_user, escalate_to_human, todo_write.

On ACP, ask_user maps its choices onto ``session/request_permission`` options (seed,
"session/request_permission") for clients that show each option by its name. A client
that answers permission requests by the option's kind gets one option per kind (at most
``MAX_ONE_PER_KIND_CHOICES`` choices), or a form when it offers one; a client that
cannot send back the person's pick at all is not asked: the call fails fast and the
model asks in its reply (acp_server/protocol/client_profile.py says which client is
which). A free-form question (no choices), or several choices the user may pick together
(``multi_select``), is an ACP ``elicitation/create`` form when the client advertises
``elicitation.form``: one text field, or the choices as an enum array; without that
capability ask_user fails fast, as the ZeroClaw ACP docs say. escalate_to_human's text reaches the client as an
``agent_message_chunk``; waiting for a reply is not possible on ACP. todo_write replaces
the session plan, which the runtime emits as a ``plan`` update.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, cast

from acp_core import schema
from acp_server.agent.conversation import PlanStep, StreamedPlan, StreamedText, ToolRecord
from acp_server.agent.tools._args import optional_bool, optional_str, required_str
from acp_server.agent.tools._titles import prose_title
from acp_server.agent.tools.base import (
    ClientSide,
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.security import ToolRules

DEFAULT_MAX_CHOICES: Final = 20
DEFAULT_MAX_CHOICE_CHARS: Final = 200
DEFAULT_MAX_QUESTION_CHARS: Final = 4000
DEFAULT_MAX_ESCALATION_CHARS: Final = 16_000
DEFAULT_MAX_TODOS: Final = 100
DEFAULT_MAX_TODO_CHARS: Final = 1000
URGENCY_LEVELS: Final = ("low", "medium", "high", "critical")
ESCALATION_SHOWN_PREFIX: Final = "Escalation shown to the user"
"""How an escalate_to_human result starts when the text reached the chat."""
PLAN_UPDATED_PREFIX: Final = "Plan updated:"
"""How a todo_write result starts when the tool set the plan."""
# Tools that only talk to the user approve themselves (ToolRules.self_approving).
_TALKS_TO_THE_USER: Final = ToolRules(self_approving=True)
_STATUSES: Final = ("pending", "in_progress", "completed")
_PRIORITIES: Final = ("high", "medium", "low")


class AskUserTool:
    # A question is not execution: kind "other" (CodeCompanion.nvim would label it
    # "Execute: …"), titled by the question itself.
    definition: Final = ToolDefinition(
        name="ask_user", kind="other", rules=_TALKS_TO_THE_USER, title=prose_title("question")
    )
    name = definition.name
    description = (
        "Ask the user a question and wait for the answer: a pick from 'choices', several "
        "picks with multi_select, or free text without choices. Free text and multi_select "
        "need a client that shows forms; where it does not, the call fails: offer choices, "
        "or ask in your reply instead."
    )
    side_effects = False

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "question": {"type": "string"},
                "choices": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": DEFAULT_MAX_CHOICES,
                },
                "multi_select": {
                    "type": "boolean",
                    "description": "The user may pick several choices (default false).",
                },
            },
            "required": ["question"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        question = required_str(arguments, "question")
        if len(question) > DEFAULT_MAX_QUESTION_CHARS:
            raise RefusedCall(
                f"question is too long (limit: {DEFAULT_MAX_QUESTION_CHARS} characters)"
            )
        raw_choices = arguments.get("choices")
        multi_select = optional_bool(arguments, "multi_select")
        client = ctx.client
        can_elicit = client is not None and client.can_elicit
        if raw_choices is None or raw_choices == []:
            if not can_elicit:
                raise RefusedCall(
                    "ask_user needs 'choices' on this connection: the client does not show "
                    "free-form questions (ACP elicitation, the elicitation RFD's form mode). "
                    "Offer choices, or ask the question in your reply and end the turn."
                )
            return await _elicit(ctx, question, free_text_form(question))
        if not isinstance(raw_choices, list) or not all(
            isinstance(choice, str) and choice.strip() for choice in raw_choices
        ):
            raise RefusedCall("Invalid 'choices': expected a list of non-empty strings")
        choices = cast(list[str], raw_choices)
        if len(choices) > DEFAULT_MAX_CHOICES:
            raise RefusedCall(f"Too many choices: {len(choices)} (limit: {DEFAULT_MAX_CHOICES})")
        if any(len(choice) > DEFAULT_MAX_CHOICE_CHARS for choice in choices):
            raise RefusedCall(
                f"A choice is too long (limit: {DEFAULT_MAX_CHOICE_CHARS} characters)"
            )
        if multi_select:
            if not can_elicit:
                raise RefusedCall(
                    "multi_select needs a client that shows forms (ACP elicitation); this one "
                    "does not. Ask for one choice, or ask in your reply and end the turn."
                )
            return await _elicit(ctx, question, multi_select_form(question, choices))
        shows = client.choice_questions if client is not None else "names"
        if shows != "names" and can_elicit:
            # Only a client that shows each permission option by name gets the ZeroClaw
            # ACP docs' permission mapping; any other that offers forms gets a form, which
            # shows every choice by its text.
            return await _elicit(ctx, question, single_select_form(question, choices))
        _check_choices_can_be_asked(client, len(choices))
        picked = await ctx.ask_choice(question, choices)
        if picked is None:
            return ToolOutput(
                "Error: The user did not pick a choice (dismissed, denied or timed out).",
                ok=False,
            )
        if not 0 <= picked < len(choices):
            raise ToolError(f"The client answered with an unknown choice index {picked}")
        return ToolOutput(f"The user chose: {choices[picked]}")


ANSWER_FIELD: Final = "answer"
"""The one field of an ask_user form."""


def free_text_form(question: str) -> dict[str, Any]:
    """The ``requestedSchema`` of a free-form question: one required text field."""
    field = {"type": "string", "title": "Answer", "description": question}
    return {"type": "object", "properties": {ANSWER_FIELD: field}, "required": [ANSWER_FIELD]}


def _check_choices_can_be_asked(client: ClientSide | None, count: int) -> None:
    """Fail fast where a permission request cannot carry the person's pick faithfully
    (acp_server/protocol/client_profile.py): the model then asks in its reply instead.

    Raises:
        RefusedCall: the client answers permission requests by kind (CodeCompanion.nvim,
            acpx, avante.nvim), or takes fewer choices than ``count``.
    """
    shows = client.choice_questions if client is not None else "names"
    named = f" ({client.client_name})" if client is not None and client.client_name else ""
    if shows == "unasked":
        raise RefusedCall(
            f"ask_user cannot offer choices in this client{named}: it answers a permission "
            "request by the kind of option (allow/reject) or on its own, so the answer "
            "could be one the user never picked. Ask the question in your reply, listing "
            "the choices, and end the turn; the user answers in the chat."
        )
    if shows == "one_per_kind" and count > schema.MAX_ONE_PER_KIND_CHOICES:
        raise RefusedCall(
            f"This client{named} can be offered at most {schema.MAX_ONE_PER_KIND_CHOICES} "
            f"choices (one per kind of permission option), not {count}. Offer at most "
            f"{schema.MAX_ONE_PER_KIND_CHOICES}, or ask in your reply and end the turn."
        )


def single_select_form(question: str, choices: list[str]) -> dict[str, Any]:
    """The ``requestedSchema`` of a one-choice question: the choices as a string enum."""
    field = {"type": "string", "title": "Answer", "description": question, "enum": list(choices)}
    return {"type": "object", "properties": {ANSWER_FIELD: field}, "required": [ANSWER_FIELD]}


def multi_select_form(question: str, choices: list[str]) -> dict[str, Any]:
    """The ``requestedSchema`` of a multi-select question: the choices as an enum array."""
    field = {
        "type": "array",
        "title": "Answer",
        "description": question,
        "items": {"type": "string", "enum": list(choices)},
        "minItems": 1,
    }
    return {"type": "object", "properties": {ANSWER_FIELD: field}, "required": [ANSWER_FIELD]}


async def _elicit(ctx: ToolContext, question: str, form: dict[str, Any]) -> ToolOutput:
    """Ask through ``elicitation/create``; the answer (or why there is none) is the result."""
    assert ctx.client is not None
    answer = await ctx.client.elicit(question, form, ctx.tool_call_id)
    if answer.action == "decline":
        return ToolOutput("The user declined to answer the question.", ok=False)
    if answer.action == "cancel":
        return ToolOutput("The user dismissed the question without answering.", ok=False)
    if answer.action == "error":
        return ToolOutput(f"Error: the question could not be asked: {answer.detail}", ok=False)
    value = answer.content.get(ANSWER_FIELD)
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        allowed = form["properties"][ANSWER_FIELD].get("items", {}).get("enum")
        if allowed is not None and any(item not in allowed for item in value):
            return ToolOutput("Error: the client answered with a choice not offered.", ok=False)
        return ToolOutput("The user chose: " + ", ".join(value))
    field = form["properties"][ANSWER_FIELD]
    if isinstance(value, str) and "enum" in field:
        if value not in field["enum"]:
            return ToolOutput("Error: the client answered with a choice not offered.", ok=False)
        return ToolOutput(f"The user chose: {value}")
    if isinstance(value, str) and "items" not in field:
        return ToolOutput(f"The user answered: {value}")
    return ToolOutput("Error: the client accepted the question but sent no answer.", ok=False)


def _legacy_escalation_record(arguments: Mapping[str, Any], text: str) -> ToolRecord | None:
    """The record of an escalation stored before results carried one (schema < 3): its
    chat text, rebuilt from its arguments when its result says it was shown."""
    if not text.startswith(ESCALATION_SHOWN_PREFIX):
        return None
    try:
        return ToolRecord(streamed=(StreamedText(escalation_message(arguments)),))
    except ToolError:
        return None


class EscalateToHumanTool:
    definition: Final = ToolDefinition(
        name="escalate_to_human",
        kind="execute",
        rules=_TALKS_TO_THE_USER,
        title=prose_title("summary", prefix="Escalate: "),
        legacy_record=_legacy_escalation_record,
    )
    name = definition.name
    description = (
        "Alert the user to something that needs human attention (a blocker, a risky "
        "decision, missing access). The message is shown in the chat; this does not wait "
        "for a reply."
    )
    side_effects = False

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "One-line summary."},
                "context": {"type": "string", "description": "Details the person needs."},
                "urgency": {"type": "string", "enum": list(URGENCY_LEVELS)},
                "wait_for_response": {
                    "type": "boolean",
                    "description": "Not supported on this connection; must be false or omitted.",
                },
            },
            "required": ["summary"],
            "additionalProperties": False,
        }

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        if optional_bool(arguments, "wait_for_response"):
            raise RefusedCall(
                "wait_for_response is not supported on ACP sessions: the escalation is shown "
                "to the user, but a reply cannot be awaited. Call again without it and end "
                "the turn so the user can answer."
            )
        message = escalation_message(arguments)
        urgency = optional_str(arguments, "urgency") or "medium"
        await ctx.send_text(message)
        return ToolOutput(f"{ESCALATION_SHOWN_PREFIX} ({urgency} urgency).")


def escalation_message(arguments: Mapping[str, Any]) -> str:
    """The chat text an escalate_to_human call shows, from its arguments alone.

    Raises:
        ToolError: the arguments are not a valid escalation.
    """
    summary = required_str(arguments, "summary").strip()
    context = (optional_str(arguments, "context") or "").strip()
    urgency = optional_str(arguments, "urgency") or "medium"
    if urgency not in URGENCY_LEVELS:
        raise RefusedCall(f"Invalid 'urgency': {urgency!r} (one of {', '.join(URGENCY_LEVELS)})")
    if not summary:
        raise RefusedCall("'summary' must not be empty")
    message = f"\n\n**Escalation ({urgency} urgency):** {summary}"
    if context:
        message += f"\n\n{context}"
    message += "\n\n"
    if len(message) > DEFAULT_MAX_ESCALATION_CHARS:
        raise RefusedCall(
            f"Escalation is too long (limit: {DEFAULT_MAX_ESCALATION_CHARS} characters)"
        )
    return message


def _plan_entry(index: int, raw: object) -> PlanStep:
    where = f"todos[{index}]"
    if not isinstance(raw, dict):
        raise RefusedCall(f"Invalid {where}: expected an object with content and status")
    content = raw.get("content")
    if not isinstance(content, str) or not content.strip():
        raise RefusedCall(f"Invalid {where}.content: expected a non-empty string")
    if len(content) > DEFAULT_MAX_TODO_CHARS:
        raise RefusedCall(
            f"{where}.content is too long (limit: {DEFAULT_MAX_TODO_CHARS} characters)"
        )
    status = raw.get("status", "pending")
    if status not in _STATUSES:
        raise RefusedCall(f"Invalid {where}.status: {status!r} (one of {', '.join(_STATUSES)})")
    priority = raw.get("priority", "medium")
    if priority not in _PRIORITIES:
        raise RefusedCall(
            f"Invalid {where}.priority: {priority!r} (one of {', '.join(_PRIORITIES)})"
        )
    active_form = raw.get("activeForm")
    if active_form is not None and not isinstance(active_form, str):
        raise RefusedCall(f"Invalid {where}.activeForm: expected a string")
    return PlanStep(
        content=content.strip(),
        status=cast(Literal["pending", "in_progress", "completed"], status),
        priority=cast(Literal["high", "medium", "low"], priority),
        active_form=active_form or None,
    )


def plan_from_todos(arguments: Mapping[str, Any]) -> tuple[PlanStep, ...] | None:
    """The plan a successful ``todo_write`` call set, or None if its arguments do not say
    (read back the way the tool read them: content trimmed, defaults filled in)."""
    todos = arguments.get("todos")
    if not isinstance(todos, list):
        return None
    try:
        return tuple(_plan_entry(index, raw) for index, raw in enumerate(todos))
    except ToolError:
        return None


def _legacy_plan_record(arguments: Mapping[str, Any], text: str) -> ToolRecord | None:
    """The record of a todo_write stored before results carried one (schema < 3): the plan
    its arguments set, when its result says it was set."""
    if not text.startswith(PLAN_UPDATED_PREFIX):
        return None
    plan = plan_from_todos(arguments)
    return None if plan is None else ToolRecord(streamed=(StreamedPlan(plan),))


def _plan_title(arguments: Mapping[str, Any]) -> str | None:
    """``Update the plan (3 items)``."""
    todos = arguments.get("todos")
    if not isinstance(todos, list):
        return None
    return f"Update the plan ({len(todos)} item{'' if len(todos) == 1 else 's'})"


class TodoWriteTool:
    definition: Final = ToolDefinition(
        name="todo_write",
        kind="other",
        rules=_TALKS_TO_THE_USER,
        title=_plan_title,
        legacy_record=_legacy_plan_record,
    )
    name = definition.name
    description = (
        "Replace the task plan shown to the user. Send the whole list every time, each "
        "item with content and status (pending, in_progress, completed); keep exactly one "
        "item in_progress while working."
    )
    side_effects = False

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "maxItems": DEFAULT_MAX_TODOS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string"},
                            "status": {"type": "string", "enum": list(_STATUSES)},
                            "priority": {"type": "string", "enum": list(_PRIORITIES)},
                            "activeForm": {"type": "string", "description": "Present-tense label, e.g. 'Running tests'."},
                        },
                        "required": ["content", "status"],
                    },
                },
            },
            "required": ["todos"],
            "additionalProperties": False,
        }  # fmt: skip

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        todos = arguments.get("todos")
        if not isinstance(todos, list):
            raise RefusedCall("Missing or invalid 'todos': expected a list of items")
        if len(todos) > DEFAULT_MAX_TODOS:
            raise RefusedCall(f"Too many todos: {len(todos)} (limit: {DEFAULT_MAX_TODOS})")
        entries = [_plan_entry(index, raw) for index, raw in enumerate(todos)]
        await ctx.set_plan(entries)
        counts = {status: sum(entry.status == status for entry in entries) for status in _STATUSES}
        return ToolOutput(
            f"{PLAN_UPDATED_PREFIX} {len(entries)} item(s) ({counts['completed']} completed, "
            f"{counts['in_progress']} in progress, {counts['pending']} pending)"
        )
