"""The Chat Completions providers against their streaming format, answered in process
(tests/server/agent/mock_llm.py; one loopback case: tests/e2e/test_provider_loopback.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from acp_server.agent.providers.base import (
    ModelRequest,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReported,
)
from acp_server.agent.providers.openai import PROVIDER_TYPES, create_chat_provider
from acp_server.config import ProviderConfig
from acp_server.model import ChatMessage, ToolCall, Usage
from tests.e2e.fake_llm import (
    HELLO,
    RecordedRequest,
    Reply,
    collect,
    expect_error,
    json_error,
    openai_chunk,
    openai_stream,
    openai_text_reply,
    openai_tool_reply,
    sse,
)
from tests.server.agent.mock_llm import mock_llm

CEILING_SECS = 10


def chat_provider(
    base_url: str,
    *,
    provider_type: str = "openai",
    api_key: str | None = "sk-test-secret",
    timeout_secs: float = 30,
    **extra: Any,
) -> Any:
    config = ProviderConfig(
        type=provider_type,
        alias="default",
        model="fake-model",
        api_key=api_key,
        uri=f"{base_url}/v1",
        timeout_secs=timeout_secs,
        **extra,
    )
    return create_chat_provider(config)


def test_every_chat_type_is_registered() -> None:
    assert set(PROVIDER_TYPES) >= {"openai", "openrouter", "openai_compatible", "ollama"}


async def test_streams_text_then_usage_then_end() -> None:
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(openai_text_reply("Hel", "lo", " there", usage=(12, 5))) as llm:
            events = await collect(chat_provider(llm.base_url, temperature=0.2), HELLO)
    assert_streamed_hello(events, llm.requests)


def assert_streamed_hello(events: list[ProviderEvent], requests: list[RecordedRequest]) -> None:
    """What ``openai_text_reply("Hel", "lo", " there", usage=(12, 5))`` streams, and the
    one request that asked for it (temperature 0.2)."""
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta(" there"),
        UsageReported(Usage(input_tokens=12, output_tokens=5)),
        StreamEnd("stop"),
    ]
    [request] = requests
    assert request.target == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-secret"
    body = request.json()
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello"},
    ]


async def test_fragmented_tool_calls_are_reassembled_in_order() -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("call_a", "file_read", {"path": "src/main.py", "limit": 40}),
        ("call_b", "shell", {"command": "ls -la \u00e9t\u00e9/"}),
    ]
    tools = [ToolSpec("file_read", "Read a file"), ToolSpec("shell", "Run a command")]
    request = ModelRequest(None, [ChatMessage(role="user", content="look")], tools)
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(openai_tool_reply(calls, text="Checking.", fragments=4)) as llm:
            events = await collect(chat_provider(llm.base_url), request)
    assert events == [
        TextDelta("Checking."),
        ToolCallRequested(ToolCall("call_a", "file_read", {"path": "src/main.py", "limit": 40})),
        ToolCallRequested(ToolCall("call_b", "shell", {"command": "ls -la \u00e9t\u00e9/"})),
        UsageReported(Usage(input_tokens=20, output_tokens=9)),
        StreamEnd("tool_calls"),
    ]
    sent_tools = llm.requests[0].json()["tools"]
    assert [tool["function"]["name"] for tool in sent_tools] == ["file_read", "shell"]
    assert sent_tools[0]["type"] == "function"


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
async def test_reasoning_deltas_become_thoughts(field: str) -> None:
    reply = openai_text_reply("42", reasoning=["Let me ", "think."], reasoning_field=field)
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(reply) as llm:
            events = await collect(chat_provider(llm.base_url), HELLO)
    assert events[:3] == [ThoughtDelta("Let me "), ThoughtDelta("think."), TextDelta("42")]


async def test_reasoning_token_usage_is_kept() -> None:
    chunks = [
        openai_chunk({"content": "ok"}, finish_reason="stop"),
        openai_chunk(
            usage={
                "prompt_tokens": 3,
                "completion_tokens": 30,
                "completion_tokens_details": {"reasoning_tokens": 25},
            }
        ),
    ]
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=openai_stream(chunks))) as llm:
            events = await collect(chat_provider(llm.base_url), HELLO)
    assert UsageReported(Usage(3, 30, 25)) in events


async def test_history_with_tool_calls_is_sent_in_chat_format() -> None:
    history = [
        ChatMessage(role="user", content="read it"),
        ChatMessage(
            role="assistant",
            content="",
            reasoning="private thoughts",
            tool_calls=(ToolCall("call_1", "file_read", {"path": "a.txt"}),),
        ),
        ChatMessage(role="tool", content="hello", tool_call_id="call_1", tool_name="file_read"),
    ]
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(openai_text_reply("done")) as llm:
            await collect(chat_provider(llm.base_url), ModelRequest(None, history))
    messages = llm.requests[0].json()["messages"]
    assert messages == [
        {"role": "user", "content": "read it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "file_read", "arguments": '{"path": "a.txt"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]


async def test_whole_tool_calls_without_index_are_accepted() -> None:
    # Ollama sends each call whole, in one delta, without ``index``.
    chunks = [
        openai_chunk(
            {
                "tool_calls": [
                    {
                        "id": "c1",
                        "function": {"name": "glob_search", "arguments": {"pattern": "*.py"}},
                    },
                    {"id": "c2", "function": {"name": "file_read", "arguments": '{"path": "x"}'}},
                ]
            },
            finish_reason="tool_calls",
        )
    ]
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=openai_stream(chunks))) as llm:
            events = await collect(chat_provider(llm.base_url, provider_type="ollama"), HELLO)
    assert events == [
        ToolCallRequested(ToolCall("c1", "glob_search", {"pattern": "*.py"})),
        ToolCallRequested(ToolCall("c2", "file_read", {"path": "x"})),
        StreamEnd("tool_calls"),
    ]


async def test_invalid_tool_arguments_are_a_clear_error() -> None:
    chunks = [
        openai_chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "shell"}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"command": '}}]}),
        openai_chunk({}, finish_reason="tool_calls"),
    ]
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=openai_stream(chunks))) as llm:
            error = await expect_error(chat_provider(llm.base_url))
    assert "`shell`" in str(error)
    assert "not a JSON object" in str(error)


async def test_openrouter_key_comes_from_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-env-key")
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(openai_text_reply("hi")) as llm:
            provider = chat_provider(llm.base_url, provider_type="openrouter", api_key=None)
            await collect(provider, HELLO)
    headers = llm.requests[0].headers
    assert headers["authorization"] == "Bearer or-env-key"
    assert headers["x-title"] == "ZeroClaw"
    assert "max_completion_tokens" not in llm.requests[0].json()


async def test_compatible_server_needs_no_key_and_never_gets_the_openai_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(openai_text_reply("local")) as llm:
            provider = chat_provider(
                llm.base_url, provider_type="openai_compatible", api_key=None, max_tokens=64
            )
            events = await collect(provider, HELLO)
    assert TextDelta("local") in events
    assert "authorization" not in llm.requests[0].headers
    assert llm.requests[0].json()["max_tokens"] == 64


async def test_compatible_server_without_uri_says_to_set_it() -> None:
    provider = create_chat_provider(
        ProviderConfig(type="openai_compatible", alias="lan", model="m")
    )
    error = await expect_error(provider)
    assert "set uri in [providers.models.openai_compatible.lan]" in str(error)


async def test_openai_limits_output_with_max_completion_tokens() -> None:
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(openai_text_reply("x")) as llm:
            await collect(chat_provider(llm.base_url, max_tokens=100), HELLO)
    assert llm.requests[0].json()["max_completion_tokens"] == 100


async def test_rate_limit_waits_for_retry_after_then_succeeds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limited = json_error(429, "slow down", headers=[("Retry-After", "7")])
    with trio.fail_after(CEILING_SECS * 10):
        async with mock_llm(limited, openai_text_reply("finally")) as llm:
            started = trio.current_time()
            events = await collect(chat_provider(llm.base_url), HELLO)
            waited = trio.current_time() - started
    assert TextDelta("finally") in events
    assert len(llm.requests) == 2
    assert 7 <= waited < 8


async def test_retry_after_beyond_the_cap_gives_up_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limited = json_error(429, "quota exhausted", headers=[("Retry-After", "3600")])
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(limited) as llm:
            error = await expect_error(chat_provider(llm.base_url))
    assert error.status == 429
    assert "3600 s" in str(error)
    assert "quota exhausted" in str(error)
    assert len(llm.requests) == 1


async def test_server_errors_are_retried_then_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failures = [json_error(500, "internal error") for _ in range(3)]
    with trio.fail_after(CEILING_SECS * 10):
        async with mock_llm(*failures) as llm:
            started = trio.current_time()
            error = await expect_error(chat_provider(llm.base_url))
            waited = trio.current_time() - started
    assert error.status == 500
    assert "HTTP 500" in str(error)
    assert "3 attempt(s)" in str(error)
    assert len(llm.requests) == 3
    assert waited >= 1 + 2  # exponential backoff between the attempts


async def test_error_object_inside_the_stream_is_reported() -> None:
    chunks = (
        sse(openai_chunk({"content": "Par"})),
        sse({"error": {"code": 502, "message": "Upstream provider disconnected"}}),
    )
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=chunks)) as llm:
            error = await expect_error(chat_provider(llm.base_url, provider_type="openrouter"))
    assert "Upstream provider disconnected" in str(error)
    assert error.status == 502


async def test_non_streaming_answer_is_a_clear_error() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    reply = Reply(chunks=(body,), content_type="application/json")
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(reply) as llm:
            error = await expect_error(chat_provider(llm.base_url))
    assert "did not answer with an event stream" in str(error)
