"""``MockLLM``: tests/e2e/fake_llm.py's scripted model server without a socket.

The same ``Reply`` scripts answer through an ``httpx.MockTransport`` that every HTTP
client of the block is built on (``acp_server.agent.io.http_clients.http_clients(transport=)``),
so a provider runs its real code (request building, retries, SSE framing, error messages)
and only the network is replaced. What a socket would have done is done here the way
httpx reports it:

- ``cut``: the body ends early with ``httpx.RemoteProtocolError``, as httpcore raises for
  a connection closed mid-body;
- ``hang`` / ``silent``: nothing more until the request's own read timeout, then
  ``httpx.ReadTimeout`` (httpcore's timeout, taken from the request as it was sent);
- ``drop``: ``httpx.RemoteProtocolError`` before any answer, on a new connection;
- a client that closes a response before its end (a cancelled turn, a timeout) counts in
  ``closed_by_client``, as the server saw the connection close.

One end-to-end case over a real loopback socket stays in tests/e2e/test_provider_loopback.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final

import httpx
import trio

from acp_server.agent.io.http_clients import http_clients
from tests.e2e.fake_llm import RecordedRequest, Reply, json_error

BASE_URL: Final = "http://model.test"
"""Where the mocked model API answers (never resolved: no request leaves the process)."""


@dataclass
class MockLLM:
    """Answer ``replies`` in order (then ``responder``, then HTTP 500 "no scripted reply")."""

    replies: deque[Reply] = field(default_factory=deque)
    responder: Callable[[RecordedRequest], Reply] | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    connections: int = 0
    """Connections opened so far (one per request: every reply says ``Connection: close``)."""
    closed_by_client: int = 0
    """Responses the client closed while they were still being answered."""
    _client_went_away: trio.Event = field(default_factory=trio.Event)

    @property
    def base_url(self) -> str:
        return BASE_URL

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def wait_client_gone(self) -> None:
        """Return once a client closed a response that was still being answered."""
        await self._client_went_away.wait()

    def note_client_gone(self) -> None:
        self.closed_by_client += 1
        self._client_went_away.set()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        if self.replies:
            return self.replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return json_error(500, "mock_llm: no scripted reply left for this request")

    async def handle(self, request: httpx.Request) -> httpx.Response:
        """The ``httpx.MockTransport`` handler: record the request, answer its reply."""
        trace = request.extensions.get("trace")
        if trace is not None:  # what httpcore reports when it opens a connection
            await trace("connection.connect_tcp.started", {})
        self.connections += 1
        body = await request.aread()
        headers = {name.lower(): value for name, value in request.headers.items()}
        recorded = RecordedRequest(request.method, request.url.raw_path.decode(), headers, body)
        self.requests.append(recorded)
        reply = self._next_reply(recorded)
        read_timeout = request.extensions.get("timeout", {}).get("read")
        if reply.ending == "drop":
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        if reply.ending == "silent":
            try:
                await _silence(read_timeout, request)
            finally:
                self.note_client_gone()
        return httpx.Response(
            reply.status,
            headers=[("Content-Type", reply.content_type), *reply.headers],
            stream=_ScriptedBody(self, reply, read_timeout, request),
        )


async def _silence(read_timeout: float | None, request: httpx.Request) -> None:
    """Nothing arrives: httpcore gives up after the request's read timeout."""
    if read_timeout is None:
        await trio.sleep_forever()
    await trio.sleep(read_timeout)
    raise httpx.ReadTimeout("timed out", request=request)


class _ScriptedBody(httpx.AsyncByteStream):
    def __init__(
        self, llm: MockLLM, reply: Reply, read_timeout: float | None, request: httpx.Request
    ) -> None:
        self._llm = llm
        self._reply = reply
        self._read_timeout = read_timeout
        self._request = request
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._reply.chunks:
            await trio.lowlevel.checkpoint()  # a network read is a checkpoint too
            yield chunk
        if self._reply.ending == "cut":
            self._ended = True
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body "
                "(incomplete chunked read)",
                request=self._request,
            )
        if self._reply.ending == "hang":
            await _silence(self._read_timeout, self._request)
        self._ended = True

    async def aclose(self) -> None:
        if not self._ended:
            self._ended = True
            self._llm.note_client_gone()


@asynccontextmanager
async def mock_llm(*replies: Reply) -> AsyncIterator[MockLLM]:
    """A ``MockLLM`` answering every HTTP client built in the block."""
    llm = MockLLM(replies=deque(replies))
    async with http_clients(transport=httpx.MockTransport(llm.handle)):
        yield llm
