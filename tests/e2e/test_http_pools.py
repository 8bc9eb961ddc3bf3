"""Model providers and the web tools keep long-lived HTTP clients (agent/io/http_clients.py).

Against the scripted server of tests/e2e/fake_llm.py with keep-alive on, as the real
services have it: calls share one kept connection, no client is built per call, a
cancelled call closes only its own connection, a kept connection the server closed is
replaced once before anything was streamed, closing the clients closes their connections,
and certificates are loaded once, and only for https.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from acp_server.agent.io import http_clients
from acp_server.agent.io.http_clients import PoolSpec, shared_client
from acp_server.agent.io.http_clients import http_clients as open_http_clients
from acp_server.agent.providers import create_provider
from acp_server.agent.providers.base import Provider, ProviderError, TextDelta
from acp_server.agent.providers.http import Endpoint
from acp_server.agent.providers.sse import transport_error
from acp_server.agent.tools.web import WebFetchTool
from acp_server.config.values import WebConfig
from tests.e2e.fake_llm import (
    HELLO,
    Reply,
    anthropic_text_reply,
    collect,
    openai_text_reply,
    serve_fake_llm,
)
from tests.helpers import poll_until
from tests.server.agent.test_provider_contract import PROVIDERS, HttpProvider
from tests.server.tool_context import make_context

pytestmark = pytest.mark.e2e  # binds 127.0.0.1

CEILING_SECS = 10
"""Real-time bound on every case: a call that hangs fails the test instead."""
CHAT_AND_MESSAGES = [p for p in PROVIDERS if p.type in ("openai_compatible", "anthropic")]

every_wire_format = pytest.mark.parametrize(
    "provider", CHAT_AND_MESSAGES, ids=[p.type for p in CHAT_AND_MESSAGES]
)


def answer(provider: HttpProvider, text: str = "Hi there") -> Reply:
    """A complete streamed answer in the provider's wire format."""
    if provider.type == "anthropic":
        return anthropic_text_reply(text)
    return openai_text_reply(text)


def hanging_answer(provider: HttpProvider) -> Reply:
    """The first words of an answer, then nothing until the client goes away."""
    return Reply(chunks=provider.opening, ending="hang")


def dropped() -> Reply:
    return Reply(ending="drop")


async def text_of(provider: Provider) -> str:
    return "".join(event.text for event in await collect(provider) if isinstance(event, TextDelta))


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Counts the calls of ``owner.name`` (one element per call) while passing them on."""
    calls: list[int] = []
    original: Callable[..., Any] = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def count_client_constructions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []
    original = httpx.AsyncClient.__init__

    def counting(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> None:
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counting)
    return built


@every_wire_format
async def test_calls_share_one_kept_alive_connection_and_one_client(
    monkeypatch: pytest.MonkeyPatch, provider: HttpProvider
) -> None:
    built = count_client_constructions(monkeypatch)
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(keep_alive=True) as llm, open_http_clients():
            llm.add(*(answer(provider, f"answer {n}") for n in range(3)))
            # A provider per session, as session/new builds them: they share the pool.
            texts = [await text_of(create_provider(provider.config(llm))) for _ in range(3)]
    assert texts == ["answer 0", "answer 1", "answer 2"]
    assert len(llm.requests) == 3
    assert llm.connections == 1
    assert len(built) == 1


@every_wire_format
async def test_a_cancelled_call_closes_its_own_connection_and_the_pool_serves_on(
    provider: HttpProvider,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(keep_alive=True) as llm, open_http_clients():
            llm.add(hanging_answer(provider), answer(provider, "one"), answer(provider, "two"))
            model = create_provider(provider.config(llm))
            with trio.CancelScope() as turn:
                async for event in model.stream(HELLO):
                    if isinstance(event, TextDelta):
                        turn.cancel()  # the user pressed stop mid-answer
            with trio.fail_after(2):
                await llm.wait_client_gone()
            assert [await text_of(model), await text_of(model)] == ["one", "two"]
    # The cancelled call's connection was closed, not pooled; the next two shared one.
    assert llm.connections == 2


@every_wire_format
async def test_a_kept_connection_the_server_closed_is_replaced_once(
    provider: HttpProvider,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(keep_alive=True) as llm, open_http_clients():
            model = create_provider(provider.config(llm))
            # On a new connection a dropped request is an error: it is not sent twice.
            llm.add(dropped())
            with pytest.raises(ProviderError, match="ended before the response was complete"):
                await text_of(model)
            assert len(llm.requests) == 1
            llm.add(answer(provider, "first"))
            assert await text_of(model) == "first"
            # The server closes the kept connection as the next request arrives.
            llm.add(dropped(), answer(provider, "second"))
            assert await text_of(model) == "second"
    assert len(llm.requests) == 4
    assert llm.connections == 3


async def test_closing_the_clients_closes_their_kept_connections() -> None:
    provider = CHAT_AND_MESSAGES[0]
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(answer(provider), keep_alive=True) as llm:
            async with open_http_clients():
                assert await text_of(create_provider(provider.config(llm))) == "Hi there"
                await trio.testing.wait_all_tasks_blocked()
                assert llm.open_connections == 1  # kept for the next call
            await poll_until(lambda: llm.open_connections == 0, within=5)


async def test_certificates_are_loaded_once_and_only_for_https(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_clients, "_tls_context", None)
    for proxy_variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(proxy_variable, raising=False)
    loads = count_calls(monkeypatch, ssl, "create_default_context")
    provider = CHAT_AND_MESSAGES[0]
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(answer(provider), answer(provider)) as llm, open_http_clients():
            model = create_provider(provider.config(llm))
            assert [await text_of(model), await text_of(model)] == ["Hi there"] * 2
            assert loads == []  # http:// only: no TLS, no certificates
            first = shared_client(PoolSpec("one https service"), "https://one.invalid/")
            second = shared_client(PoolSpec("another"), "https://two.invalid/v1")
            assert first is not second
            assert len(loads) == 1  # one TLS context for the whole process


async def test_web_fetch_builds_no_client_per_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    built = count_client_constructions(monkeypatch)
    pages = [Reply(chunks=(f"page {n}".encode(),), content_type="text/plain") for n in range(3)]
    tool = WebFetchTool(WebConfig(allow_private_hosts=True))
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(*pages, keep_alive=True) as server, open_http_clients():
            outputs = [
                await tool.run({"url": f"{server.base_url}/{n}"}, make_context(tmp_path)[0])
                for n in range(3)
            ]
    assert [output.text for output in outputs] == ["page 0", "page 1", "page 2"]
    assert len(built) == 1
    assert server.connections == 1


def test_a_pool_whose_connections_stay_busy_says_so() -> None:
    endpoint = Endpoint("OpenRouter", "https://openrouter.ai/api/v1/chat/completions", "t")
    message = str(transport_error(endpoint, httpx.PoolTimeout("no connection"), 7))
    assert "Every connection to OpenRouter stayed busy with other calls for 7 s" in message
    assert "raise timeout_secs in [t]" in message
