"""Tools that talk to the person rather than the machine: ask_user, escalate_to_human, todo_write.

On ACP, ask_user maps its choices onto ``session/request_permission`` options (the ZeroClaw
ACP documentation, "session/request_permission") for clients that show each option by its name. A client
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
from typing import Annotated, Any, Final, Literal, get_args

import msgspec
from msgspec import Meta, field

from acp_core import schema
from acp_server.agent.tools._titles import prose_title
from acp_server.agent.tools.arguments import (
    SchemaOf,
    ToolArguments,
    one_of,
    parse_arguments,
    read_stored,
)
from acp_server.agent.tools.base import (
    ClientSide,
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.model import PlanStep, StreamedPlan, StreamedText, ToolRecord
from acp_server.security import ToolRules

DEFAULT_MAX_CHOICES: Final = 20
DEFAULT_MAX_CHOICE_CHARS: Final = 200
DEFAULT_MAX_QUESTION_CHARS: Final = 4000
DEFAULT_MAX_ESCALATION_CHARS: Final = 16_000
DEFAULT_MAX_TODOS: Final = 100
DEFAULT_MAX_TODO_CHARS: Final = 1000
Urgency = Literal["low", "medium", "high", "critical"]
URGENCY_LEVELS: Final = get_args(Urgency)
ESCALATION_SHOWN_PREFIX: Final = "Escalation shown to the user"
"""How an escalate_to_human result starts when the text reached the chat."""
PLAN_UPDATED_PREFIX: Final = "Plan updated:"
"""How a todo_write result starts when the tool set the plan."""
# Tools that only talk to the user approve themselves (ToolRules.self_approving).
_TALKS_TO_THE_USER: Final = ToolRules(self_approving=True)
Status = Literal["pending", "in_progress", "completed"]
_STATUSES: Final = get_args(Status)
Priority = Literal["high", "medium", "low"]


class AskUserArguments(ToolArguments):
    question: Annotated[str, Meta(min_length=1, max_length=DEFAULT_MAX_QUESTION_CHARS)]
    # No choices, or none (``[]``): a free-form question.
    choices: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=DEFAULT_MAX_CHOICE_CHARS)]],
            Meta(max_length=DEFAULT_MAX_CHOICES),
        ]
        | None
    ) = None
    multi_select: (
        Annotated[bool, Meta(description="The user may pick several choices (default false).")]
        | None
    ) = None


class AskUserTool:
    # A question is not execution: kind "other" (CodeCompanion.nvim would label it
    # "Execute: …"), titled by the question itself.
    definition: Final = ToolDefinition(
        name="ask_user",
        kind="other",
        rules=_TALKS_TO_THE_USER,
        title=prose_title("question"),
        arguments=AskUserArguments,
    )
    name = definition.name
    description = (
        "Ask the user a question and wait for the answer: a pick from 'choices', several "
        "picks with multi_select, or free text without choices. Free text and multi_select "
        "need a client that shows forms; where it does not, the call fails: offer choices, "
        "or ask in your reply instead."
    )
    side_effects = False
    parameters = SchemaOf(AskUserArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(AskUserArguments, arguments)
        question, choices = given.question, given.choices
        client = ctx.client
        can_elicit = client is not None and client.can_elicit
        if not choices:
            if not can_elicit:
                raise RefusedCall(
                    "ask_user needs 'choices' on this connection: the client does not show "
                    "free-form questions (ACP elicitation, the elicitation RFD's form mode). "
                    "Offer choices, or ask the question in your reply and end the turn."
                )
            return await _elicit(ctx, question, free_text_form(question))
        if not all(choice.strip() for choice in choices):
            raise RefusedCall("Invalid 'choices': expected a list of non-empty strings")
        if given.multi_select:
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
    given = read_stored(EscalateArguments, arguments)
    if given is None:
        return None
    try:
        return ToolRecord(streamed=(StreamedText(escalation_message(given)),))
    except ToolError:
        return None


class EscalateArguments(ToolArguments):
    summary: Annotated[str, Meta(min_length=1, description="One-line summary.")]
    context: Annotated[str, Meta(description="Details the person needs.")] | None = None
    urgency: Annotated[Urgency, one_of(Urgency)] | None = None
    wait_for_response: (
        Annotated[
            bool, Meta(description="Not supported on this connection; must be false or omitted.")
        ]
        | None
    ) = None


class EscalateToHumanTool:
    definition: Final = ToolDefinition(
        name="escalate_to_human",
        kind="execute",
        rules=_TALKS_TO_THE_USER,
        title=prose_title("summary", prefix="Escalate: "),
        legacy_record=_legacy_escalation_record,
        arguments=EscalateArguments,
    )
    name = definition.name
    description = (
        "Alert the user to something that needs human attention (a blocker, a risky "
        "decision, missing access). The message is shown in the chat; this does not wait "
        "for a reply."
    )
    side_effects = False
    parameters = SchemaOf(EscalateArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(EscalateArguments, arguments)
        if given.wait_for_response:
            raise RefusedCall(
                "wait_for_response is not supported on ACP sessions: the escalation is shown "
                "to the user, but a reply cannot be awaited. Call again without it and end "
                "the turn so the user can answer."
            )
        message = escalation_message(given)
        await ctx.send_text(message)
        return ToolOutput(f"{ESCALATION_SHOWN_PREFIX} ({given.urgency or 'medium'} urgency).")


def escalation_message(given: EscalateArguments) -> str:
    """The chat text an escalate_to_human call shows, from its arguments alone.

    Raises:
        ToolError: the arguments are not a valid escalation.
    """
    summary = given.summary.strip()
    context = (given.context or "").strip()
    urgency = given.urgency or "medium"
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


class TodoItem(msgspec.Struct, kw_only=True):
    """One item of todo_write's list. Other fields are ignored, not refused: models
    trained on other agents' todo tools add some (``id``)."""

    content: Annotated[str, Meta(min_length=1, max_length=DEFAULT_MAX_TODO_CHARS)]
    status: Annotated[Status, one_of(Status)]
    priority: Annotated[Priority, one_of(Priority)] | None = None
    active_form: (
        Annotated[str, Meta(description="Present-tense label, e.g. 'Running tests'.")] | None
    ) = field(default=None, name="activeForm")


class TodoWriteArguments(ToolArguments):
    todos: Annotated[list[TodoItem], Meta(max_length=DEFAULT_MAX_TODOS)]


def _plan(given: TodoWriteArguments) -> list[PlanStep]:
    """The plan the items set: content trimmed, defaults filled in.

    Raises:
        RefusedCall: an item's content is blank.
    """
    steps: list[PlanStep] = []
    for index, item in enumerate(given.todos):
        content = item.content.strip()
        if not content:
            raise RefusedCall(f"'todos[{index}].content' must not be empty")
        priority = item.priority or "medium"
        steps.append(PlanStep(content, item.status, priority, item.active_form or None))
    return steps


def plan_from_todos(arguments: Mapping[str, Any]) -> tuple[PlanStep, ...] | None:
    """The plan a successful ``todo_write`` call set, or None if its arguments do not say
    (read back the way the tool read them)."""
    given = read_stored(TodoWriteArguments, arguments)
    if given is None:
        return None
    try:
        return tuple(_plan(given))
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
        arguments=TodoWriteArguments,
    )
    name = definition.name
    description = (
        "Replace the task plan shown to the user. Send the whole list every time, each "
        "item with content and status (pending, in_progress, completed); keep exactly one "
        "item in_progress while working."
    )
    side_effects = False
    parameters = SchemaOf(TodoWriteArguments)

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        entries = _plan(parse_arguments(TodoWriteArguments, arguments))
        await ctx.set_plan(entries)
        counts = {status: sum(entry.status == status for entry in entries) for status in _STATUSES}
        return ToolOutput(
            f"{PLAN_UPDATED_PREFIX} {len(entries)} item(s) ({counts['completed']} completed, "
            f"{counts['in_progress']} in progress, {counts['pending']} pending)"
        )
