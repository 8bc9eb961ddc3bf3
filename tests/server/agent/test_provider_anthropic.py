"""The Anthropic provider against the Messages streaming format, answered in process
(tests/server/agent/mock_llm.py)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from acp_server.agent.providers.anthropic import PROVIDER_TYPES, AnthropicProvider
from acp_server.agent.providers.base import (
    ModelRequest,
    StreamEnd,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReported,
)
from acp_server.config import ProviderConfig
from acp_server.model import ChatMessage, ToolCall, Usage
from tests.e2e.fake_llm import (
    HELLO,
    Reply,
    anthropic_error_event,
    anthropic_events,
    anthropic_text_reply,
    anthropic_tool_reply,
    collect,
    expect_error,
    json_error,
)
from tests.server.agent.mock_llm import mock_llm

CEILING_SECS = 10


def anthropic(
    base_url: str,
    *,
    api_key: str | None = "sk-ant-secret",
    temperature: float | None = None,
    timeout_secs: float = 30,
) -> AnthropicProvider:
    config = ProviderConfig(
        type="anthropic",
        alias="main",
        model="claude-fake",
        api_key=api_key,
        uri=base_url,
        temperature=temperature,
        timeout_secs=timeout_secs,
    )
    return AnthropicProvider(config)


def test_anthropic_is_registered() -> None:
    assert "anthropic" in PROVIDER_TYPES


async def test_streams_text_with_usage_and_the_right_headers() -> None:
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(anthropic_text_reply("Hello", ", world")) as llm:
            events = await collect(anthropic(llm.base_url), HELLO)
    assert events == [
        TextDelta("Hello"),
        TextDelta(", world"),
        UsageReported(Usage(input_tokens=25, output_tokens=7)),
        StreamEnd("end_turn"),
    ]
    [request] = llm.requests
    assert request.target == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-secret"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    body = request.json()
    assert body["model"] == "claude-fake"
    assert body["stream"] is True
    assert body["max_tokens"] == 8192  # mandatory on this API
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Say hello"}]}
    ]


async def test_tool_use_is_reassembled_from_json_fragments() -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("toolu_1", "file_read", {"path": "README.md", "offset": 3}),
        ("toolu_2", "glob_search", {"pattern": "**/*.py"}),
    ]
    request = ModelRequest(
        None, HELLO.messages, [ToolSpec("file_read", "Read", {"type": "object"})]
    )
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(anthropic_tool_reply(calls, text="Let me look.")) as llm:
            events = await collect(anthropic(llm.base_url), request)
    assert events == [
        TextDelta("Let me look."),
        ToolCallRequested(ToolCall("toolu_1", "file_read", {"path": "README.md", "offset": 3})),
        ToolCallRequested(ToolCall("toolu_2", "glob_search", {"pattern": "**/*.py"})),
        UsageReported(Usage(input_tokens=25, output_tokens=7)),
        StreamEnd("tool_use"),
    ]
    assert llm.requests[0].json()["tools"] == [
        {"name": "file_read", "description": "Read", "input_schema": {"type": "object"}}
    ]


async def test_thinking_blocks_become_thoughts() -> None:
    reply = anthropic_text_reply("4", thinking=["2 + 2 ", "is 4."])
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(reply) as llm:
            events = await collect(anthropic(llm.base_url), HELLO)
    assert events[:3] == [ThoughtDelta("2 + 2 "), ThoughtDelta("is 4."), TextDelta("4")]


async def test_history_maps_to_tool_use_and_merged_tool_results() -> None:
    history = [
        ChatMessage(role="user", content="check both"),
        ChatMessage(
            role="assistant",
            content="Checking.",
            tool_calls=(
                ToolCall("toolu_a", "file_read", {"path": "a"}),
                ToolCall("toolu_b", "file_read", {"path": "b"}),
            ),
        ),
        ChatMessage(role="tool", content="alpha", tool_call_id="toolu_a", tool_name="file_read"),
        ChatMessage(
            role="tool",
            content="Error: no such file",
            tool_call_id="toolu_b",
            tool_name="file_read",
            ok=False,
        ),
        ChatMessage(role="user", content="and now?"),
    ]
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(anthropic_text_reply("ok")) as llm:
            await collect(anthropic(llm.base_url, temperature=0.5), ModelRequest(None, history))
    body = llm.requests[0].json()
    assert "system" not in body
    assert body["temperature"] == 0.5
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "check both"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_a", "name": "file_read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "file_read", "input": {"path": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "alpha"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "Error: no such file",
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]


async def test_is_error_follows_the_tool_outcome_not_the_text() -> None:
    # A denial fails without an "Error:" prefix; a file may well start with "Error:".
    calls = (
        ToolCall("toolu_d", "shell", {"command": "rm -rf /"}),
        ToolCall("toolu_r", "file_read", {"path": "log.txt"}),
    )
    history = [
        ChatMessage(role="user", content="go"),
        ChatMessage(role="assistant", content="", tool_calls=calls),
        ChatMessage(
            role="tool",
            content="Denied by user.",
            tool_call_id="toolu_d",
            tool_name="shell",
            ok=False,
        ),
        ChatMessage(
            role="tool",
            content="Error: disk full (a line of the log)",
            tool_call_id="toolu_r",
            tool_name="file_read",
        ),
    ]
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(anthropic_text_reply("ok")) as llm:
            await collect(anthropic(llm.base_url), ModelRequest(None, history))
    results = llm.requests[0].json()["messages"][-1]["content"]
    assert results == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_d",
            "content": "Denied by user.",
            "is_error": True,
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_r",
            "content": "Error: disk full (a line of the log)",
        },
    ]


async def test_error_event_mid_stream_is_reported() -> None:
    chunks = (
        *anthropic_events([("text", ["Part"])], stop=False)[:4],
        anthropic_error_event("overloaded_error", "Overloaded"),
    )
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=chunks)) as llm:
            error = await expect_error(anthropic(llm.base_url))
    assert "overloaded_error" in str(error)
    assert "Overloaded" in str(error)
    assert "try again" in str(error)


async def test_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(anthropic_text_reply("hi")) as llm:
            await collect(anthropic(llm.base_url, api_key=None), HELLO)
    assert llm.requests[0].headers["x-api-key"] == "sk-ant-from-env"


async def test_overloaded_answer_is_retried_with_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    overloaded = json_error(529, "Overloaded", kind="overloaded_error")
    with trio.fail_after(CEILING_SECS * 10):
        async with mock_llm(overloaded, anthropic_text_reply("back")) as llm:
            started = trio.current_time()
            events = await collect(anthropic(llm.base_url), HELLO)
            waited = trio.current_time() - started
    assert TextDelta("back") in events
    assert len(llm.requests) == 2
    assert 1 <= waited < 2  # first backoff step, no Retry-After given


async def test_uri_ending_in_v1_is_not_doubled() -> None:
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(anthropic_text_reply("x")) as llm:
            await collect(anthropic(f"{llm.base_url}/v1/"), HELLO)
    assert llm.requests[0].target == "/v1/messages"
