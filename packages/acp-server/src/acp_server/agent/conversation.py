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
class ChatMessage:
    role: Role
    content: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": the call this result answers
    tool_name: str | None = None  # role == "tool": the tool that produced it


@dataclass(frozen=True, slots=True)
class PlanEntry:
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"
    active_form: str | None = None


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
    plan: tuple[PlanEntry, ...] | None = None
    usage: Usage = field(default_factory=Usage)
