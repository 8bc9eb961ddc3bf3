"""The agent runtime: one prompt turn, from the user's text to the model's last word.

The ZeroClaw ACP documentation, "session/prompt", as ZeroClaw's implementation runs it: the provider streams text and reasoning
(each delta becomes an ``agent_message_chunk`` / ``agent_thought_chunk``), then asks for
tools; each call is checked by the session's ``SecurityPolicy`` (allow / ask / deny),
approved through the client when needed, announced with ``tool_call``, executed, and
reported with ``tool_call_update`` carrying the same ``toolCallId``. Results go back to the
model until it ends the turn, at most ``max_tool_iterations`` rounds.

Nothing here knows about JSON-RPC or ACP's messages: the turn reports domain events through
a ``TurnIO`` (turn_io.py) the protocol renders. Cancellation is trio's: the connection runs
the turn inside the turn's cancel scope.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import trio

from acp_core import schema
from acp_server.agent.limits.actions import counts_as_action
from acp_server.agent.providers.base import (
    ModelRequest,
    ProviderError,
    StreamEnd,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    UsageReported,
)
from acp_server.agent.runtime.permissions import DENIED_BY_USER, VerdictKind, runtime_denial
from acp_server.agent.runtime.session import Session
from acp_server.agent.runtime.turn_io import TurnIO
from acp_server.agent.tools._args import unreadable_argument
from acp_server.agent.tools.base import (
    RefusedCall,
    Tool,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.agent.tools.mcp_names import MCP_TOOL_PREFIX
from acp_server.agent.tools.registry import definition_of
from acp_server.errors import ClientFacingError
from acp_server.model import (
    CallView,
    ChainedMessages,
    ChatMessage,
    DeliveredRecord,
    PlanStep,
    StreamedPlan,
    StreamedText,
    ToolCall,
    ToolRecord,
    Usage,
)
from acp_server.observability.metrics import REFUSED_BY_JAIL, REFUSED_BY_POLICY, ended_as
from acp_server.security import (
    Approval,
    PolicyDecision,
    PolicyViolation,
    remember_allow_always,
)
from acp_server.security.sandbox.spawn import ResourceLimits

logger = logging.getLogger(__name__)

EMPTY_OUTPUT_TEXT: Final = "(no output)"
EMPTY_COMPLETION_MESSAGE: Final = "The model provider returned an invalid semantic completion."
CANCELLED_CALL_TEXT: Final = "Cancelled: the turn was cancelled before this call finished."
CLOSE_ON_CANCEL_SECS: Final = 5.0
"""How long a cancelled call's closing update may wait for the connection's writer."""
BLANK_PROMPT_MESSAGE: Final = (
    "Agent turn failed: empty user message: refusing to dispatch a blank turn"
)


class TurnFailed(ClientFacingError):
    """The turn cannot complete; ``str()`` is what the client sees (JSON-RPC -32603)."""


@dataclass
class TurnOutcome:
    """A turn that ran to its end: what it adds to the history and what the client gets."""

    messages: list[ChatMessage]
    content: str
    plan: tuple[PlanStep, ...] | None = None
    usage: Usage = field(default_factory=Usage)


async def run_turn(session: Session, user_text: str, io: TurnIO) -> TurnOutcome:
    """Run one prompt turn to completion (cancellable from outside). A prompt naming one of
    the session's skills (``/<skill> ...``) runs with the skill's instructions in front of
    it (agent/skills/commands.py).

    Raises:
        TurnFailed: the prompt is blank, the model failed, or it produced nothing.
    """
    if not user_text.strip():
        raise TurnFailed(BLANK_PROMPT_MESSAGE)
    for problem in await session.prepare_tools():
        # Said where the person looks (an agent message), not only on stderr.
        await io.text(f"[{problem}]\n\n")
    await session.refresh_system_prompt()
    commands = session.commands.changed()  # the skills changed since the last list sent
    if commands is not None:
        await io.commands_changed(commands)
    runner = _TurnRunner(session, io)
    return await runner.run(session.commands.expand(user_text))


class _TurnRunner:
    def __init__(self, session: Session, io: TurnIO) -> None:
        self.session = session
        self.io = io
        self.new_messages: list[ChatMessage] = []
        self.usage = Usage()
        self.plan: tuple[PlanStep, ...] | None = None
        # A model choice made once the turn was admitted (session/set_config_option)
        # applies from the next turn: this one keeps the provider it was admitted with.
        turn = session.turn
        if turn is not None and turn.provider is not None:
            self.provider, self.context_window = turn.provider, turn.context_window
        else:
            self.provider, self.context_window = session.provider, session.context_window
        # All visible text of the turn, as the client saw it, recorded once: in the
        # session's Turn when there is one, so a cancelled turn answers with it too.
        self.streamed: list[str] = session.turn.streamed if session.turn is not None else []

    async def run(self, user_text: str) -> TurnOutcome:
        self.new_messages.append(ChatMessage(role="user", content=user_text))
        max_rounds = max(1, self.session.runtime_profile.max_tool_iterations)
        for round_index in range(max_rounds + 1):
            text, reasoning, calls = await self._model_round()
            self.new_messages.append(
                ChatMessage(
                    role="assistant",
                    content=text,
                    reasoning=reasoning or None,
                    tool_calls=tuple(calls),
                )
            )
            if not calls:
                if round_index == 0 and not text and not reasoning:
                    raise TurnFailed(EMPTY_COMPLETION_MESSAGE)
                break
            if round_index == max_rounds:
                # The model still wants tools after the last permitted round: stop here
                # and say so, rather than looping forever (runtime_profile bound). Each
                # call still gets a result, so the stored history stays valid for the
                # next turn (providers reject tool calls without results).
                note = (
                    f"[stopped: reached max_tool_iterations ({max_rounds}) "
                    "before the model finished]"
                )
                for call in calls:
                    skipped = ToolOutput(f"Tool call not executed: {note}", ok=False)
                    definition = definition_of(self.session.tools.get(call.name), call.name)
                    await self._announce(call.id, definition, call.arguments)
                    self.new_messages.append(
                        await self._report(call.id, definition, skipped, arguments=call.arguments)
                    )
                shown = ("\n\n" if self.streamed else "") + note
                await self._send_text(shown)
                # Kept as the turn's last assistant words, so session/load shows it too
                # and the model learns next turn why its calls did not run.
                self.new_messages.append(ChatMessage(role="assistant", content=shown))
                break
            for call in calls:
                result = await self._run_tool_call(call)
                self.new_messages.append(result)
        # The result's content is the turn's text exactly as it was streamed, so a client
        # that only reads the result sees what a streaming client rendered.
        content = "".join(self.streamed)
        return TurnOutcome(
            messages=self.new_messages, content=content, plan=self.plan, usage=self.usage
        )

    # -- the model ------------------------------------------------------------------

    async def _model_round(self) -> tuple[str, str, list[ToolCall]]:
        meter = self.session.cost
        if meter is not None:
            await meter.check()
        round_usage = Usage()
        usage_reported = False
        reported_cost: float | None = None
        request = ModelRequest(
            system_prompt=self.session.system_prompt,
            messages=ChainedMessages(self.session.history, self.new_messages),
            tools=self.session.tool_specs,
        )
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        stream, ended, started = self.provider.stream(request), False, trio.current_time()
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    if event.text:
                        text.append(event.text)
                        await self._send_text(event.text)
                elif isinstance(event, ThoughtDelta):
                    if event.text:
                        reasoning.append(event.text)
                        await self.io.text(event.text, thought=True)
                elif isinstance(event, ToolCallRequested):
                    call = event.call
                    if not call.id:
                        # No provider id: one fresh id for the history, the tool_call and
                        # its tool_call_update alike (as ZeroClaw's implementation does).
                        call = ToolCall(
                            id=str(uuid.uuid4()), name=call.name, arguments=call.arguments
                        )
                    calls.append(call)
                elif isinstance(event, UsageReported):
                    self.usage.add(event.usage)
                    round_usage.add(event.usage)
                    usage_reported = True
                    if event.cost_usd is not None:
                        reported_cost = (reported_cost or 0.0) + event.cost_usd
                elif isinstance(event, StreamEnd):
                    ended = True
                    break
        except ProviderError as exc:
            raise TurnFailed(f"Agent turn failed: {exc}") from exc
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                if ended:
                    await aclose()
                else:  # interrupted: closed even while cancelled, releasing its response now
                    with trio.CancelScope(shield=True):
                        await aclose()
            self.session.metrics.model_call(self.session.provider_ref, ended_as(ended), started)
        if meter is not None:
            await meter.record(round_usage, reported_cost)
        if usage_reported:
            await self.io.usage(round_usage.total_tokens, self.context_window)
        return "".join(text), "".join(reasoning), calls

    # -- tools ----------------------------------------------------------------------

    async def _run_tool_call(self, call: ToolCall) -> ChatMessage:
        """Decide, approve, announce, execute and report one call; returns the tool result.

        A call cut off by a cancelled turn still gets its closing ``failed`` update, sent
        shielded before the cancellation goes on, so no card is left pending or running."""
        try:
            return await self._decide_and_run(call)
        except BaseException:  # trio.Cancelled, possibly inside a tool's exception group
            definition = definition_of(self.session.tools.get(call.name), call.name)
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_ON_CANCEL_SECS):
                await self.io.tool_cut_off(call.id, definition, call.arguments, CANCELLED_CALL_TEXT)
            raise

    async def _decide_and_run(self, call: ToolCall) -> ChatMessage:
        session = self.session
        call_id = call.id
        arguments = dict(call.arguments)
        tool = session.tools.get(call.name)
        definition = definition_of(tool, call.name)
        output: ToolOutput
        tool_streamed: list[StreamedText | StreamedPlan] = []
        # Arguments that are not text (a lone surrogate anywhere) are refused before any
        # policy, card view, approval or tool sees them: a failed call the model can read.
        unreadable = unreadable_argument(arguments)
        decision = (
            None
            if tool is None or unreadable is not None
            else session.policy.decide(
                definition.name,
                arguments,
                side_effects=tool.side_effects,
                session_allowed=session.allow_always,
                rules=definition.rules,
            )
        )
        # What the card shows (absolute paths, diffs) is worked out from the files before
        # anything runs; a call the policy refuses reads nothing.
        view = (
            CallView()
            if decision is None or decision.approval is Approval.DENY
            else await self._view(definition, arguments)
        )
        # The call's card comes first: its permission request carries the same toolCallId,
        # so an editor that upserts cards by id shows one card the answer moves on.
        # rawInput is the model's arguments verbatim, live and on replay alike (as
        # ZeroClaw's implementation does); the approval travels in ToolContext.extra, not there.
        await self._announce(call_id, definition, arguments, view)
        if unreadable is not None:
            output = ToolOutput(f"Error: {unreadable}", ok=False, ran=False)
        elif tool is None or decision is None:
            available = ", ".join(sorted(session.tools)) or "none"
            text = f"Error: Unknown tool: {call.name} (available: {available})"
            if call.name.startswith(MCP_TOOL_PREFIX) and session.mcp is not None:
                # The tool may belong to an MCP server that failed: say so, rather than
                # leave the person with a log line on stderr they may never see.
                problems = session.mcp.problems
                if problems:
                    text += ". " + " ".join(problems)
            output = ToolOutput(text, ok=False)
        elif view.refusal is not None:
            output = ToolOutput(view.refusal, ok=False)  # it cannot apply: nobody is asked
        else:
            verdict = await self._authorise(call_id, definition, arguments, decision, view)
            counted = counts_as_action(call.name)
            if isinstance(verdict, str):
                output = ToolOutput(verdict, ok=False)
            elif counted and (over := session.actions.reserve()) is not None:
                output = ToolOutput(f"Error: {over}", ok=False)
            else:
                ran = True  # a call cut off by a cancel started: it keeps its slot
                try:
                    await self.io.tool_running(call_id)
                    output = await self._execute(
                        tool, arguments, tool_streamed, approved=verdict, call_id=call_id
                    )
                    ran = output.ran
                finally:
                    if counted:
                        session.actions.settle(ran=ran)
        return await self._report(call_id, definition, output, tool_streamed, arguments, view)

    async def _view(self, definition: ToolDefinition, arguments: Mapping[str, Any]) -> CallView:
        presentation = definition.presentation
        policy = self.session.policy
        client = self.io.client
        if presentation.reads_files and client is not None and client.reads_files:
            shown = await presentation.view_through_client(
                arguments, policy, definition.rules, client
            )
            if shown is not None:
                return shown
        if presentation.reads_files:
            return await trio.to_thread.run_sync(
                presentation.view, arguments, policy, definition.rules
            )
        return presentation.view(arguments, policy, definition.rules)

    async def _authorise(
        self,
        call_id: str,
        definition: ToolDefinition,
        arguments: dict[str, Any],
        decision: PolicyDecision,
        view: CallView,
    ) -> bool | str:
        """Whether the call may run: a bool (True when an operator approved it) or the
        model-facing denial text."""
        session = self.session
        name = definition.name
        if decision.approval is Approval.ALLOW:
            return False
        if decision.approval is Approval.DENY:
            self.session.metrics.tool_refused(REFUSED_BY_POLICY)
            return decision.reason or f"Tool call not executed: '{name}' is not allowed by policy."
        verdict = await self.io.ask_approval(call_id, definition, arguments, view)
        self.session.metrics.permission_answered(verdict.kind.value)
        if verdict.kind is VerdictKind.ALLOW_ALWAYS:
            remember_allow_always(session.allow_always, name, decision)
        if verdict.allowed:
            return True
        if verdict.kind is VerdictKind.REJECT:
            return DENIED_BY_USER
        if verdict.kind is VerdictKind.REJECT_WITH_EDIT:
            # The operator's text replaces the tool result; with none, it is a plain "no".
            return verdict.replacement if verdict.replacement.strip() else DENIED_BY_USER
        return runtime_denial(name)

    async def _execute(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        tool_streamed: list[StreamedText | StreamedPlan],
        *,
        approved: bool,
        call_id: str = "",
    ) -> ToolOutput:
        """Run the tool; what it streams to the client is also appended to ``tool_streamed``
        (the call's ``ToolRecord``, so ``session/load`` replays it). A question it asks
        (ask_user's choices) goes out on the call's own card, ``call_id``."""

        title = definition_of(tool, tool.name).title_of(arguments)

        async def ask_choice(question: str, choices: Sequence[str]) -> int | None:
            return await self._ask_choice(
                question, choices, title=title, tool_call_id=call_id or None
            )

        async def send_text(text: str) -> None:
            tool_streamed.append(StreamedText(text))
            await self._send_text(text)

        async def set_plan(entries: Sequence[PlanStep]) -> None:
            tool_streamed.append(StreamedPlan(tuple(entries)))
            await self._set_plan(entries)

        ctx = ToolContext(
            session_id=self.session.session_id,
            workspace=self.session.workspace,
            policy=self.session.policy,
            shell_timeout_secs=float(self.session.runtime_profile.shell_timeout_secs),
            shell_limits=ResourceLimits.of_profile(self.session.runtime_profile),
            ask_choice=ask_choice,
            send_text=send_text,
            set_plan=set_plan,
            extra={"approved": approved},
            client=self.io.client,
            tool_call_id=call_id,
            update_card=partial(self._update_card, call_id),
        )
        try:
            output = await tool.run(arguments, ctx)
        except (RefusedCall, PolicyViolation) as exc:  # refused before it did anything
            if isinstance(exc, PolicyViolation):
                self.session.metrics.tool_refused(REFUSED_BY_JAIL)
            return ToolOutput(f"Error: {exc}", ok=False, ran=False)
        except ToolError as exc:
            return ToolOutput(f"Error: {exc}", ok=False)
        except Exception as exc:  # a tool bug must not end the turn; the model sees it
            logger.exception("tool %s failed unexpectedly", tool.name)
            return ToolOutput(f"Error: {tool.name} failed: {exc}", ok=False)
        return output

    async def _announce(
        self,
        call_id: str,
        definition: ToolDefinition,
        arguments: Mapping[str, Any],
        view: CallView | None = None,
    ) -> None:
        await self.io.tool_announced(call_id, definition, arguments, view)

    async def _report(
        self,
        call_id: str,
        definition: ToolDefinition,
        output: ToolOutput,
        tool_streamed: Sequence[StreamedText | StreamedPlan] = (),
        arguments: Mapping[str, Any] | None = None,
        view: CallView | None = None,
    ) -> ChatMessage:
        """Report the call's result; returns the tool result (and its record) for the
        history."""
        text = output.text if output.text.strip() else EMPTY_OUTPUT_TEXT
        delivered: DeliveredRecord | None = None
        if output.delivered is not None:
            delivered = DeliveredRecord(
                uri=output.delivered.uri,
                filename=output.delivered.filename,
                title=output.delivered.title or output.delivered.filename,
                mime_type=output.delivered.mime_type,
                size=output.delivered.size,
            )
        await self.io.tool_finished(
            call_id,
            definition,
            output,
            shown_text=output.summary or text,
            delivered=delivered,
            arguments=arguments or {},
            view=view,
        )
        return ChatMessage(
            role="tool",
            content=text,
            tool_call_id=call_id,
            tool_name=definition.name,
            ok=output.ok,
            record=ToolRecord(
                streamed=tuple(tool_streamed),
                delivered=delivered,
                view=view,
                found=output.locations,
            ),
        )

    # -- callbacks tools may use ----------------------------------------------------

    async def _ask_choice(
        self, question: str, choices: Sequence[str], *, title: str, tool_call_id: str | None
    ) -> int | None:
        """Ask on the call's own card, under its title, as the client can answer (ask_user
        checked it can be asked)."""
        return await self.io.ask_choice(question, choices, title=title, call_id=tool_call_id)

    async def _update_card(self, call_id: str, content: Sequence[schema.ToolCallContent]) -> None:
        await self.io.tool_card(call_id, content)

    async def _send_text(self, text: str) -> None:
        self.streamed.append(text)
        await self.io.text(text)

    async def _set_plan(self, entries: Sequence[PlanStep]) -> None:
        self.plan = tuple(entries)
        self.session.plan = self.plan
        await self.io.plan_changed(self.plan)
