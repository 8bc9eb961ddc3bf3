"""The contract every model provider keeps, run against each one over its real wire format.

The scripted model API (tests/server/agent/mock_llm.py, in process: ``httpx``'s mock
transport under the providers' real clients) speaks Chat Completions for the OpenAI-shaped
types and the Messages API for Anthropic. Each case checks what the person at the editor
sees: a ``ProviderError`` whose message says what went wrong and what to change, and
never contains the API key; and that a cancelled turn stops the stream at once and closes
the HTTP connection. The offline echo provider has no key and no connection, so it only
takes part in the cancellation case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
import trio
import trio.testing

from acp_server.agent.providers import create_provider
from acp_server.agent.providers.base import Provider, ProviderError, ProviderEvent, TextDelta
from acp_server.config import ProviderConfig
from tests.e2e.fake_llm import (
    HELLO,
    Ending,
    FakeLLM,
    Reply,
    anthropic_events,
    json_error,
    openai_chunk,
    openai_stream,
)
from tests.server.agent.mock_llm import MockLLM, mock_llm

CEILING_SECS = 10
"""Real-time bound on every case: a provider that hangs fails the test instead."""
PROMPT_STOP_SECS = 2.0
"""How soon after a cancel the server must see the connection closed."""
API_KEY = "sk-contract-secret-0123456789"
FIRST_WORDS = "Once upon"
ALIAS = "contract"


@dataclass(frozen=True)
class HttpProvider:
    """One provider type as the contract drives it."""

    type: str
    key_env: str | None
    """The environment variable the key comes from (None: the key is optional)."""
    opening: Sequence[bytes]
    """The first events of a streamed answer, ``FIRST_WORDS`` as its only text: no end."""
    uri_suffix: str = ""

    @property
    def table(self) -> str:
        return f"[providers.models.{self.type}.{ALIAS}]"

    def config(
        self, llm: FakeLLM | MockLLM, *, api_key: str | None = API_KEY, timeout_secs: float = 30
    ) -> ProviderConfig:
        return ProviderConfig(
            type=self.type,
            alias=ALIAS,
            model="fake-model",
            api_key=api_key,
            uri=llm.base_url + self.uri_suffix,
            timeout_secs=timeout_secs,
        )


CHAT_OPENING = openai_stream([openai_chunk({"content": FIRST_WORDS})], done=False)
MESSAGES_OPENING = anthropic_events([("text", [FIRST_WORDS])], stop=False)[:4]

PROVIDERS = [
    HttpProvider("openai", "OPENAI_API_KEY", CHAT_OPENING, "/v1"),
    HttpProvider("openrouter", "OPENROUTER_API_KEY", CHAT_OPENING, "/v1"),
    HttpProvider("openai_compatible", None, CHAT_OPENING, "/v1"),
    HttpProvider("anthropic", "ANTHROPIC_API_KEY", MESSAGES_OPENING),
]
KEYED = [provider for provider in PROVIDERS if provider.key_env is not None]


def by_type(providers: Sequence[HttpProvider]) -> Callable[[str], pytest.MarkDecorator]:
    def parametrize(name: str) -> pytest.MarkDecorator:
        return pytest.mark.parametrize(name, providers, ids=[p.type for p in providers])

    return parametrize


every_http_provider = by_type(PROVIDERS)("provider")
every_keyed_provider = by_type(KEYED)("provider")


async def stream_error(config: ProviderConfig) -> ProviderError:
    """The ``ProviderError`` building the provider or streaming ``HELLO`` ends with."""
    try:
        async for _ in create_provider(config).stream(HELLO):
            pass
    except ProviderError as error:
        return error
    raise AssertionError(f"{config.ref} streamed to the end without an error")


def assert_keeps_the_key_secret(error: ProviderError) -> None:
    assert API_KEY not in str(error)
    assert API_KEY not in repr(error.args)


@every_keyed_provider
async def test_missing_key_names_the_variable_and_the_config_table(
    monkeypatch: pytest.MonkeyPatch, provider: HttpProvider
) -> None:
    assert provider.key_env is not None
    monkeypatch.delenv(provider.key_env, raising=False)
    with trio.fail_after(CEILING_SECS):
        async with mock_llm() as llm:
            error = await stream_error(provider.config(llm, api_key=None))
    message = str(error)
    assert message.startswith("No API key for ")
    assert provider.key_env in message
    assert provider.table in message
    assert llm.requests == []  # nothing was sent without a key


@every_http_provider
@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_says_to_check_it_and_never_shows_it(
    provider: HttpProvider, status: int
) -> None:
    # Servers quote the key they refused; the message must not pass it on.
    refusal = json_error(status, f"Incorrect API key provided: {API_KEY}", kind="invalid_api_key")
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(refusal) as llm:
            error = await stream_error(provider.config(llm))
    message = str(error)
    assert error.status == status
    assert f"rejected the API key (HTTP {status})" in message
    assert "Check your key" in message
    assert (provider.key_env or "api_key") in message
    assert provider.table in message
    assert "[redacted]" in message  # the server's own words, minus the key
    assert_keeps_the_key_secret(error)
    assert len(llm.requests) == 1  # a refused key is not retried
    assert API_KEY in " ".join(llm.requests[0].headers.values())  # the configured key was sent


@every_http_provider
@pytest.mark.parametrize(
    "ending",
    [
        pytest.param("cut", id="connection-dropped"),
        pytest.param("complete", id="body-ends-without-end-event"),
    ],
)
async def test_cut_stream_is_an_error_that_says_to_try_again(
    provider: HttpProvider, ending: Ending
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=provider.opening, ending=ending)) as llm:
            error = await stream_error(provider.config(llm))
    assert "ended before the response was complete. Try again." in str(error)
    assert_keeps_the_key_secret(error)
    assert len(llm.requests) == 1  # what was streamed is never streamed twice


@every_http_provider
@pytest.mark.parametrize(
    "after_first_event",
    [pytest.param(False, id="no-bytes-at-all"), pytest.param(True, id="silent-mid-stream")],
)
async def test_silent_server_times_out_after_timeout_secs(
    autojump_clock: trio.testing.MockClock, provider: HttpProvider, after_first_event: bool
) -> None:
    silence = (
        Reply(chunks=provider.opening, ending="hang")
        if after_first_event
        else Reply(ending="silent")
    )
    with trio.fail_after(CEILING_SECS * 10):  # mock-clock seconds
        async with mock_llm(silence) as llm:
            started = trio.current_time()
            error = await stream_error(provider.config(llm, timeout_secs=7))
            waited = trio.current_time() - started
    message = str(error)
    assert "sent nothing for 7 s" in message
    assert f"raise timeout_secs in {provider.table}" in message
    assert_keeps_the_key_secret(error)
    assert 7 <= waited < 8
    assert llm.closed_by_client == 1


async def first_event_then_cancel(provider: Provider) -> list[ProviderEvent]:
    """Consume the stream until its first event, then cancel the turn as session/cancel does."""
    received: list[ProviderEvent] = []
    with trio.CancelScope() as turn:
        async for event in provider.stream(HELLO):
            received.append(event)
            turn.cancel()
    assert turn.cancelled_caught  # the stream neither ended nor failed on its own
    return received


@every_http_provider
async def test_cancel_mid_stream_stops_at_once_and_closes_the_connection(
    provider: HttpProvider,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with mock_llm(Reply(chunks=provider.opening, ending="hang")) as llm:
            received = await first_event_then_cancel(create_provider(provider.config(llm)))
            with trio.fail_after(PROMPT_STOP_SECS):
                await llm.wait_client_gone()
    assert received == [TextDelta(FIRST_WORDS)]
    assert llm.closed_by_client == 1
    assert len(llm.requests) == 1


async def test_cancel_mid_stream_stops_the_echo_provider_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = create_provider(ProviderConfig(type="echo", alias=ALIAS, chunk_delay_ms=60_000))
    started = trio.current_time()
    received = await first_event_then_cancel(slow)
    assert len(received) == 1
    assert isinstance(received[0], TextDelta)
    assert received[0].text.strip()
    # The first word comes after one delay; the cancel does not wait out another one.
    assert trio.current_time() - started < 2 * 60
