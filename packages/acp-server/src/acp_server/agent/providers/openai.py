"""Chat Completions providers: OpenAI, OpenRouter and OpenAI-compatible local servers.

One wire format (``POST <base>/chat/completions`` with ``stream: true``, answered with
server-sent events of ``chat.completion.chunk`` objects and a final ``data: [DONE]``)
serves several ``[providers.models.<type>.<alias>]`` types:

============================  ===================================  ==================
type                          default ``uri``                      key
============================  ===================================  ==================
``openai``                    https://api.openai.com/v1            ``OPENAI_API_KEY``
``openrouter``                https://openrouter.ai/api/v1         ``OPENROUTER_API_KEY``
``openai_compatible``         none: set ``uri``                    ``api_key``, optional
``ollama``                    http://localhost:11434/v1            optional
``vllm``                      http://localhost:8000/v1             optional
``llamacpp`` (llama-server)   http://localhost:8080/v1             optional
``lmstudio``                  http://localhost:1234/v1             optional
============================  ===================================  ==================

The local-server types are ``openai_compatible`` with the server's usual address; ``uri``
overrides any of them. Keyless types never fall back to ``OPENAI_API_KEY``: that would
send an OpenAI key to whatever server ``uri`` names.

Streaming details handled here: tool calls arrive in fragments keyed by ``index`` (id and
name first, then pieces of the JSON arguments) and are reassembled before being reported;
reasoning arrives as ``delta.reasoning`` (OpenRouter) or ``delta.reasoning_content``
(DeepSeek, vLLM, llama.cpp) and becomes ``ThoughtDelta``; usage comes in a last chunk
because we ask for ``stream_options.include_usage``; an ``error`` object inside the stream
(OpenRouter does this mid-response) ends the call with its message.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any, Final

import msgspec
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
    ToolSpec,
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
from acp_server.agent.providers.images import openai_content
from acp_server.config import ProviderConfig
from acp_server.model import ChatMessage, ToolCall, Usage

CHAT_COMPLETIONS_PATH: Final = "/chat/completions"
DONE_SENTINEL: Final = "[DONE]"
OPENROUTER_APP_TITLE: Final = "ZeroClaw"


class Flavor(msgspec.Struct, frozen=True):
    """How one provider type differs from the others on the same wire format."""

    label: str
    default_base_url: str | None
    key_env: str | None
    key_required: bool
    default_model: str | None = None
    # OpenAI's reasoning models refuse the older ``max_tokens``; most other servers only know it.
    max_tokens_field: str = "max_tokens"


FLAVORS: Final[dict[str, Flavor]] = {
    "openai": Flavor(
        "OpenAI",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        key_required=True,
        default_model="gpt-4.1",
        max_tokens_field="max_completion_tokens",
    ),
    "openrouter": Flavor(
        "OpenRouter",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        key_required=True,
        # The ZeroClaw ACP documentation's default model id is an OpenRouter id.
        default_model="anthropic/claude-sonnet-4.6",
    ),
    "openai_compatible": Flavor("OpenAI-compatible server", None, None, key_required=False),
    "ollama": Flavor("Ollama", "http://localhost:11434/v1", None, key_required=False),
    "vllm": Flavor("vLLM", "http://localhost:8000/v1", None, key_required=False),
    "llamacpp": Flavor("llama.cpp", "http://localhost:8080/v1", None, key_required=False),
    "lmstudio": Flavor("LM Studio", "http://localhost:1234/v1", None, key_required=False),
}


def _tool_payload(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def _message_payload(message: ChatMessage, *, vision: bool = False) -> dict[str, Any]:
    if vision and message.role == "user":
        return {"role": "user", "content": openai_content(message.content)}
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    if message.role == "assistant" and message.tool_calls:
        # Reasoning is not sent back: DeepSeek rejects it, others ignore it.
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def build_chat_body(
    request: ModelRequest, *, model: str, config: ProviderConfig, flavor: Flavor
) -> dict[str, Any]:
    """The Chat Completions request for ``request`` (exposed for tests)."""
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    vision = config.vision
    messages.extend(_message_payload(message, vision=vision) for message in request.messages)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [_tool_payload(tool) for tool in request.tools]
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.max_tokens is not None:
        body[flavor.max_tokens_field] = config.max_tokens
    return body


class _PendingToolCall(msgspec.Struct):
    id: str
    name: str
    arguments: ArgumentBuffer


class _ChunkAssembler:
    """Folds ``chat.completion.chunk`` objects into provider events."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._tool_calls: dict[int, _PendingToolCall] = {}
        self.usage: Usage | None = None
        self.cost_usd: float | None = None
        self.finish_reason: str | None = None

    def feed(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        error = chunk.get("error")
        if error is not None:
            raise self._stream_error(error)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("completion_tokens_details")
            self.usage = Usage(
                input_tokens=int_field(usage, "prompt_tokens"),
                output_tokens=int_field(usage, "completion_tokens"),
                reasoning_tokens=int_field(
                    details if isinstance(details, dict) else None, "reasoning_tokens"
                ),
            )
            cost = usage.get("cost")  # OpenRouter: the call's price in USD
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.cost_usd = float(cost)
        events: list[ProviderEvent] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return events
        for choice in choices:
            # We never ask for n > 1; other choices would be alternatives, not continuations.
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                events.extend(self._feed_delta(delta))
            finish_reason = choice.get("finish_reason")
            if isinstance(finish_reason, str) and finish_reason:
                self.finish_reason = finish_reason
        return events

    def _feed_delta(self, delta: dict[str, Any]) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        for field in ("reasoning", "reasoning_content"):
            thought = delta.get(field)
            if isinstance(thought, str) and thought:
                events.append(ThoughtDelta(thought))
        content = delta.get("content")
        if isinstance(content, str) and content:
            events.append(TextDelta(content))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for position, fragment in enumerate(tool_calls):
                if isinstance(fragment, dict):
                    self._feed_tool_fragment(position, fragment)
        return events

    def _feed_tool_fragment(self, position: int, fragment: dict[str, Any]) -> None:
        # Servers that send whole calls (Ollama) may omit ``index``; the position stands in.
        index = fragment.get("index")
        key = index if isinstance(index, int) else position
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        pending = self._tool_calls.get(key)
        if pending is None:
            pending = _PendingToolCall(id="", name="", arguments=ArgumentBuffer(self._endpoint))
            self._tool_calls[key] = pending
        call_id = fragment.get("id")
        if isinstance(call_id, str) and call_id:
            pending.id = call_id
        name = function.get("name")
        if isinstance(name, str) and name:
            # Names come whole in the first fragment; a repeat is the same name, not a suffix.
            pending.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            pending.arguments.add(arguments)
        elif isinstance(arguments, dict):
            pending.arguments.add(json.dumps(arguments))

    def finished_tool_calls(self) -> list[ToolCall]:
        calls = []
        for key in sorted(self._tool_calls):
            pending = self._tool_calls[key]
            if not pending.name:
                raise ProviderError(
                    f"The model behind {self._endpoint.label} started a tool call without a "
                    "name; the response was abandoned. Try again."
                )
            calls.append(
                ToolCall(
                    id=pending.id or f"call_{uuid.uuid4().hex[:24]}",
                    name=pending.name,
                    arguments=parse_tool_arguments(
                        pending.arguments.text(), pending.name, self._endpoint
                    ),
                )
            )
        return calls

    def _stream_error(self, error: object) -> ProviderError:
        message = error.get("message") if isinstance(error, dict) else error
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) else None
        return ProviderError(
            f"{self._endpoint.label} reported an error mid-response: {message}. Try again.",
            status=status,
        )


class OpenAIChatProvider:
    """A ``Provider`` speaking the Chat Completions streaming API."""

    def __init__(self, config: ProviderConfig, flavor: Flavor) -> None:
        self._config = config
        self._flavor = flavor

    @property
    def model(self) -> str:
        return self._config.model or self._flavor.default_model or ""

    def _endpoint(self) -> Endpoint:
        table = provider_table(self._config.type, self._config.alias)
        base = self._config.uri or self._flavor.default_base_url
        if not base:
            raise ProviderError(
                f"No server address for {self._config.ref}: set uri in [{table}] of config.toml "
                "(for example http://localhost:11434/v1 for Ollama)."
            )
        return Endpoint(
            label=self._flavor.label,
            url=join_url(base, CHAT_COMPLETIONS_PATH),
            config_table=table,
            key_env=self._flavor.key_env,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        endpoint = self._endpoint()
        if not self.model:
            raise ProviderError(
                f"No model configured for {self._config.ref}: set model in "
                f"[{endpoint.config_table}] of config.toml."
            )
        api_key = resolve_api_key(
            self._config.api_key,
            self._flavor.key_env,
            required=self._flavor.key_required,
            endpoint=endpoint,
        )
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if self._config.type == "openrouter":
            headers["X-Title"] = OPENROUTER_APP_TITLE
        build = partial(
            build_chat_body, request, model=self.model, config=self._config, flavor=self._flavor
        )
        # With vision, building reads the prompt's images from uploads/: a worker thread.
        body = await trio.to_thread.run_sync(build) if self._config.vision else build()
        call = SseCall(
            endpoint=endpoint,
            pool=f"provider {self._config.ref}",
            headers=headers,
            body=body,
            timeout_secs=self._config.timeout_secs,
            api_key=api_key,
        )
        assembler = _ChunkAssembler(endpoint)
        done = False
        from acp_server.agent.providers.sse import open_sse  # httpx: on the first call only

        async with open_sse(call) as events:
            async for event in events:
                if event.data.strip() == DONE_SENTINEL:
                    done = True
                    break
                if not event.data.strip():
                    continue
                for provider_event in assembler.feed(decode_event_json(event, endpoint)):
                    yield provider_event
        # Some servers close after the finish_reason chunk without ``[DONE]``; a stream
        # with neither was cut short.
        if not done and assembler.finish_reason is None:
            raise stream_cut_error(endpoint)
        for call_request in assembler.finished_tool_calls():
            yield ToolCallRequested(call_request)
        if assembler.usage is not None:
            yield UsageReported(assembler.usage, cost_usd=assembler.cost_usd)
        yield StreamEnd(stop_reason=assembler.finish_reason or "stop")


def create_chat_provider(config: ProviderConfig) -> Provider:
    """The provider for any type in ``FLAVORS`` (the registry's constructor for them)."""
    flavor = FLAVORS.get(config.type)
    if flavor is None:
        raise ProviderError(f"`{config.type}` is not a Chat Completions provider type")
    return OpenAIChatProvider(config, flavor)


PROVIDER_TYPES: Final[dict[str, Callable[[ProviderConfig], Provider]]] = dict.fromkeys(
    FLAVORS, create_chat_provider
)
"""Provider type → constructor, for ``acp_server.agent.providers.create_provider``."""
