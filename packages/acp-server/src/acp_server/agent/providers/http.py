"""HTTP plumbing shared by the real providers: API keys, retries, server-sent events, errors.

Libraries: ``httpx.AsyncClient`` because it runs natively under trio (httpcore has a trio
backend, so a trio cancel scope aborts a read at once and the connection is closed rather
than returned to a pool), and ``httpx-sse`` for the event-stream framing (multi-line
``data:``, comments, CR/LF variants) instead of hand parsing. One client per model call:
providers outlive trio runs in tests and hold no sockets between turns, and a model call
costs far more than a TLS handshake.

``timeout_secs`` (config) bounds connecting and every silence within a response, not the
whole response: an answer may stream for minutes, but a server that goes quiet for
``timeout_secs`` is given up on.

Every failure becomes a ``ProviderError`` whose message names what went wrong and what the
person can do about it. API keys never appear in logs or messages.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import httpx
import trio
from httpx_sse import EventSource, ServerSentEvent, SSEError

from acp_server.agent.providers.base import ProviderError

logger = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS: Final = 3
"""Attempts per model call for 429 and 5xx answers (the first try plus two retries)."""
DEFAULT_RETRY_BASE_DELAY_SECS: Final = 1.0
"""First backoff delay when the server gives no ``Retry-After``; doubles per attempt."""
DEFAULT_MAX_RETRY_DELAY_SECS: Final = 30.0
"""Longest wait we accept between attempts; a longer ``Retry-After`` ends the call at once."""
DEFAULT_MAX_ERROR_BODY_BYTES: Final = 16 * 1024
"""How much of an error response body is read to find the provider's explanation."""
DEFAULT_MAX_ERROR_DETAIL_CHARS: Final = 500
"""How much of the provider's explanation is quoted in an error message."""
DEFAULT_MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
"""Ceiling on one streamed response (also bounds a never-ending SSE line)."""
DEFAULT_MAX_TOOL_ARGUMENT_BYTES: Final = 4 * 1024 * 1024
"""Ceiling on one tool call's reassembled JSON arguments."""

MIN_REDACTED_KEY_CHARS: Final = 8
"""Keys at least this long are blanked out of quoted error bodies (shorter ones are not
real keys, and blanking them would garble the text)."""

RETRYABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504, 529})
"""Transient answers worth another attempt (529 is Anthropic's "overloaded")."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What an error message needs to know about where a call went.

    ``label`` names the service for a person ("OpenRouter", "the Ollama server at …");
    ``config_table`` is the config.toml table holding the provider's settings.
    """

    label: str
    url: str
    config_table: str
    key_env: str | None = None

    def key_hint(self) -> str:
        if self.key_env:
            return f"set {self.key_env} or api_key in [{self.config_table}] of config.toml"
        return f"set api_key in [{self.config_table}] of config.toml"


def provider_table(provider_type: str, alias: str) -> str:
    return f"providers.models.{provider_type}.{alias}"


def resolve_api_key(
    configured: str | None, env_var: str | None, *, required: bool, endpoint: Endpoint
) -> str | None:
    """The key from the config entry, else from ``env_var``; a missing required key raises."""
    if configured and configured.strip():
        return configured.strip()
    if env_var:
        from_env = os.environ.get(env_var, "").strip()
        if from_env:
            return from_env
    if required:
        raise ProviderError(f"No API key for {endpoint.label}: {endpoint.key_hint()}.")
    return None


def join_url(base: str, path: str) -> str:
    """``base`` with ``path`` appended unless the configured URI already ends with it."""
    base = base.rstrip("/")
    if base.endswith(path):
        return base
    return base + path


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def _error_detail(body: bytes, api_key: str | None) -> str:
    """The provider's own explanation from an error body, shortened and with the key removed."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict):
        error = decoded.get("error", decoded)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(error, str):
            text = error
        elif isinstance(decoded.get("message"), str):
            text = decoded["message"]
    if api_key and len(api_key) >= MIN_REDACTED_KEY_CHARS:
        text = text.replace(api_key, "[redacted]")
    text = " ".join(text.split())
    if len(text) > DEFAULT_MAX_ERROR_DETAIL_CHARS:
        text = text[:DEFAULT_MAX_ERROR_DETAIL_CHARS] + "…"
    return text


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


async def finish_stream(stream: AsyncIterator[Any]) -> None:
    """Abandon a partly read httpx stream so that none of its layers is left suspended.

    httpx and httpcore read a body through several nested async generators and do not
    close the inner ones when the outer one is closed; trio then finalizes each at garbage
    collection with a ResourceWarning. Resuming the stream inside an already cancelled
    scope makes the next socket read raise ``Cancelled`` at its first checkpoint, which
    unwinds (and so finishes) every layer and closes the connection; data h11 had already
    buffered is read and dropped on the way. A finished stream returns at once.
    """
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            while True:
                await stream.__anext__()
        except StopAsyncIteration:
            pass
        except Exception as error:  # abandoned on purpose: a late error must not mask the first
            logger.debug("ignored while abandoning a response stream: %r", error)


def status_error(
    endpoint: Endpoint, status: int, detail: str, *, attempts: int, retry_after: float | None
) -> ProviderError:
    """The message for a non-success HTTP answer we will not (or no longer) retry."""
    said = f": {detail}" if detail else ""
    if status in (401, 403):
        message = (
            f"{endpoint.label} rejected the API key (HTTP {status}){said}. "
            f"Check your key: {endpoint.key_hint()}."
        )
    elif status == 429:
        if retry_after is not None and retry_after > DEFAULT_MAX_RETRY_DELAY_SECS:
            message = (
                f"{endpoint.label} is rate limiting requests (HTTP 429) and asks to wait "
                f"{retry_after:.0f} s{said}. Try again later, or check your plan's limits."
            )
        else:
            message = (
                f"{endpoint.label} is rate limiting requests (HTTP 429) after {attempts} "
                f"attempt(s){said}. Wait a minute and try again, or check your plan's limits."
            )
    elif status >= 500:
        message = (
            f"{endpoint.label} failed with a server error (HTTP {status}) on {attempts} "
            f"attempt(s){said}. The service may be down or overloaded; try again later."
        )
    elif status == 404:
        message = (
            f"{endpoint.label} answered HTTP 404 for {endpoint.url}{said}. Check `uri` and "
            f"`model` in [{endpoint.config_table}]."
        )
    else:
        message = (
            f"{endpoint.label} refused the request (HTTP {status}){said}. Check `model` and "
            f"the other settings in [{endpoint.config_table}]."
        )
    return ProviderError(message, status=status)


def transport_error(
    endpoint: Endpoint, error: httpx.HTTPError, timeout_secs: float
) -> ProviderError:
    """The message for a failure below HTTP: refused, timed out, reset, cut short."""
    if isinstance(error, httpx.ConnectTimeout):
        return ProviderError(
            f"Could not connect to {endpoint.label} at {endpoint.url} within {timeout_secs:g} s. "
            f"Check your network, or raise timeout_secs in [{endpoint.config_table}]."
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


def stream_cut_error(endpoint: Endpoint) -> ProviderError:
    return ProviderError(
        f"The connection to {endpoint.label} ended before the response was complete. Try again."
    )


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


@dataclass(frozen=True, slots=True)
class SseCall:
    """One streaming POST: where, with what, and how patiently."""

    endpoint: Endpoint
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    timeout_secs: float
    api_key: str | None = None  # only to redact it from quoted error bodies
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


def _retry_delay(response: httpx.Response, attempt: int) -> float | None:
    """Seconds before the next attempt, or None when the call should not be retried."""
    if response.status_code not in RETRYABLE_STATUSES:
        return None
    requested = parse_retry_after(response.headers.get("retry-after"))
    if requested is not None:
        return requested if requested <= DEFAULT_MAX_RETRY_DELAY_SECS else None
    return min(DEFAULT_RETRY_BASE_DELAY_SECS * 2.0 ** (attempt - 1), DEFAULT_MAX_RETRY_DELAY_SECS)


@asynccontextmanager
async def open_sse(call: SseCall) -> AsyncIterator[AsyncIterator[ServerSentEvent]]:
    """POST ``call.body`` and yield the response's server-sent events.

    429 and 5xx answers are retried up to ``call.max_attempts`` times with exponential
    backoff, honouring ``Retry-After`` up to ``DEFAULT_MAX_RETRY_DELAY_SECS``. Retries only
    happen before any event was delivered, so nothing is ever streamed twice. Leaving the
    block (normally, by error or by trio cancellation) closes the connection.
    """
    endpoint = call.endpoint
    headers = {
        **call.headers,
        "Accept": "text/event-stream",
        "Cache-Control": "no-store",
    }
    timeout = httpx.Timeout(call.timeout_secs)
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        )
        attempt = 0
        while True:
            attempt += 1
            async with AsyncExitStack() as attempt_stack:
                logger.debug("POST %s (attempt %d)", endpoint.url, attempt)
                try:
                    response = await attempt_stack.enter_async_context(
                        client.stream("POST", endpoint.url, headers=headers, json=call.body)
                    )
                    if response.is_success:
                        # Keep this response open past the attempt block.
                        stack.push_async_exit(attempt_stack.pop_all())
                        break
                    body = await _read_bounded(response, DEFAULT_MAX_ERROR_BODY_BYTES)
                except httpx.HTTPError as error:
                    raise transport_error(endpoint, error, call.timeout_secs) from None
            status = response.status_code
            delay = _retry_delay(response, attempt)
            detail = _error_detail(body, call.api_key)
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
        finally:
            await finish_stream(events)


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


def decode_event_json(event: ServerSentEvent, endpoint: Endpoint) -> dict[str, Any]:
    """An event's ``data`` as a JSON object, or a ProviderError saying the stream is garbled."""
    try:
        decoded = json.loads(event.data)
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict):
        raise ProviderError(
            f"{endpoint.label} sent an event that is not a JSON object "
            f"({event.data[:80]!r}); the response was abandoned."
        )
    return decoded


def parse_tool_arguments(raw: str, tool_name: str, endpoint: Endpoint) -> dict[str, Any]:
    """A tool call's reassembled arguments; an empty string means no arguments."""
    if not raw.strip():
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        decoded = None
    if not isinstance(decoded, dict):
        raise ProviderError(
            f"The model behind {endpoint.label} sent arguments for tool `{tool_name}` that are "
            "not a JSON object. Try again, or use a model with reliable tool calling."
        )
    return decoded


class ArgumentBuffer:
    """Collects a streamed tool call's JSON fragments up to ``DEFAULT_MAX_TOOL_ARGUMENT_BYTES``."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._endpoint = endpoint

    def add(self, fragment: str) -> None:
        self._size += len(fragment)
        if self._size > DEFAULT_MAX_TOOL_ARGUMENT_BYTES:
            raise ProviderError(
                f"The model behind {self._endpoint.label} streamed tool arguments larger than "
                f"{DEFAULT_MAX_TOOL_ARGUMENT_BYTES // (1024 * 1024)} MiB; the response was abandoned."
            )
        self._parts.append(fragment)

    def text(self) -> str:
        return "".join(self._parts)


def int_field(mapping: Mapping[str, Any] | None, key: str) -> int:
    """A non-negative integer usage figure, 0 when absent or malformed."""
    if not mapping:
        return 0
    value = mapping.get(key)
    return value if isinstance(value, int) and value >= 0 else 0
