"""The official Python ACP SDK's Streamable HTTP client (``acp.http``) driving a gateway.

asyncio code, run from the trio tests on a worker thread (``asyncio.run``).
``python_sdk_flow`` is one IDE's whole session: initialize, session/new, a prompt whose
shell call asks for permission (allowed once) with its updates streamed, a slow prompt
cancelled after its first chunk, then a second connection (its own HTTP client, so its
own cookies) that loads the session and sees its history replayed.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, cast

import acp
import httpx
from acp import schema as acp_schema
from acp.http import create_http_stream

FIRST_PROMPT: Final = 'Streaming over HTTP\n/tool shell {"command": "ls"}'
FIRST_TEXT: Final = "Streaming over HTTP\n\nshell returned: (no output)"


def allow_once(options: list[Any]) -> Any:
    """The answer a user gives by choosing the "allow once" option."""
    allow = next(option for option in options if option.kind == "allow_once")
    return acp_schema.RequestPermissionResponse(
        outcome=acp_schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
    )


class RecordingClient:
    """An ``acp`` SDK client: records updates (and says when one arrives), allows each
    permission once."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.permissions: list[str] = []
        self.changed = asyncio.Event()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **kwargs: Any
    ) -> Any:
        self.permissions.append(tool_call.title or "")
        return allow_once(options)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None

    def of_kind(self, kind: str) -> list[Any]:
        return [update for update in self.updates if type(update).__name__ == kind]

    def text(self) -> str:
        return "".join(update.content.text for update in self.of_kind("AgentMessageChunk"))

    async def wait_for(self, condition: Any) -> None:
        while not condition():
            self.changed.clear()
            await self.changed.wait()


def http_client(cookies: dict[str, str] | None = None) -> httpx.AsyncClient:
    """What the SDK's own default is, on HTTP/1.1 (``h2`` is not installed): no read
    timeout (the SSE streams are long-lived), and a cookie jar."""
    return httpx.AsyncClient(timeout=httpx.Timeout(None), trust_env=False, cookies=cookies)


async def sdk_connection(
    client: RecordingClient, url: str, token: str | None, http: httpx.AsyncClient
) -> tuple[Any, Any]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    transport = create_http_stream(url, client=http, headers=headers)
    connection = acp.connect_to_agent(cast(Any, client), transport)
    init = await connection.initialize(
        protocol_version=1,
        client_capabilities=acp_schema.ClientCapabilities(),
        client_info=acp_schema.Implementation(name="sdk-http-test", version="1"),
    )
    return connection, init


async def python_sdk_flow(
    url: str,
    token: str | None,
    cwd: str,
    first_http: httpx.AsyncClient,
    second_http: httpx.AsyncClient,
) -> dict[str, Any]:
    """One session, then its load on a second connection (see the module docstring)."""
    first = RecordingClient()
    connection, init = await sdk_connection(first, url, token, first_http)
    session = await connection.new_session(cwd=cwd, mcp_servers=[])
    answered = await connection.prompt(
        session_id=session.session_id, prompt=[acp.text_block(FIRST_PROMPT)]
    )
    first_text, streamed = first.text(), len(first.updates)
    slow = asyncio.ensure_future(
        connection.prompt(session_id=session.session_id, prompt=[acp.text_block("slow " * 300)])
    )
    await first.wait_for(lambda: len(first.updates) > streamed)
    await connection.cancel(session_id=session.session_id)
    cancelled = await slow
    cookies = dict(first_http.cookies)
    await connection.close()

    second = RecordingClient()
    reconnected, _ = await sdk_connection(second, url, token, second_http)
    await reconnected.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[])
    # The load's answer and the history come on two streams: wait for the history's end.
    await asyncio.wait_for(second.wait_for(lambda: second.text() == first_text), 10)
    second_cookies = dict(second_http.cookies)
    await reconnected.close()
    return {
        "init": init,
        "stop_reason": answered.stop_reason,
        "first_text": first_text,
        "permissions": first.permissions,
        "tool_statuses": [update.status for update in first.of_kind("ToolCallProgress")],
        "cancelled": cancelled.stop_reason,
        "replayed_prompt": [update.content.text for update in second.of_kind("UserMessageChunk")],
        "cookies": cookies,
        "second_cookies": second_cookies,
    }


def run_python_sdk_flow(
    url: str, token: str | None, cwd: str, second_cookies: dict[str, str] | None = None
) -> dict[str, Any]:
    """``python_sdk_flow`` on a fresh asyncio loop (call it on a worker thread)."""

    async def flow() -> dict[str, Any]:
        async with http_client() as first, http_client(second_cookies) as second:
            return await asyncio.wait_for(python_sdk_flow(url, token, cwd, first, second), 60)

    return asyncio.run(flow())
