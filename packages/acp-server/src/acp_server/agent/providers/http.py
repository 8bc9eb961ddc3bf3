"""What the real providers share besides the connection: API keys, addresses, retry
timing, error messages, streamed tool-call arguments.

The HTTP exchange itself (one POST answered with server-sent events, over the provider's
long-lived connection pool) is ``acp_server.agent.providers.sse``, which imports httpx:
providers import it when they first stream, so a server that only opens sessions never
loads the HTTP stack (``tests/e2e/test_startup_imports.py``).

``timeout_secs`` (config) bounds connecting and every silence within a response, not the
whole response: an answer may stream for minutes, but a server that goes quiet for
``timeout_secs`` is given up on.

Every failure becomes a ``ProviderError`` whose message names what went wrong and what the
person can do about it. API keys never appear in logs or messages.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import msgspec

from acp_server.agent.providers.base import ProviderError

if TYPE_CHECKING:
    from httpx_sse import ServerSentEvent

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

# msgspec rather than json: a streamed answer decodes one JSON object per chunk, and a
# request encodes the whole conversation; msgspec does both several times faster.
_decode_json = msgspec.json.Decoder().decode
encode_json = msgspec.json.Encoder().encode


class Endpoint(msgspec.Struct, frozen=True):
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
    import email.utils  # an HTTP-date Retry-After is rare: not loaded at start-up

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def error_detail(body: bytes, api_key: str | None) -> str:
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


def stream_cut_error(endpoint: Endpoint) -> ProviderError:
    return ProviderError(
        f"The connection to {endpoint.label} ended before the response was complete. Try again."
    )


class SseCall(msgspec.Struct, frozen=True):
    """One streaming POST: where, with what, how patiently, and over which pool."""

    endpoint: Endpoint
    pool: str
    """The connection pool's name: one per configured provider (``provider <type.alias>``)."""
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    timeout_secs: float
    api_key: str | None = None  # only to redact it from quoted error bodies
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES


def decode_event_json(event: ServerSentEvent, endpoint: Endpoint) -> dict[str, Any]:
    """An event's ``data`` as a JSON object, or a ProviderError saying the stream is garbled."""
    try:
        decoded = _decode_json(event.data)
    except ValueError:  # msgspec.DecodeError, and ValidationError for out-of-range numbers
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
