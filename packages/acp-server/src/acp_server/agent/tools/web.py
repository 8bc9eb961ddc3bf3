"""``web_fetch`` (a page's text) and ``http_request`` (one HTTP exchange, for APIs).

Both connect only where ``web_guard`` allows (public addresses unless ``[web]
allow_private_hosts``), through ``httpx`` as the model providers do (under trio, so a
cancelled turn aborts the request at once). Proxy variables of the environment are not
used: the address that was checked is the address connected to. Limits are named
below; a body over its limit is cut with a notice. Approval follows ZeroClaw's
defaults: ``web_fetch`` is in the default ``auto_approve`` list, ``http_request`` asks.

Requests go through two long-lived pools (agent/io/http_clients.py): plain http keeps its
connections alive; https does not, because a pool is keyed by the address connected to
and a kept connection was verified for the name it was opened for, not the next one.
httpx, the URL checks and the HTML reader are imported on the first call, not when a
session builds its tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, get_args

import trio
from msgspec import Meta

from acp_server.agent.io.http_clients import PoolSpec, finish_stream, shared_client
from acp_server.agent.tools._titles import code_span, one_line, target_title
from acp_server.agent.tools.arguments import SchemaOf, ToolArguments, one_of, parse_arguments
from acp_server.agent.tools.base import (
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.config.values import WebConfig

if TYPE_CHECKING:
    import httpx

    from acp_server.agent.tools.web_guard import WebTarget

DEFAULT_WEB_FETCH_MAX_BYTES: Final = 500_000
"""Most bytes of a page web_fetch reads (ZeroClaw's 500 KB)."""
DEFAULT_HTTP_REQUEST_MAX_BYTES: Final = 1_000_000
"""Most bytes of a response body http_request reads (ZeroClaw's 1 MB)."""
DEFAULT_HTTP_REQUEST_MAX_BODY_BYTES: Final = 1_000_000
"""Largest request body http_request sends."""
DEFAULT_WEB_TIMEOUT_SECS: Final = 30.0
"""Longest a web tool call may take, redirects included (ZeroClaw's 30 s)."""
DEFAULT_MAX_REDIRECTS: Final = 5
"""Redirects web_fetch follows, each checked like the first URL."""
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
HTTP_METHODS: Final = get_args(HttpMethod)
REFUSED_HEADERS: Final = frozenset(
    {"host", "content-length", "transfer-encoding", "connection", "upgrade", "proxy-authorization"}
)
"""Headers the model may not set: the client frames the request and names the host."""
USER_AGENT: Final = "zeroclaw-acp (web tools)"
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_TEXT_TYPES: Final = ("text/", "application/json", "application/xml", "application/xhtml")
WEB_PLAIN_POOL: Final = PoolSpec("web tools (http)", trust_env=False, max_connections=16)
WEB_TLS_POOL: Final = PoolSpec(
    "web tools (https)", trust_env=False, max_connections=16, max_idle_connections=0
)
"""No idle https connections: the next request may name another host at the same address."""


async def _exchange(
    target: WebTarget,
    method: str,
    headers: Mapping[str, str],
    body: bytes | None,
    limit: int,
) -> tuple[httpx.Response, bytes, bool]:
    """One request to the checked address: (response, body up to ``limit``, cut short)."""
    sent = {"User-Agent": USER_AGENT, **headers, "Host": target.host_header}
    pool = WEB_TLS_POOL if target.connect_url.scheme == "https" else WEB_PLAIN_POOL
    client = shared_client(pool, target.connect_url)
    async with client.stream(
        method,
        target.connect_url,
        headers=sent,
        content=body,
        timeout=DEFAULT_WEB_TIMEOUT_SECS,
        extensions=target.extensions,
    ) as response:
        data = bytearray()
        truncated = False
        chunks = response.aiter_bytes()
        try:
            async for chunk in chunks:
                data += chunk
                if len(data) > limit:
                    del data[limit:]
                    truncated = True
                    break
        finally:
            await finish_stream(chunks)
        return response, bytes(data), truncated


async def _request(
    web: WebConfig,
    url: httpx.URL,
    method: str,
    headers: Mapping[str, str],
    body: bytes | None,
    limit: int,
    *,
    follow: bool,
) -> tuple[httpx.URL, httpx.Response, bytes, bool]:
    import httpx

    from acp_server.agent.tools.web_guard import parse_web_url, resolve_target

    hops = 0
    with trio.move_on_after(DEFAULT_WEB_TIMEOUT_SECS) as deadline:
        while True:
            target = await resolve_target(url, allow_private=web.allow_private_hosts)
            try:
                response, data, truncated = await _exchange(target, method, headers, body, limit)
            except httpx.HTTPError as exc:
                raise ToolError(f"{method} {url} failed: {exc}") from None
            location = response.headers.get("location")
            if not follow or response.status_code not in _REDIRECTS or not location:
                return url, response, data, truncated
            hops += 1
            if hops > DEFAULT_MAX_REDIRECTS:
                raise ToolError(f"{url}: more than {DEFAULT_MAX_REDIRECTS} redirects")
            try:
                url = parse_web_url(str(url.join(location)))
            except RefusedCall as refused:  # the server's hop, not the call's argument: it ran
                raise ToolError(str(refused)) from None
    assert deadline.cancelled_caught
    raise ToolError(f"{method} {url}: no answer within {DEFAULT_WEB_TIMEOUT_SECS:g} s")


def _decode(response: httpx.Response, data: bytes) -> str:
    charset = response.charset_encoding or "utf-8"
    try:
        return data.decode(charset, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _cut_notice(limit: int) -> str:
    return f"\n\n[truncated: the body is larger than {limit} bytes]"


WebUrl = Annotated[str, Meta(min_length=1, description="The http(s) URL.")]


class WebFetchArguments(ToolArguments):
    url: WebUrl


class WebFetchTool:
    definition: Final = ToolDefinition(
        name="web_fetch",
        kind="other",
        title=target_title("Fetch", "url"),
        arguments=WebFetchArguments,
    )
    name = definition.name
    description = (
        "Fetch a web page (http or https GET) and return its text; HTML is converted to "
        "Markdown (headings, lists, tables, code, links). For documentation and API "
        "reference pages."
    )
    side_effects = False
    parameters = SchemaOf(WebFetchArguments)

    def __init__(self, web: WebConfig | None = None) -> None:
        self.web = web or WebConfig()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from acp_server.agent.tools._html import html_to_markdown
        from acp_server.agent.tools.search import run_stoppable
        from acp_server.agent.tools.web_guard import parse_web_url

        url = parse_web_url(parse_arguments(WebFetchArguments, arguments).url)
        limit = DEFAULT_WEB_FETCH_MAX_BYTES
        accept = {"Accept": "text/html, text/plain;q=0.9, */*;q=0.5"}
        final, response, data, truncated = await _request(
            self.web, url, "GET", accept, None, limit, follow=True
        )
        if not response.is_success:
            raise ToolError(f"GET {final} answered HTTP {response.status_code}")
        content_type = response.headers.get("content-type", "").lower()
        if content_type and not content_type.startswith(_TEXT_TYPES):
            raise ToolError(f"{final} is not text ({content_type.split(';')[0]})")
        text = _decode(response, data)
        if "html" in content_type or (not content_type and "<html" in text[:1024].lower()):
            # CPU work (up to seconds for a hostile page): a worker thread, stopped on cancel.
            text = await run_stoppable(ctx, partial(html_to_markdown, text, str(final)))
        if truncated:
            text += _cut_notice(limit)
        return ToolOutput(text if text.strip() else f"{final}: the page has no text")


def _request_title(arguments: Mapping[str, Any]) -> str | None:
    """``POST `https://api.example.com/items```: the method and the URL."""
    url = arguments.get("url")
    if not isinstance(url, str) or not url.strip():
        return None
    method = arguments.get("method")
    verb = method.upper() if isinstance(method, str) and method.upper() in HTTP_METHODS else "GET"
    return f"{verb} {code_span(one_line(url))}"


class HttpRequestArguments(ToolArguments):
    url: WebUrl
    method: Annotated[HttpMethod, one_of(HttpMethod)] | None = "GET"
    headers: Annotated[dict[str, str], Meta(description="Request headers.")] | None = None
    body: Annotated[str, Meta(description="Request body (text).")] | None = None

    @classmethod
    def canonical(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        """The method in capitals: ``post`` is taken for ``POST``, as it always was."""
        method = arguments.get("method")
        if isinstance(method, str) and method not in HTTP_METHODS:
            return {**arguments, "method": method.upper()}
        return arguments


class HttpRequestTool:
    definition: Final = ToolDefinition(
        name="http_request", kind="other", title=_request_title, arguments=HttpRequestArguments
    )
    name = definition.name
    description = (
        "Send one HTTP request (for APIs) and return the status, the response headers and "
        "the body. Redirects are returned as they are, not followed."
    )
    side_effects = True
    parameters = SchemaOf(HttpRequestArguments)

    def __init__(self, web: WebConfig | None = None) -> None:
        self.web = web or WebConfig()

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from acp_server.agent.tools.web_guard import parse_web_url

        given = parse_arguments(HttpRequestArguments, arguments)
        url = parse_web_url(given.url)
        method = given.method or "GET"
        headers = _request_headers(given.headers or {})
        body = given.body.encode("utf-8") if given.body is not None else None
        if body is not None and len(body) > DEFAULT_HTTP_REQUEST_MAX_BODY_BYTES:
            raise RefusedCall(f"'body' is larger than {DEFAULT_HTTP_REQUEST_MAX_BODY_BYTES} bytes")
        limit = DEFAULT_HTTP_REQUEST_MAX_BYTES
        _, response, data, truncated = await _request(
            self.web, url, method, headers, body, limit, follow=False
        )
        lines = [f"Status: {response.status_code} {response.reason_phrase}".rstrip(), "Headers:"]
        lines += [f"{name}: {value}" for name, value in response.headers.items()]
        text = "\n".join(lines) + "\n\nBody:\n" + _decode(response, data)
        if truncated:
            text += _cut_notice(limit)
        return ToolOutput(text, ok=response.status_code < 400)


def _request_headers(value: dict[str, str]) -> dict[str, str]:
    refused = sorted(key for key in value if key.strip().lower() in REFUSED_HEADERS)
    if refused:
        raise RefusedCall(f"Invalid 'headers': {', '.join(refused)} cannot be set")
    return dict(value)
