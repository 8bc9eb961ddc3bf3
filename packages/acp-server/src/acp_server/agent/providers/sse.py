"""One model call over HTTP: a streaming POST answered with server-sent events.

Libraries: ``httpx`` because it runs natively under trio (httpcore has a trio backend, so a
trio cancel scope aborts a read at once and the connection is closed rather than returned
to the pool), and ``httpx-sse`` for the event-stream framing (multi-line ``data:``,
comments, CR/LF variants) instead of hand parsing.

Each configured provider has one long-lived client whose connections are kept alive
between calls (``acp_server.agent.io.http_clients``, pool ``SseCall.pool``); timeouts, headers
and the key go with each request. A request that fails before any answer on a connection
the pool had kept (the server closed it meanwhile) is sent once more on a new one: nothing
was delivered yet, so nothing is streamed twice.

This module imports httpx; providers import it on their first call (see
``acp_server.agent.providers.http``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import lru_cache
from typing import Final

import httpx
import trio
from httpx_sse import EventSource, ServerSentEvent, SSEError

from acp_server.agent.io.http_clients import (
    ConnectionWatch,
    PoolSpec,
    finish_stream,
    release_stream,
    shared_client,
)
from acp_server.agent.providers.base import ProviderError
from acp_server.agent.providers.http import (
    DEFAULT_MAX_ERROR_BODY_BYTES,
    DEFAULT_MAX_RETRY_DELAY_SECS,
    DEFAULT_RETRY_BASE_DELAY_SECS,
    RETRYABLE_STATUSES,
    Endpoint,
    SseCall,
    encode_json,
    error_detail,
    parse_retry_after,
    status_error,
    stream_cut_error,
)

logger = logging.getLogger(__name__)

MAX_STALE_CONNECTION_RETRIES: Final = 1
"""Extra tries of a call whose pooled connection turned out closed (before any answer)."""
STALE_CONNECTION_ERRORS: Final = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""What a request sent on a connection the server had closed meanwhile fails with."""
MAX_KNOWN_ENDPOINTS: Final = 64
"""Endpoint URLs and pools remembered parsed (one per configured provider in practice)."""


async def _read_bounded(response: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            body += chunk
            if len(body) >= limit:
                break
    finally:
        await finish_stream(chunks)
    return bytes(body[:limit])


def transport_error(
    endpoint: Endpoint, error: httpx.HTTPError, timeout_secs: float
) -> ProviderError:
    """The message for a failure below HTTP: refused, timed out, reset, cut short."""
    if isinstance(error, httpx.ConnectTimeout):
        return ProviderError(
            f"Could not connect to {endpoint.label} at {endpoint.url} within {timeout_secs:g} s. "
            f"Check your network, or raise timeout_secs in [{endpoint.config_table}]."
        )
    if isinstance(error, httpx.PoolTimeout):
        return ProviderError(
            f"Every connection to {endpoint.label} stayed busy with other calls for "
            f"{timeout_secs:g} s. Try again when fewer sessions are working, or raise "
            f"timeout_secs in [{endpoint.config_table}]."
        )
    if isinstance(error, httpx.TimeoutException):
        return ProviderError(
            f"{endpoint.label} sent nothing for {timeout_secs:g} s, so the call was abandoned. "
            f"Try again, or raise timeout_secs in [{endpoint.config_table}]."
        )
    if isinstance(error, httpx.ConnectError):
        return ProviderError(
            f"Could not connect to {endpoint.label} at {endpoint.url} ({_reason(error)}). "
            f"Is the server running, and is `uri` in [{endpoint.config_table}] right?"
        )
    if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
        return stream_cut_error(endpoint)
    return ProviderError(f"The request to {endpoint.label} failed: {_reason(error)}.")


def _reason(error: BaseException) -> str:
    if _caused_by(error, ConnectionRefusedError):
        return "connection refused"
    text = str(error).strip()
    return text or type(error).__name__


def _caused_by(error: BaseException, kind: type[BaseException], depth: int = 0) -> bool:
    """Whether ``kind`` is in the cause/context chain (trio groups per-address failures)."""
    if isinstance(error, kind):
        return True
    if depth > 8:
        return False
    linked = [error.__cause__, error.__context__]
    if isinstance(error, BaseExceptionGroup):
        linked.extend(error.exceptions)
    return any(_caused_by(inner, kind, depth + 1) for inner in linked if inner is not None)


class _CappedStream(httpx.AsyncByteStream):
    """Ends a response that grows past ``limit`` bytes (the SSE decoder buffers lines whole)."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, endpoint: Endpoint) -> None:
        self._inner = inner
        self._limit = limit
        self._endpoint = endpoint

    async def __aiter__(self) -> AsyncIterator[bytes]:
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise ProviderError(
                    f"The response from {self._endpoint.label} exceeded "
                    f"{self._limit // (1024 * 1024)} MiB and was abandoned."
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _retry_delay(response: httpx.Response, attempt: int) -> float | None:
    """Seconds before the next attempt, or None when the call should not be retried."""
    if response.status_code not in RETRYABLE_STATUSES:
        return None
    requested = parse_retry_after(response.headers.get("retry-after"))
    if requested is not None:
        return requested if requested <= DEFAULT_MAX_RETRY_DELAY_SECS else None
    return min(DEFAULT_RETRY_BASE_DELAY_SECS * 2.0 ** (attempt - 1), DEFAULT_MAX_RETRY_DELAY_SECS)


@lru_cache(maxsize=MAX_KNOWN_ENDPOINTS)
def _pool_named(name: str) -> PoolSpec:
    return PoolSpec(name=name)


@lru_cache(maxsize=MAX_KNOWN_ENDPOINTS)
def _parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once: every call of a provider goes to the same address."""
    return httpx.URL(url)


@asynccontextmanager
async def open_sse(call: SseCall) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
    """POST ``call.body`` and yield the response's server-sent events.

    429 and 5xx answers are retried up to ``call.max_attempts`` times with exponential
    backoff, honouring ``Retry-After`` up to ``DEFAULT_MAX_RETRY_DELAY_SECS``; a pooled
    connection found closed is replaced once (module docstring). Retries only happen
    before any event was delivered, so nothing is ever streamed twice. Leaving the block
    by error or by trio cancellation closes the connection; leaving it normally reads the
    end of the response so that the connection serves the next call.
    """
    endpoint = call.endpoint
    headers = {
        **call.headers,
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "Cache-Control": "no-store",
    }
    timeout = httpx.Timeout(call.timeout_secs)
    body = encode_json(call.body)  # once, whatever the number of attempts
    url = _parsed_url(endpoint.url)
    client = shared_client(_pool_named(call.pool), endpoint.url)
    async with AsyncExitStack() as stack:
        attempt = 0
        stale_retries = 0
        while True:
            attempt += 1
            async with AsyncExitStack() as attempt_stack:
                logger.debug("POST %s (attempt %d)", endpoint.url, attempt)
                watch = ConnectionWatch()
                try:
                    response = await attempt_stack.enter_async_context(
                        client.stream(
                            "POST",
                            url,
                            headers=headers,
                            content=body,
                            timeout=timeout,
                            extensions={"trace": watch},
                        )
                    )
                    if response.is_success:
                        # Keep this response open past the attempt block.
                        stack.push_async_exit(attempt_stack.pop_all())
                        break
                    body = await _read_bounded(response, DEFAULT_MAX_ERROR_BODY_BYTES)
                except STALE_CONNECTION_ERRORS as error:
                    if watch.opened_connection or stale_retries >= MAX_STALE_CONNECTION_RETRIES:
                        raise transport_error(endpoint, error, call.timeout_secs) from None
                    stale_retries += 1
                    attempt -= 1
                    logger.debug(
                        "%s: kept connection was closed (%r); retrying", endpoint.url, error
                    )
                    continue
                except httpx.HTTPError as error:
                    raise transport_error(endpoint, error, call.timeout_secs) from None
            status = response.status_code
            delay = _retry_delay(response, attempt)
            detail = error_detail(body, call.api_key)
            if delay is None or attempt >= call.max_attempts:
                raise status_error(
                    endpoint,
                    status,
                    detail,
                    attempts=attempt,
                    retry_after=parse_retry_after(response.headers.get("retry-after")),
                )
            logger.warning(
                "%s answered HTTP %d (attempt %d of %d); retrying in %.1f s",
                endpoint.label,
                status,
                attempt,
                call.max_attempts,
                delay,
            )
            await trio.sleep(delay)

        events = _iter_events(response, call)
        try:
            yield events
        except BaseException:
            await finish_stream(events)
            raise
        await release_stream(events)


async def _iter_events(
    response: httpx.Response, call: SseCall
) -> AsyncGenerator[ServerSentEvent, None]:
    endpoint = call.endpoint
    assert isinstance(response.stream, httpx.AsyncByteStream)  # AsyncClient responses are async
    response.stream = _CappedStream(response.stream, call.max_response_bytes, endpoint)
    source = EventSource(response)
    try:
        async for event in source.aiter_sse():
            yield event
    except SSEError:
        content_type = response.headers.get("content-type", "(none)")
        raise ProviderError(
            f"{endpoint.label} did not answer with an event stream (Content-Type "
            f"{content_type}). Check that `uri` in [{endpoint.config_table}] points at an "
            "API that supports streaming."
        ) from None
    except httpx.HTTPError as error:
        raise transport_error(endpoint, error, call.timeout_secs) from None
