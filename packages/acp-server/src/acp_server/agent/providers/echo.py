"""The offline ``echo`` provider: no network, no key, deterministic.

It streams the latest user message back word by word. Prompt lines of the form
``/tool NAME {json-args}`` become tool calls instead of text; once their results come
back, it streams one summary line per result. ``/think TEXT`` streams TEXT as reasoning,
and ``/fail TEXT`` makes the model call fail with TEXT (so clients can see errors).
``chunk_delay_ms`` slows streaming down so a client can cancel mid-turn.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Final

import trio

from acp_server.agent.providers.base import (
    ModelRequest,
    ProviderError,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    UsageReported,
)
from acp_server.config import ProviderConfig
from acp_server.model import ChatMessage, ToolCall, Usage
from acp_server.patterns import LazyPattern

TOOL_DIRECTIVE: Final = "/tool"
THINK_DIRECTIVE: Final = "/think"
FAIL_DIRECTIVE: Final = "/fail"
DEFAULT_MAX_SUMMARY_CHARS: Final = 160
_WORD: Final = LazyPattern(r"\s*\S+|\s+$")


class EchoProvider:
    """Streams the prompt back; see the module docstring for the directives."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self._delay = config.chunk_delay_ms / 1000.0

    @property
    def model(self) -> str:
        return self.config.model or "echo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        messages = request.messages
        if messages and messages[-1].role == "tool":
            async for event in self._summarise_results(messages):
                yield event
            return
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        known_tools = {tool.name for tool in request.tools}
        words_out = 0
        text_lines: list[str] = []
        calls: list[ToolCall] = []
        for line in prompt.splitlines():
            stripped = line.strip()
            if _is_directive(stripped, TOOL_DIRECTIVE):
                call = _parse_tool_line(stripped)
                if isinstance(call, str):
                    text_lines.append(call)
                elif known_tools and call.name not in known_tools:
                    calls.append(call)  # the runtime answers unknown tools with an error
                else:
                    calls.append(call)
            elif _is_directive(stripped, THINK_DIRECTIVE):
                for word in _words(stripped[len(THINK_DIRECTIVE) :].strip()):
                    await self._pause()
                    yield ThoughtDelta(word)
            elif _is_directive(stripped, FAIL_DIRECTIVE):
                reason = stripped[len(FAIL_DIRECTIVE) :].strip() or "echo provider failure"
                raise ProviderError(reason)
            else:
                text_lines.append(line)
        text = "\n".join(text_lines).strip("\n")
        for word in _words(text):
            await self._pause()
            words_out += 1
            yield TextDelta(word)
        for call in calls:
            yield ToolCallRequested(call)
        yield UsageReported(Usage(input_tokens=len(prompt.split()), output_tokens=words_out))
        yield StreamEnd("tool_use" if calls else "end_turn")

    async def _summarise_results(
        self, messages: Sequence[ChatMessage]
    ) -> AsyncIterator[ProviderEvent]:
        results: list[ChatMessage] = []
        for message in reversed(messages):
            if message.role != "tool":
                break
            results.append(message)
        results.reverse()
        before = (
            messages[len(messages) - len(results) - 1] if len(messages) > len(results) else None
        )
        # Separate the summary from text streamed earlier in the turn.
        lead = "\n\n" if before is not None and before.content else ""
        lines = [_summary(result) for result in results]
        for index, line in enumerate(lines):
            prefix = "\n" if index else lead
            for word in _words(prefix + line):
                await self._pause()
                yield TextDelta(word)
        yield StreamEnd("end_turn")

    async def _pause(self) -> None:
        if self._delay > 0:
            await trio.sleep(self._delay)


def _is_directive(line: str, directive: str) -> bool:
    return line == directive or line.startswith(directive + " ")


def _words(text: str) -> Iterator[str]:
    """Whitespace-preserving word chunks: joining them gives the text back exactly."""
    for match in _WORD.finditer(text):
        yield match.group(0)


def _parse_tool_line(line: str) -> ToolCall | str:
    """``/tool NAME {json}`` → a call; a malformed line → explanatory text instead."""
    rest = line[len(TOOL_DIRECTIVE) :].strip()
    name, _, raw_args = rest.partition(" ")
    if not name:
        return '(echo: `/tool` needs a tool name, e.g. /tool shell {"command": "ls"})'
    raw_args = raw_args.strip() or "{}"
    try:
        arguments = json.loads(raw_args)
    except json.JSONDecodeError as exc:
        return f"(echo: arguments for /tool {name} are not JSON: {exc.msg})"
    if not isinstance(arguments, dict):
        return f"(echo: arguments for /tool {name} must be a JSON object)"
    return ToolCall(id=f"echo-{uuid.uuid4()}", name=name, arguments=arguments)


def _summary(result: ChatMessage) -> str:
    name = result.tool_name or "tool"
    text = result.content.strip()
    lines = text.splitlines()
    first = lines[0] if lines else "(no output)"
    if len(first) > DEFAULT_MAX_SUMMARY_CHARS:
        first = first[: DEFAULT_MAX_SUMMARY_CHARS - 1] + "…"
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    return f"{name} returned: {first}{more}"


PROVIDER_TYPES: Final = {"echo": EchoProvider}
"""Provider type → constructor, for ``acp_server.agent.providers.create_provider``."""
