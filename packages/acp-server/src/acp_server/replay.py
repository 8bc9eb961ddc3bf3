"""Stored conversation → the ``session/update`` stream a client saw live (pure, no I/O).

Seed, "session/load": the client "receives the same update stream it would have seen had the
session never ended". So each stored message maps onto the updates its live turn produced,
in the original order (research/zeroclaw.md §3.4, §2.1):

* user message → ``user_message_chunk`` (the only update that exists just for replay: live,
  the client sent that text itself);
* assistant reasoning → ``agent_thought_chunk``, then its text → ``agent_message_chunk``
  (live, thinking streams before the answer); empty text or reasoning sends nothing;
* each tool call → ``tool_call`` with status ``completed`` (the call already ran), carrying
  the live announcement's title, kind, ``rawInput`` (file_edit / file_write in ACP diff
  field names) and diff content;
* each tool result → ``tool_call_update`` ``completed`` with the stored output as
  ``rawOutput``, ``body`` and one text content block, plus ``name``/``title``/``kind`` like
  the live update when the tool's name is known;
* a successful ``todo_write`` call → the ``plan`` update it produced live, between its
  ``tool_call`` and ``tool_call_update`` (rebuilt from the call's ``todos``: the store keeps
  only the latest plan, and every earlier one is in the call that set it);
* system messages → nothing.

Live text arrives in many small chunks; replay sends one chunk per message. Clients append
chunks, so the rendered conversation is the same.

Not reproducible from the history: a deliver_file update's embedded blob and custom title,
and a ``failed`` status (the blob could not be embedded); replay reports the stored text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from acp_core import schema
from acp_core.tools import tool_kind
from acp_server.conversation import ChatMessage, PlanEntry, ToolCall
from acp_server.permissions import diff_content, edit_raw_input

PLAN_TOOL: Final = "todo_write"
PLAN_TOOL_SUCCESS_PREFIX: Final = "Plan updated:"
"""How a todo_write result starts when the tool set the plan (tools/interaction.py)."""

_PLAN_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
_PLAN_PRIORITIES: Final = frozenset({"high", "medium", "low"})


def history_updates(messages: Sequence[ChatMessage]) -> list[schema.SessionUpdate]:
    """The ``update`` objects that replay ``messages``, in order.

    The caller wraps each one as ``session/update`` params for the restored session::

        stored = await store.load_session(session_id)
        for update in history_updates(stored.messages):
            await send_update(update)  # {"sessionId": session_id, "update": update}

    For example ``[ChatMessage("user", "hi"), ChatMessage("assistant", "hello")]`` gives
    ``[UserMessageChunk(content=TextContent(text="hi")),
    AgentMessageChunk(content=TextContent(text="hello"))]``, which encode as
    ``{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}`` and
    ``{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hello"}}``.
    """
    updates: list[schema.SessionUpdate] = []
    plan_calls: dict[str, ToolCall] = {}
    for message in messages:
        if message.role == "user":
            if message.content:
                updates.append(schema.UserMessageChunk(content=schema.text_block(message.content)))
        elif message.role == "assistant":
            if message.reasoning:
                updates.append(
                    schema.AgentThoughtChunk(content=schema.text_block(message.reasoning))
                )
            if message.content:
                updates.append(schema.AgentMessageChunk(content=schema.text_block(message.content)))
            for call in message.tool_calls:
                updates.append(tool_call_started(call))
                if call.name == PLAN_TOOL:
                    plan_calls[call.id] = call
        elif message.role == "tool" and message.tool_call_id is not None:
            plan_call = plan_calls.pop(message.tool_call_id, None)
            if plan_call is not None and message.content.startswith(PLAN_TOOL_SUCCESS_PREFIX):
                plan = plan_from_todos(plan_call.arguments)
                if plan is not None:
                    updates.append(plan_update(plan))
            updates.append(tool_call_finished(message))
    return updates


def tool_call_started(call: ToolCall) -> schema.ToolCallStart:
    """The replayed announcement of a call that has already run."""
    raw_input = edit_raw_input(call.name, call.arguments)
    return schema.ToolCallStart(
        tool_call_id=call.id,
        title=call.name,
        kind=tool_kind(call.name),
        status="completed",
        raw_input=raw_input if raw_input is not None else dict(call.arguments),
        name=call.name,
        content=diff_content(call.name, call.arguments),
    )


def tool_call_finished(result: ChatMessage) -> schema.ToolCallUpdate:
    """The replayed completion of a call: its stored output (a ``tool`` message)."""
    name = result.tool_name
    return schema.ToolCallUpdate(
        tool_call_id=result.tool_call_id or "",
        status="completed",
        raw_output=result.content,
        name=name,
        title=name,
        kind=tool_kind(name) if name else None,
        body=result.content,
        content=[schema.text_tool_content(result.content)],
    )


def plan_from_todos(arguments: Mapping[str, Any]) -> tuple[PlanEntry, ...] | None:
    """The plan a successful ``todo_write`` call set, or None if its arguments do not say.

    The tool validated these arguments when it ran, so this only reads them back the way
    it did: content trimmed, status ``pending`` and priority ``medium`` by default.
    """
    todos = arguments.get("todos")
    if not isinstance(todos, list):
        return None
    entries: list[PlanEntry] = []
    for item in todos:
        if not isinstance(item, dict):
            return None
        content, status = item.get("content"), item.get("status", "pending")
        priority, active_form = item.get("priority", "medium"), item.get("activeForm")
        if (
            not isinstance(content, str)
            or status not in _PLAN_STATUSES
            or priority not in _PLAN_PRIORITIES
            or not (active_form is None or isinstance(active_form, str))
        ):
            return None
        entries.append(
            PlanEntry(
                content=content.strip(),
                status=status,
                priority=priority,
                active_form=active_form or None,
            )
        )
    return tuple(entries)


def plan_update(plan: Sequence[PlanEntry]) -> schema.PlanUpdate:
    """The ``plan`` update for a stored plan (``session/resume`` sends only this)."""
    return schema.PlanUpdate(
        entries=[
            schema.PlanEntry(
                content=entry.content,
                status=entry.status,
                priority=entry.priority,
                active_form=entry.active_form,
            )
            for entry in plan
        ]
    )
