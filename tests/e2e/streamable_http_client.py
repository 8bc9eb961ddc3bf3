"""A plain Streamable HTTP client for the gateway tests that need exact control.

ACP's Streamable HTTP draft (the ACP RFD "Streamable HTTP & WebSocket Transport") by hand,
with httpx and h11 (not our code): ``post`` one JSON-RPC message with the connection and
session headers, ``initialize`` a connection, and ``events`` opens an SSE stream (h11 over
its own TCP connection, read as it arrives) and yields ``(event id, message)`` pairs (SSE
comments as ``(None, {"comment": text})``) parsed by the rules of WHATWG HTML "Server-sent
events". The official SDKs' clients are tested
separately (tests/e2e/test_gateway_streamable_http.py).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import h11
import httpx
import trio

from tests.jsonrpc_peer import JsonDict

CONNECTION_ID: Final = "Acp-Connection-Id"
SESSION_ID: Final = "Acp-Session-Id"
RECEIVE_TIMEOUT: Final = 20.0


@dataclass
class HttpAcpClient:
    base_url: str
    token: str | None = None
    connection_id: str | None = None
    client: httpx.AsyncClient = field(
        default_factory=lambda: httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(30))
    )
    next_id: int = 0

    @property
    def url(self) -> str:
        return self.base_url + "/acp"

    def headers(self, session_id: str | None = None, **extra: str) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **extra}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.connection_id is not None:
            headers[CONNECTION_ID] = self.connection_id
        if session_id is not None:
            headers[SESSION_ID] = session_id
        return headers

    def request(self, method: str, params: JsonDict) -> JsonDict:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def post(self, message: JsonDict, session_id: str | None = None) -> httpx.Response:
        return await self.client.post(
            self.url, content=json.dumps(message), headers=self.headers(session_id)
        )

    async def initialize(self) -> JsonDict:
        response = await self.post(self.request("initialize", {"protocolVersion": 1}))
        assert response.status_code == 200, response.text
        self.connection_id = response.headers[CONNECTION_ID]
        body: JsonDict = response.json()
        return body

    @asynccontextmanager
    async def events(
        self, session_id: str | None = None, last_event_id: int | None = None
    ) -> AsyncIterator[SseReader]:
        """A GET for the connection's stream (or ``session_id``'s), over its own TCP
        connection read with h11 (the response is read as it arrives, event by event)."""
        headers = self.headers(session_id, Accept="text/event-stream")
        del headers["Content-Type"]
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        address = httpx.URL(self.base_url)
        port = address.port or 80
        headers["Host"] = f"{address.host}:{port}"
        stream = await trio.open_tcp_stream(address.host, port)
        async with stream:
            connection = h11.Connection(h11.CLIENT)
            request = h11.Request(method="GET", target="/acp", headers=list(headers.items()))
            await stream.send_all(connection.send(request) + connection.send(h11.EndOfMessage()))
            reader = SseReader(stream, connection)
            await reader.read_head()
            yield reader

    async def aclose(self) -> None:
        await self.client.aclose()


class SseReader:
    """The events of one open GET: ``status`` and ``body`` (of a refusal) once the head is
    read, then ``next``/``message``/``until``."""

    def __init__(self, stream: trio.SocketStream, connection: h11.Connection) -> None:
        self._stream = stream
        self._connection = connection
        self._buffer = b""
        self._lines: deque[str] = deque()
        self._ended = False
        self.status = 0
        self.body = b""

    async def _event(self) -> object:
        while True:
            event = self._connection.next_event()
            if event is not h11.NEED_DATA:
                return event
            self._connection.receive_data(await self._stream.receive_some(65536))

    async def read_head(self) -> None:
        with trio.fail_after(RECEIVE_TIMEOUT):
            head = await self._event()
            assert isinstance(head, h11.Response), head
            self.status = head.status_code
            if self.status != 200:
                while not isinstance(event := await self._event(), h11.EndOfMessage):
                    assert isinstance(event, h11.Data), event
                    self.body += event.data

    async def _line(self) -> str:
        while not self._lines:
            if self._ended:
                raise StopAsyncIteration
            event = await self._event()
            if isinstance(event, h11.Data):
                *complete, self._buffer = (self._buffer + event.data).split(b"\n")
                self._lines.extend(line.decode("utf-8").removesuffix("\r") for line in complete)
            else:
                self._ended = True
        return self._lines.popleft()

    async def next(self, within: float = RECEIVE_TIMEOUT) -> tuple[int | None, JsonDict]:
        """The next event or comment; ``StopAsyncIteration`` at the end of the stream."""
        event_id: int | None = None
        data: list[str] = []
        with trio.fail_after(within):
            while True:
                line = await self._line()
                if line == "":
                    if data:
                        message: JsonDict = json.loads("\n".join(data))
                        return event_id, message
                    continue
                if line.startswith(":"):
                    return None, {"comment": line[1:].strip()}
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "id":
                    event_id = int(value)
                elif name == "data":
                    data.append(value)

    async def message(self, within: float = RECEIVE_TIMEOUT) -> tuple[int, JsonDict]:
        """The next JSON-RPC message (keepalive comments skipped)."""
        while True:
            event_id, message = await self.next(within)
            if event_id is not None:
                return event_id, message

    async def until(self, predicate: Any, within: float = RECEIVE_TIMEOUT) -> list[JsonDict]:
        """Messages up to and including the first for which ``predicate`` is true."""
        seen: list[JsonDict] = []
        with trio.fail_after(within):
            while True:
                _, message = await self.message()
                seen.append(message)
                if predicate(message):
                    return seen
