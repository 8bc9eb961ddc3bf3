"""Stored conversation → the ``session/update`` stream a client saw live.

Pure, except for the optional ``embed`` callback that re-reads delivered files.

The ZeroClaw ACP documentation, "session/load": the client "receives the same update stream it would have seen had the
session never ended". So each stored message maps onto the updates its live turn produced,
in the original order (as ZeroClaw's implementation does), built by the same functions the
live turn uses (``protocol/presentation/tool_updates.py``):

* user message → ``user_message_chunk`` (the only update that exists just for replay: live,
  the client sent that text itself);
* assistant reasoning → ``agent_thought_chunk``, then its text → ``agent_message_chunk``
  (live, thinking streams before the answer); empty text or reasoning sends nothing;
* each tool call → ``tool_call`` with status ``completed`` (the call already ran), as its
  tool's definition presents it, right before its result;
* what the tool streamed while it ran (a ``todo_write`` plan, an ``escalate_to_human``
  text), from the result's ``ToolRecord``;
* each tool result → ``tool_call_update`` ``completed`` with the stored output as
  ``rawOutput``, ``body`` and one text content block, the diffs and locations the record
  kept; a delivered file (the record's ``delivered``) gets its one-line summary, its chat
  title and its embedded blob again, re-read and re-hashed
  from ``uploads/`` (``failed`` when that copy is gone or changed, as live when it could
  not be embedded);
* system messages → nothing.

Results stored before the store kept records (schema < 3) have ``record`` None; only for
those does the tool's ``ToolDefinition.legacy_record`` rebuild the record from the result
text and the call's arguments. Every newer result carries its record, and replay never
reads its text.

Live text arrives in many small chunks; replay sends one chunk per message. Clients append
chunks, so the rendered conversation is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

from acp_core import schema
from acp_server.agent.tools.base import ToolDefinition
from acp_server.agent.tools.deliver import delivery_summary
from acp_server.agent.tools.registry import definition_for
from acp_server.model import ChatMessage, ToolCall, ToolRecord
from acp_server.protocol.presentation.tool_updates import (
    completed_diff,
    plan_update,
    streamed_update,
    tool_call_finished,
    tool_call_started,
)

__all__ = ["DEFAULT_MAX_REPLAY_EMBED_BYTES", "EmbedDelivery", "history_updates", "plan_update"]

DEFAULT_MAX_REPLAY_EMBED_BYTES: Final = 64 * 1024 * 1024
"""Delivered bytes one replay embeds again at most: a long history of deliveries must not
make one ``session/load`` hold hundreds of MiB. Later deliveries replay as text and title."""


EmbedDelivery: TypeAlias = Callable[[str, str], "schema.EmbeddedResource | None"]
"""``(uri, mime_type)`` → the delivered file's embedded resource, or None when its uploads
copy is gone or changed (``protocol/presentation/delivered.py: embed_delivered_file`` bound to the session's uploads
directory). Blocking I/O: callers run ``history_updates`` in a thread when they pass one."""


def history_updates(
    messages: Sequence[ChatMessage],
    *,
    embed: EmbedDelivery | None = None,
    max_embed_bytes: int = DEFAULT_MAX_REPLAY_EMBED_BYTES,
    definitions: Callable[[str], ToolDefinition] = definition_for,
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
    stored result is announced where its round ends. ``definitions`` names each tool's
    definition (the session's own, so a skill's tool is titled by its command as it was
    live; the built-ins' by default).
    """
    updates: list[schema.SessionUpdate] = []
    pending: dict[str, ToolCall] = {}  # this round's calls not yet announced, in order
    budget = _EmbedBudget(embed, max_embed_bytes)

    def announce_pending() -> None:
        updates.extend(_started(call, definitions) for call in pending.values())
        pending.clear()

    for message in messages:
        if message.role == "tool":
            if message.tool_call_id is None:
                continue
            call = pending.pop(message.tool_call_id, None)
            record = _record_of(message, call)
            if call is not None:
                updates.append(_started(call, definitions, record))
                if record is not None:
                    updates.extend(streamed_update(item) for item in record.streamed)
            updates.append(_finished(message, record, budget, call, definitions))
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


def _started(
    call: ToolCall, definitions: Callable[[str], ToolDefinition], record: ToolRecord | None = None
) -> schema.ToolCallStart:
    """The replayed announcement of a call that has already run, with the diffs and
    locations its live card showed (its record's view)."""
    view = record.view if record is not None else None
    return tool_call_started(
        call.id, definitions(call.name), call.arguments, status="completed", view=view
    )


def _record_of(result: ChatMessage, call: ToolCall | None) -> ToolRecord | None:
    """The result's stored record; for a result stored without one, the record its tool
    rebuilds from the text (needs the call's arguments)."""
    if result.record is not None:
        return result.record
    if call is None or result.tool_name is None:
        return None
    legacy = definition_for(result.tool_name).legacy_record
    return None if legacy is None else legacy(call.arguments, result.content)


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


def _finished(
    result: ChatMessage,
    record: ToolRecord | None,
    embed: _EmbedBudget,
    call: ToolCall | None,
    definitions: Callable[[str], ToolDefinition],
) -> schema.ToolCallUpdate:
    """The replayed completion of a call: its stored output (a ``tool`` message).

    A delivered file gets its live title and, when ``embed`` finds its uploads copy
    unchanged, the embedded file; a copy that is gone or changed gives ``failed``, as it
    did live when the file could not be embedded.
    """
    name = result.tool_name
    definition = definitions(name) if name else None
    delivered = record.delivered if record is not None else None
    # The card's title as its replayed tool_call gave it; a result whose call is gone
    # names its tool, so the card it opens still has a title.
    title: str | None = None
    if definition is not None:
        title = definition.title_of(call.arguments) if call is not None else definition.name
    resource: schema.EmbeddedResource | None = None
    failed = not result.ok
    text = result.content
    if delivered is not None:
        title = delivered.title
        text = delivery_summary(delivered.filename, delivered.size)
        if embed.embeds(delivered.size):
            resource = embed(delivered.uri, delivered.mime_type, delivered.size)
            failed = failed or resource is None
    view = record.view if record is not None else None
    return tool_call_finished(
        result.tool_call_id or "",
        definition,
        text,
        title=title,
        resource=resource,
        failed=failed,
        diff=None
        if call is None
        else completed_diff(definition, call.arguments, ok=result.ok, view=view),
        locations=record.found if record is not None else (),
    )
