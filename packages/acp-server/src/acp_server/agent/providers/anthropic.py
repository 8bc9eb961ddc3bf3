"""The Anthropic Messages API provider (``[providers.models.anthropic.<alias>]``).

``POST <uri or https://api.anthropic.com>/v1/messages`` with ``stream: true``; the answer is
a stream of named events: ``message_start`` (input usage), ``content_block_start`` /
``content_block_delta`` / ``content_block_stop`` per text, ``tool_use`` or ``thinking`` block
(``text_delta``, ``input_json_delta``, ``thinking_delta``), ``message_delta`` (stop reason,
output usage), ``message_stop``, plus ``ping`` and ``error``. Text becomes ``TextDelta``,
thinking ``ThoughtDelta``; ``tool_use`` blocks are reassembled from their JSON fragments and
reported once the message is complete. A stream that ends before ``message_stop`` was cut.

History mapping: our assistant message with ``tool_calls`` becomes ``text`` + ``tool_use``
blocks; each following ``tool`` message becomes a ``tool_result`` block (``is_error`` when
the message says the tool failed, ``ChatMessage.ok``), and consecutive
results (plus any user text after them) share one ``user`` turn, as the API requires.

Extended thinking is not requested: with tools, the API then demands each earlier thinking
block back with its signature, which the conversation model does not keep. Thinking blocks
that arrive anyway (a proxy enabling it) are streamed as thoughts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import trio

from acp_server.agent.providers.base import (
    ModelRequest,
    Provider,
    ProviderError,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    UsageReported,
)
from acp_server.agent.providers.http import (
    ArgumentBuffer,
    Endpoint,
    SseCall,
    decode_event_json,
    int_field,
    join_url,
    parse_tool_arguments,
    provider_table,
    resolve_api_key,
    stream_cut_error,
)
from acp_server.agent.providers.images import anthropic_blocks
from acp_server.config import ProviderConfig
from acp_server.model import ChatMessage, ToolCall, Usage

ANTHROPIC_DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
ANTHROPIC_API_VERSION: Final = "2023-06-01"
ANTHROPIC_KEY_ENV: Final = "ANTHROPIC_API_KEY"
ANTHROPIC_DEFAULT_MODEL: Final = "claude-sonnet-4-6"
DEFAULT_ANTHROPIC_MAX_TOKENS: Final = 8192
"""``max_tokens`` is mandatory on this API; used when the config entry sets none."""


def _user_blocks_for(message: ChatMessage, *, vision: bool = False) -> list[dict[str, Any]]:
    if vision and message.role == "user":
        return anthropic_blocks(message.content) if message.content else []
    if message.role == "tool":
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id or "",
            "content": message.content,
        }
        if not message.ok:  # the tool failed (ToolOutput.ok)
            block["is_error"] = True
        return [block]
    return [{"type": "text", "text": message.content}] if message.content else []


def _assistant_blocks_for(message: ChatMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    )
    return blocks


def build_messages_body(
    request: ModelRequest, *, model: str, config: ProviderConfig
) -> dict[str, Any]:
    """The Messages API request for ``request`` (exposed for tests)."""
    system_parts = [request.system_prompt] if request.system_prompt else []
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "system":
            system_parts.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = (
            _assistant_blocks_for(message)
            if role == "assistant"
            else _user_blocks_for(message, vision=config.vision)
        )
        if not blocks:
            continue  # the API refuses empty text blocks
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": config.max_tokens or DEFAULT_ANTHROPIC_MAX_TOKENS,
        "messages": turns,
        "stream": True,
    }
    if system_parts:
        body["system"] = "\n\n".join(system_parts)
    if request.tools:
        body["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in request.tools
        ]
    if config.temperature is not None:
        body["temperature"] = config.temperature
    return body


@dataclass(slots=True)
class _ToolUseBlock:
    id: str
    name: str
    arguments: ArgumentBuffer


class _EventAssembler:
    """Folds Messages API stream events into provider events."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._tool_blocks: dict[int, _ToolUseBlock] = {}
        self.tool_calls: list[ToolCall] = []
        self.usage = Usage()
        self.saw_usage = False
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event_name: str, data: dict[str, Any]) -> list[ProviderEvent]:
        kind = data.get("type") if isinstance(data.get("type"), str) else event_name
        if kind == "error":
            raise self._stream_error(data.get("error"))
        if kind == "message_start":
            message = data.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._take_usage(usage if isinstance(usage, dict) else None)
        elif kind == "content_block_start":
            self._start_block(data)
        elif kind == "content_block_delta":
            return self._delta(data)
        elif kind == "content_block_stop":
            self._stop_block(data)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
            usage = data.get("usage")
            self._take_usage(usage if isinstance(usage, dict) else None)
        elif kind == "message_stop":
            self.stopped = True
        # ``ping`` and event types added to the API later are ignored, as Anthropic advises.
        return []

    def _take_usage(self, usage: dict[str, Any] | None) -> None:
        if usage is None:
            return
        self.saw_usage = True
        # Figures are cumulative: message_delta repeats and supersedes message_start's.
        if "input_tokens" in usage:
            self.usage.input_tokens = (
                int_field(usage, "input_tokens")
                + int_field(usage, "cache_creation_input_tokens")
                + int_field(usage, "cache_read_input_tokens")
            )
        if "output_tokens" in usage:
            self.usage.output_tokens = int_field(usage, "output_tokens")

    def _start_block(self, data: dict[str, Any]) -> None:
        block = data.get("content_block")
        index = data.get("index")
        if not isinstance(block, dict) or not isinstance(index, int):
            return
        if block.get("type") == "tool_use":
            arguments = ArgumentBuffer(self._endpoint)
            self._tool_blocks[index] = _ToolUseBlock(
                id=str(block.get("id") or ""),
                name=str(block.get("name") or ""),
                arguments=arguments,
            )

    def _delta(self, data: dict[str, Any]) -> list[ProviderEvent]:
        delta = data.get("delta")
        if not isinstance(delta, dict):
            return []
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str) and delta["text"]:
            return [TextDelta(delta["text"])]
        if (
            kind == "thinking_delta"
            and isinstance(delta.get("thinking"), str)
            and delta["thinking"]
        ):
            return [ThoughtDelta(delta["thinking"])]
        if kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            block = self._tool_blocks.get(data.get("index", -1))
            if block is not None:
                block.arguments.add(delta["partial_json"])
        # signature_delta and citations_delta carry nothing we show.
        return []

    def _stop_block(self, data: dict[str, Any]) -> None:
        block = self._tool_blocks.pop(data.get("index", -1), None)
        if block is None:
            return
        if not block.name:
            raise ProviderError(
                f"{self._endpoint.label} sent a tool_use block without a name; the response "
                "was abandoned. Try again."
            )
        self.tool_calls.append(
            ToolCall(
                id=block.id,
                name=block.name,
                arguments=parse_tool_arguments(block.arguments.text(), block.name, self._endpoint),
            )
        )

    def _stream_error(self, error: object) -> ProviderError:
        if isinstance(error, dict):
            kind = error.get("type") or "error"
            message = error.get("message") or "no details"
        else:
            kind, message = "error", error
        hint = (
            " The service is overloaded; try again in a moment."
            if kind == "overloaded_error"
            else " Try again."
        )
        return ProviderError(
            f"{self._endpoint.label} reported an error mid-response ({kind}): {message}.{hint}"
        )


class AnthropicProvider:
    """A ``Provider`` speaking the Anthropic Messages streaming API."""

    def __init__(self, config: ProviderConfig) -> None:
        self._config = config

    @property
    def model(self) -> str:
        return self._config.model or ANTHROPIC_DEFAULT_MODEL

    def _endpoint(self) -> Endpoint:
        base = self._config.uri or ANTHROPIC_DEFAULT_BASE_URL
        base = base.rstrip("/")
        path = "/messages" if base.endswith("/v1") else "/v1/messages"
        return Endpoint(
            label="Anthropic",
            url=join_url(base, path),
            config_table=provider_table(self._config.type, self._config.alias),
            key_env=ANTHROPIC_KEY_ENV,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        endpoint = self._endpoint()
        api_key = resolve_api_key(
            self._config.api_key, ANTHROPIC_KEY_ENV, required=True, endpoint=endpoint
        )
        assert api_key is not None  # required=True raises instead of returning None
        build = partial(build_messages_body, request, model=self.model, config=self._config)
        # With vision, building reads the prompt's images from uploads/: a worker thread.
        body = await trio.to_thread.run_sync(build) if self._config.vision else build()
        call = SseCall(
            endpoint=endpoint,
            pool=f"provider {self._config.ref}",
            headers={
                "Content-Type": "application/json",
                "x-api-key": api_key,
                "anthropic-version": ANTHROPIC_API_VERSION,
            },
            body=body,
            timeout_secs=self._config.timeout_secs,
            api_key=api_key,
        )
        assembler = _EventAssembler(endpoint)
        from acp_server.agent.providers.sse import open_sse  # httpx: on the first call only

        async with open_sse(call) as events:
            async for event in events:
                if not event.data.strip():
                    continue
                for provider_event in assembler.feed(
                    event.event, decode_event_json(event, endpoint)
                ):
                    yield provider_event
                if assembler.stopped:
                    break
        if not assembler.stopped:
            raise stream_cut_error(endpoint)
        for call_request in assembler.tool_calls:
            yield ToolCallRequested(call_request)
        if assembler.saw_usage:
            yield UsageReported(assembler.usage)
        yield StreamEnd(stop_reason=assembler.stop_reason or "end_turn")


def _create(config: ProviderConfig) -> Provider:
    return AnthropicProvider(config)


PROVIDER_TYPES: Final[dict[str, Callable[[ProviderConfig], Provider]]] = {"anthropic": _create}
"""Provider type → constructor, for ``acp_server.agent.providers.create_provider``."""
