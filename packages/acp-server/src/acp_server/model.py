"""The conversation model shared by the agent runtime, the providers and the store.

A session's history is a list of ``ChatMessage``. A model turn that calls tools is one
``assistant`` message with ``tool_calls`` followed by one ``tool`` message per result
(``tool_call_id`` links them), as both the OpenAI and Anthropic wire formats expect.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, overload

import msgspec

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(msgspec.Struct, frozen=True):
    """A tool invocation requested by the model. ``arguments`` is the decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]


class PlanStep(msgspec.Struct, frozen=True):
    """One step of the agent's plan as the session keeps and stores it (todo_write); sent
    to the client as an ACP ``PlanEntry`` (acp_server/protocol/presentation/tool_updates.py)."""

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"
    active_form: str | None = None


class StreamedText(msgspec.Struct, frozen=True):
    """Chat text a tool streamed while it ran (escalate_to_human's message)."""

    text: str


class StreamedPlan(msgspec.Struct, frozen=True):
    """A plan a tool set while it ran (todo_write)."""

    entries: tuple[PlanStep, ...]


class DeliveredRecord(msgspec.Struct, frozen=True):
    """A file a tool handed to the client (deliver_file): what its live
    ``tool_call_update`` showed, so ``session/load`` can show it again."""

    uri: str  # attachment://deliver/<sha256>.<ext>
    filename: str
    title: str
    mime_type: str
    size: int


class FileLocation(msgspec.Struct, frozen=True):
    """A file a tool call reads or changes: an absolute path and, where known, the 1-based
    line (ACP ``ToolCallLocation``, which editors use to follow the agent)."""

    path: str
    line: int | None = None


class FileDiff(msgspec.Struct, frozen=True):
    """A change a tool call makes, as its card shows it (ACP ``diff`` content): an absolute
    path, the text before (None for a new file) and after."""

    path: str
    old_text: str | None
    new_text: str


class CallView(msgspec.Struct, frozen=True):
    """What a call's card shows beyond its arguments, worked out before it runs from the
    files it names (``agent/call_view.py``): its diffs and locations. ``refusal`` is the
    model-facing error of a call that cannot succeed (a file_edit whose old_string does
    not match exactly once): it fails before anyone is asked to approve it."""

    diffs: tuple[FileDiff, ...] = ()
    locations: tuple[FileLocation, ...] = ()
    refusal: str | None = None


class ToolRecord(msgspec.Struct, frozen=True):
    """What one tool call did besides its result text, in the order the client saw it.

    ``streamed`` is what reached the client between the call's ``tool_call`` and its
    ``tool_call_update``; ``delivered`` is the file its update embedded; ``view`` the
    diffs and locations its cards showed (None on records stored before they were kept);
    ``found`` the locations its result pointed at (a search's matches). Stored with the
    result, so replay never has to read the result text or the files to rebuild them.
    """

    streamed: tuple[StreamedText | StreamedPlan, ...] = ()
    delivered: DeliveredRecord | None = None
    view: CallView | None = None
    found: tuple[FileLocation, ...] = ()


class ChatMessage(msgspec.Struct, frozen=True):
    role: Role
    content: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": the call this result answers
    tool_name: str | None = None  # role == "tool": the tool that produced it
    ok: bool = True
    """role == "tool": whether the tool succeeded (``ToolOutput.ok``); providers with an
    error flag on tool results (Anthropic's ``is_error``) send it."""
    record: ToolRecord | None = None
    """role == "tool": the call's structured record; None on results stored before the
    session store kept records (schema < 3), which replay rebuilds from their text."""


class Usage(msgspec.Struct):
    """Token figures a provider reported. ``reasoning_tokens`` is a breakdown of
    ``output_tokens`` (OpenAI's ``completion_tokens_details``; Anthropic counts thinking in
    ``output_tokens`` too), not an addition to it."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens


class CompletedTurn(msgspec.Struct, frozen=True):
    """What one successful prompt turn adds to the history (persisted atomically)."""

    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanStep, ...] | None = None
    usage: Usage = msgspec.field(default_factory=Usage)


class ChainedMessages(Sequence[ChatMessage]):
    """A snapshot of the stored history followed by this turn's messages.

    A long session holds thousands of messages; a model round must not copy them all just
    to append the few of the current turn. The history only ever grows at its end, so
    remembering its length now keeps this a stable snapshot; the turn's few messages are
    copied.
    """

    __slots__ = ("_head", "_head_len", "_tail")

    def __init__(self, head: Sequence[ChatMessage], tail: Sequence[ChatMessage]) -> None:
        self._head = head
        self._head_len = len(head)
        self._tail = tuple(tail)

    def __len__(self) -> int:
        return self._head_len + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> ChatMessage: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ChatMessage]: ...

    def __getitem__(self, index: int | slice) -> ChatMessage | Sequence[ChatMessage]:
        if isinstance(index, slice):
            return list(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        head = self._head_len
        return self._head[index] if index < head else self._tail[index - head]

    def __iter__(self) -> Iterator[ChatMessage]:
        head = self._head
        for index in range(self._head_len):
            yield head[index]
        yield from self._tail

    def __reversed__(self) -> Iterator[ChatMessage]:
        yield from reversed(self._tail)
        head = self._head
        for index in range(self._head_len - 1, -1, -1):
            yield head[index]
