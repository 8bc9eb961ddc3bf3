"""The offline echo provider: word streaming, directives, delays."""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from acp_server.agent.providers import create_provider
from acp_server.agent.providers.base import (
    ModelRequest,
    ProviderError,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
)
from acp_server.agent.providers.echo import EchoProvider
from acp_server.config import ProviderConfig
from acp_server.model import ChatMessage


async def collect(provider: EchoProvider, *messages: ChatMessage) -> list[ProviderEvent]:
    return [event async for event in provider.stream(ModelRequest(None, list(messages)))]


def echo(delay_ms: int = 0) -> EchoProvider:
    provider = create_provider(ProviderConfig(type="echo", alias="t", chunk_delay_ms=delay_ms))
    assert isinstance(provider, EchoProvider)
    return provider


async def test_words_join_back_to_the_prompt() -> None:
    prompt = "  Hello,   world!\n second line\t end "
    events = await collect(echo(), ChatMessage("user", prompt))
    words = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(words) == prompt.strip("\n")
    assert isinstance(events[-1], StreamEnd)
    assert events[-1].stop_reason == "end_turn"


async def test_directives() -> None:
    prompt = 'hi\n/think let me see\n/tool shell {"command": "ls"}\n/tool bad {oops\n/tool'
    events = await collect(echo(), ChatMessage("user", prompt))
    thoughts = "".join(e.text for e in events if isinstance(e, ThoughtDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [e.call for e in events if isinstance(e, ToolCallRequested)]
    assert thoughts == "let me see"
    assert text.startswith("hi\n(echo: arguments for /tool bad are not JSON")
    assert "needs a tool name" in text
    assert [(c.name, c.arguments) for c in calls] == [("shell", {"command": "ls"})]
    assert calls[0].id
    with pytest.raises(ProviderError, match="upstream down"):
        await collect(echo(), ChatMessage("user", "/fail upstream down"))


async def test_tool_results_are_summarised() -> None:
    events = await collect(
        echo(),
        ChatMessage("user", "go"),
        ChatMessage("assistant", "Looking."),
        ChatMessage("tool", "a.txt\nb.txt", tool_call_id="c1", tool_name="shell"),
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "\n\nshell returned: a.txt (+1 more lines)"


async def test_chunk_delay_paces_the_stream(autojump_clock: MockClock) -> None:
    start = trio.current_time()
    await collect(echo(delay_ms=100), ChatMessage("user", "one two three"))
    assert trio.current_time() - start == pytest.approx(0.3)


def test_unknown_provider_types_are_named() -> None:
    with pytest.raises(ProviderError, match="unknown provider type `nope`"):
        create_provider(ProviderConfig(type="nope", alias="x"))
