"""The conversation model shared by the agent runtime, the providers and the store.

A session's history is a list of ``ChatMessage``. A model turn that calls tools is one
``assistant`` message with ``tool_calls`` followed by one ``tool`` message per result
(``tool_call_id`` links them), as both the OpenAI and Anthropic wire formats expect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool invocation requested by the model. ``arguments`` is the decoded JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of the agent's plan as the session keeps and stores it (todo_write); sent
    to the client as an ACP ``PlanEntry`` (acp_server/agent/tool_updates.py)."""

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"
    active_form: str | None = None


@dataclass(frozen=True, slots=True)
class StreamedText:
    """Chat text a tool streamed while it ran (escalate_to_human's message)."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamedPlan:
    """A plan a tool set while it ran (todo_write)."""

    entries: tuple[PlanStep, ...]


@dataclass(frozen=True, slots=True)
class DeliveredRecord:
    """A file a tool handed to the client (deliver_file): what its live
    ``tool_call_update`` showed, so ``session/load`` can show it again."""

    uri: str  # attachment://deliver/<sha256>.<ext>
    filename: str
    title: str
    mime_type: str
    size: int


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """What one tool call did besides its result text, in the order the client saw it.

    ``streamed`` is what reached the client between the call's ``tool_call`` and its
    ``tool_call_update``; ``delivered`` is the file its update embedded. Stored with the
    result, so replay never has to read the result text to rebuild them.
    """

    streamed: tuple[StreamedText | StreamedPlan, ...] = ()
    delivered: DeliveredRecord | None = None


@dataclass(frozen=True, slots=True)
class ChatMessage:
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


@dataclass(slots=True)
class Usage:
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


@dataclass(frozen=True, slots=True)
class CompletedTurn:
    """What one successful prompt turn adds to the history (persisted atomically)."""

    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanStep, ...] | None = None
    usage: Usage = field(default_factory=Usage)
