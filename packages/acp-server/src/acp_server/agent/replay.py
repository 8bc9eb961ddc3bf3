"""Stored conversation → the ``session/update`` stream a client saw live.

Pure, except for the optional ``embed`` callback that re-reads delivered files.

Seed, "session/load": the client "receives the same update stream it would have seen had the
session never ended". So each stored message maps onto the updates its live turn produced,
in the original order (research/zeroclaw.md §3.4, §2.1):

* user message → ``user_message_chunk`` (the only update that exists just for replay: live,
  the client sent that text itself);
* assistant reasoning → ``agent_thought_chunk``, then its text → ``agent_message_chunk``
  (live, thinking streams before the answer); empty text or reasoning sends nothing;
* each tool call → ``tool_call`` with status ``completed`` (the call already ran), carrying
  the live announcement's title, kind, ``rawInput`` (the model's arguments; file_edit /
  file_write in ACP diff field names) and diff content, right before its result;
* what the tool streamed while it ran, rebuilt from its arguments: a successful
  ``todo_write``'s ``plan`` (the store keeps only the latest plan, and every earlier one is
  in the call that set it) and a shown ``escalate_to_human``'s ``agent_message_chunk``;
* each tool result → ``tool_call_update`` ``completed`` with the stored output as
  ``rawOutput``, ``body`` and one text content block, plus ``name``/``title``/``kind`` like
  the live update when the tool's name is known; a delivered file gets its chat title and
  its embedded blob again, re-read and re-hashed from ``uploads/`` (``failed`` when that
  copy is gone or changed, as live when it could not be embedded);
* system messages → nothing.

Live text arrives in many small chunks; replay sends one chunk per message. Clients append
chunks, so the rendered conversation is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from acp_core import schema
from acp_core.tools import tool_kind
from acp_server.agent.conversation import ChatMessage, PlanEntry, ToolCall
from acp_server.agent.permissions import diff_content, edit_raw_input
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.deliver import delivery_mime, delivery_title, parse_delivery_text
from acp_server.agent.tools.interaction import ESCALATION_SHOWN_PREFIX, escalation_message

PLAN_TOOL: Final = "todo_write"
ESCALATION_TOOL: Final = "escalate_to_human"
DELIVER_TOOL: Final = "deliver_file"
DEFAULT_MAX_REPLAY_EMBED_BYTES: Final = 64 * 1024 * 1024
"""Delivered bytes one replay embeds again at most: a long history of deliveries must not
make one ``session/load`` hold hundreds of MiB. Later deliveries replay as text and title."""
PLAN_TOOL_SUCCESS_PREFIX: Final = "Plan updated:"
"""How a todo_write result starts when the tool set the plan (tools/interaction.py)."""

_PLAN_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
_PLAN_PRIORITIES: Final = frozenset({"high", "medium", "low"})


EmbedDelivery: TypeAlias = Callable[[str, str], "schema.EmbeddedResource | None"]
"""``(uri, mime_type)`` → the delivered file's embedded resource, or None when its uploads
copy is gone or changed (``runtime.embed_delivered_file`` bound to the session's uploads
directory). Blocking I/O: callers run ``history_updates`` in a thread when they pass one."""


def history_updates(
    messages: Sequence[ChatMessage],
    *,
    embed: EmbedDelivery | None = None,
    max_embed_bytes: int = DEFAULT_MAX_REPLAY_EMBED_BYTES,
) -> list[schema.SessionUpdate]:
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

    Live, each call is announced right before it runs and reported right after, so a
    call's ``tool_call`` is replayed just before its result's ``tool_call_update``, with
    what the tool streamed in between (a plan, an escalation's text). A call without a
    stored result is announced where its round ends.
    """
    updates: list[schema.SessionUpdate] = []
    pending: dict[str, ToolCall] = {}  # this round's calls not yet announced, in order
    budget = _EmbedBudget(embed, max_embed_bytes)

    def announce_pending() -> None:
        updates.extend(tool_call_started(call) for call in pending.values())
        pending.clear()

    for message in messages:
        if message.role == "tool":
            if message.tool_call_id is None:
                continue
            call = pending.pop(message.tool_call_id, None)
            if call is not None:
                updates.append(tool_call_started(call))
                updates.extend(_streamed_during(call, message))
            updates.append(tool_call_finished(message, call, embed=budget))
            continue
        announce_pending()
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
            pending.update((call.id, call) for call in message.tool_calls)
    announce_pending()
    return updates


def _streamed_during(call: ToolCall, result: ChatMessage) -> list[schema.SessionUpdate]:
    """What a successful call streamed live between its announcement and its result,
    rebuilt from its arguments (the tool derived it from them alone)."""
    if call.name == PLAN_TOOL and result.content.startswith(PLAN_TOOL_SUCCESS_PREFIX):
        plan = plan_from_todos(call.arguments)
        return [] if plan is None else [plan_update(plan)]
    if call.name == ESCALATION_TOOL and result.content.startswith(ESCALATION_SHOWN_PREFIX):
        try:
            text = escalation_message(call.arguments)
        except ToolError:
            return []
        return [schema.AgentMessageChunk(content=schema.text_block(text))]
    return []


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


class _EmbedBudget:
    """``embed`` until ``max_bytes`` delivered bytes have been embedded; then nothing."""

    def __init__(self, embed: EmbedDelivery | None, max_bytes: int) -> None:
        self._embed = embed
        self._left = max_bytes

    def embeds(self, size: int) -> bool:
        return self._embed is not None and size <= self._left

    def __call__(self, uri: str, mime_type: str, size: int) -> schema.EmbeddedResource | None:
        assert self._embed is not None
        self._left -= size
        return self._embed(uri, mime_type)


def tool_call_finished(
    result: ChatMessage, call: ToolCall | None = None, *, embed: _EmbedBudget | None = None
) -> schema.ToolCallUpdate:
    """The replayed completion of a call: its stored output (a ``tool`` message).

    A successful deliver_file result gets its live title and, when ``embed`` finds its
    uploads copy unchanged, the embedded file; a copy that is gone or changed gives
    ``failed``, as it did live when the file could not be embedded.
    """
    name = result.tool_name
    status: schema.ToolCallStatus = "completed"
    title = name
    content: list[schema.ToolCallContent] = [schema.text_tool_content(result.content)]
    delivered = parse_delivery_text(result.content) if name == DELIVER_TOOL else None
    if delivered is not None and call is not None:
        filename, size, uri = delivered
        try:
            title = delivery_title(call.arguments, filename)
            mime_type = delivery_mime(call.arguments, filename)
        except ToolError:
            mime_type = None
        if embed is not None and mime_type is not None and embed.embeds(size):
            resource = embed(uri, mime_type, size)
            if resource is None:
                status = "failed"
            else:
                content.append(schema.ToolCallContentBlock(content=resource))
    return schema.ToolCallUpdate(
        tool_call_id=result.tool_call_id or "",
        status=status,
        raw_output=result.content,
        name=name,
        title=title,
        kind=tool_kind(name) if name else None,
        body=result.content,
        content=content,
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
