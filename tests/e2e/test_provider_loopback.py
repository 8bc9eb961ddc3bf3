"""A model provider over a real loopback socket: the one end-to-end case of the provider
tests (the rest run in process, tests/server/agent/test_provider_*.py), so httpx's real
transport, h11 framing and connection handling stay covered."""

from __future__ import annotations

import pytest
import trio

from tests.e2e.fake_llm import HELLO, collect, expect_error, openai_text_reply, serve_fake_llm
from tests.e2e.helpers import unused_port
from tests.server.agent.test_provider_openai import (
    CEILING_SECS,
    assert_streamed_hello,
    chat_provider,
)

pytestmark = pytest.mark.e2e  # binds 127.0.0.1


async def test_streams_text_then_usage_then_end_over_a_socket() -> None:
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(openai_text_reply("Hel", "lo", " there", usage=(12, 5))) as llm:
            events = await collect(chat_provider(llm.base_url, temperature=0.2), HELLO)
    assert_streamed_hello(events, llm.requests)


async def test_connection_refused_is_reported_with_the_address() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}"
    with trio.fail_after(CEILING_SECS):
        error = await expect_error(chat_provider(base_url, provider_type="ollama"))
    message = str(error)
    assert "Could not connect" in message
    assert "connection refused" in message
    assert f"Ollama at {base_url}/v1/chat/completions" in message
