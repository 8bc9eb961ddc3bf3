"""The model-provider contract.

A provider turns a ``ModelRequest`` into a stream of ``ProviderEvent``s. Text and
reasoning arrive as deltas; tool calls arrive whole (providers reassemble streamed
fragments themselves); the stream ends with ``StreamEnd``. Cancelling the consuming
task must abort the underlying HTTP stream at once (trio cancellation does this when the
provider awaits inside ``async with`` blocks of its HTTP client).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

import msgspec

from acp_server.errors import ZeroclawError
from acp_server.model import ChatMessage, ToolCall, Usage


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it: name, description and a JSON Schema for arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = msgspec.field(default_factory=lambda: {"type": "object"})


class ModelRequest(msgspec.Struct, frozen=True):
    system_prompt: str | None
    messages: Sequence[ChatMessage]
    tools: Sequence[ToolSpec] = ()


class TextDelta(msgspec.Struct, frozen=True):
    text: str


class ThoughtDelta(msgspec.Struct, frozen=True):
    text: str


class ToolCallRequested(msgspec.Struct, frozen=True):
    call: ToolCall


class UsageReported(msgspec.Struct, frozen=True):
    usage: Usage
    cost_usd: float | None = None  # what the call cost, when the provider says (OpenRouter)


class StreamEnd(msgspec.Struct, frozen=True):
    """The model finished its response. ``stop_reason`` is the provider's own word."""

    stop_reason: str = "end_turn"


ProviderEvent = TextDelta | ThoughtDelta | ToolCallRequested | UsageReported | StreamEnd


class ProviderError(ZeroclawError):
    """A model call failed. ``str(error)`` is a message a person can act on (no secrets)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Provider(Protocol):
    """One configured model endpoint (``[providers.models.<type>.<alias>]``)."""

    @property
    def model(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one model response. Raises ``ProviderError`` on failure."""
        ...
