"""A scripted model server on 127.0.0.1 speaking the providers' real streaming wire formats.

``FakeLLM`` is a small trio + h11 HTTP/1.1 server. Each incoming request is recorded and
answered with the next scripted ``Reply`` (or by ``responder``): a status line, headers and
body pieces written one by one, so a client sees the same framing, fragmentation and
failure modes as against OpenAI, OpenRouter or Anthropic: server-sent events, error
bodies with ``Retry-After``, a stream cut mid-body, a server that goes silent.

Builders below produce the bodies: ``openai_*`` for Chat Completions chunks (OpenAI,
OpenRouter, OpenAI-compatible servers), ``anthropic_*`` for Messages API events.
Reused by the end-to-end tests, which point a real ``zeroclaw acp`` at ``base_url``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Literal

import h11
import trio

from acp_server.agent.providers.base import ModelRequest, Provider, ProviderError, ProviderEvent
from acp_server.model import ChatMessage

DEFAULT_MAX_REQUEST_BYTES: Final = 16 * 1024 * 1024
RECEIVE_CHUNK_BYTES: Final = 64 * 1024

Ending = Literal["complete", "cut", "hang", "silent", "drop"]


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response.

    ``ending``: ``complete`` finishes the body properly; ``cut`` drops the connection
    after the pieces (mid chunked body, as a crashed upstream does); ``hang`` sends the
    pieces and then nothing until the client goes away; ``drop`` closes the connection
    without answering (a server closing a kept-alive connection as the request arrives).
    """

    status: int = 200
    chunks: Sequence[bytes] = ()
    content_type: str = "text/event-stream"
    headers: Sequence[tuple[str, str]] = ()
    ending: Ending = "complete"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeLLM:
    """Serve ``replies`` in order (then ``responder``, then HTTP 500 "no scripted reply")."""

    replies: deque[Reply] = field(default_factory=deque)
    responder: Callable[[RecordedRequest], Reply] | None = None
    requests: list[RecordedRequest] = field(default_factory=list)
    port: int = 0
    keep_alive: bool = False
    """Keep a connection open after a complete reply and read the next request from it (as
    real services do); otherwise every reply says ``Connection: close``."""
    connections: int = 0
    """Connections accepted so far."""
    open_connections: int = 0
    """Connections accepted and not yet closed (by either side)."""
    closed_by_client: int = 0
    """Connections the client closed while we were still answering (``hang``, ``silent``)."""
    _client_went_away: trio.Event = field(default_factory=trio.Event)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def wait_client_gone(self) -> None:
        """Return once a client closed a connection we were still streaming on."""
        await self._client_went_away.wait()

    async def start(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(partial(trio.serve_tcp, self._serve, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]

    def _next_reply(self, request: RecordedRequest) -> Reply:
        if self.replies:
            return self.replies.popleft()
        if self.responder is not None:
            return self.responder(request)
        return json_error(500, "fake_llm: no scripted reply left for this request")

    async def _serve(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=DEFAULT_MAX_REQUEST_BYTES)
        self.connections += 1
        self.open_connections += 1
        try:
            while True:
                request = await self._read_request(stream, connection)
                if request is None:
                    return
                self.requests.append(request)
                reply = self._next_reply(request)
                if reply.ending == "drop":
                    return
                await self._send_reply(stream, connection, reply)
                if not self.keep_alive or connection.our_state is not h11.DONE:
                    return
                connection.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            self._note_client_gone()
        finally:
            self.open_connections -= 1
            await stream.aclose()

    async def _wait_for_client_close(self, stream: trio.SocketStream) -> None:
        """Send nothing more until the client closes its end."""
        while await stream.receive_some(RECEIVE_CHUNK_BYTES):
            pass
        self._note_client_gone()

    def _note_client_gone(self) -> None:
        self.closed_by_client += 1
        self._client_went_away.set()

    async def _read_request(
        self, stream: trio.SocketStream, connection: h11.Connection
    ) -> RecordedRequest | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(RECEIVE_CHUNK_BYTES)
                if not data:
                    return None
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                headers = {name.decode().lower(): value.decode() for name, value in head.headers}
                return RecordedRequest(
                    head.method.decode(), head.target.decode(), headers, bytes(body)
                )
            else:
                return None

    async def _send_reply(
        self, stream: trio.SocketStream, connection: h11.Connection, reply: Reply
    ) -> None:
        if reply.ending == "silent":
            await self._wait_for_client_close(stream)
            return
        headers = [("Content-Type", reply.content_type), *reply.headers]
        if not self.keep_alive:
            headers.append(("Connection", "close"))
        if reply.ending == "complete":
            total = sum(len(chunk) for chunk in reply.chunks)
            headers.append(("Content-Length", str(total)))
        else:
            headers.append(("Transfer-Encoding", "chunked"))
        await stream.send_all(
            connection.send(h11.Response(status_code=reply.status, headers=headers))
        )
        for chunk in reply.chunks:
            await stream.send_all(connection.send(h11.Data(data=chunk)))
        if reply.ending == "complete":
            await stream.send_all(connection.send(h11.EndOfMessage()))
        elif reply.ending == "hang":
            await self._wait_for_client_close(stream)
        # "cut": return without EndOfMessage; the finally closes the socket mid-body.


@asynccontextmanager
async def serve_fake_llm(*replies: Reply, keep_alive: bool = False) -> AsyncIterator[FakeLLM]:
    """Run a ``FakeLLM`` for the duration of the block."""
    server = FakeLLM(replies=deque(replies), keep_alive=keep_alive)
    async with trio.open_nursery() as nursery:
        await server.start(nursery)
        yield server
        nursery.cancel_scope.cancel()


HELLO: Final = ModelRequest(
    system_prompt="You are terse.", messages=[ChatMessage(role="user", content="Say hello")]
)


async def collect(provider: Provider, request: ModelRequest = HELLO) -> list[ProviderEvent]:
    return [event async for event in provider.stream(request)]


async def expect_error(provider: Provider, request: ModelRequest = HELLO) -> ProviderError:
    """The ``ProviderError`` streaming ``request`` ends with (fails the test if none)."""
    try:
        await collect(provider, request)
    except ProviderError as error:
        return error
    raise AssertionError("the provider streamed to the end without an error")


def sse(data: Any, *, event: str | None = None) -> bytes:
    """One server-sent event; dicts are JSON-encoded the way the APIs do it."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()


def json_error(
    status: int, message: str, *, headers: Sequence[tuple[str, str]] = (), kind: str = "error"
) -> Reply:
    """An API error body as both OpenAI and Anthropic shape it (``error.message``)."""
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return Reply(
        status=status, chunks=(body,), content_type="application/json", headers=tuple(headers)
    )


# --- Chat Completions (OpenAI, OpenRouter, OpenAI-compatible) -------------------------------


def openai_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``delta=None`` with usage is the include_usage tail."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def openai_usage(prompt: int, completion: int, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def openai_stream(chunks: Iterable[dict[str, Any]], *, done: bool = True) -> tuple[bytes, ...]:
    # OpenRouter interleaves SSE comments while the model thinks; clients must skip them.
    events = [b": OPENROUTER PROCESSING\n\n"]
    events.extend(sse(chunk) for chunk in chunks)
    if done:
        events.append(sse("[DONE]"))
    return tuple(events)


def openai_text_reply(
    *pieces: str,
    reasoning: Sequence[str] = (),
    reasoning_field: str = "reasoning",
    usage: tuple[int, int] = (12, 5),
) -> Reply:
    chunks = [openai_chunk({"role": "assistant", "content": ""})]
    chunks += [openai_chunk({reasoning_field: thought}) for thought in reasoning]
    chunks += [openai_chunk({"content": piece}) for piece in pieces]
    chunks.append(openai_chunk({}, finish_reason="stop"))
    chunks.append(openai_chunk(usage=openai_usage(*usage)))
    return Reply(chunks=openai_stream(chunks))


def split_evenly(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // parts))
    return [text[start : start + size] for start in range(0, len(text), size)]


def openai_tool_reply(
    calls: Sequence[tuple[str, str, dict[str, Any]]], *, text: str = "", fragments: int = 3
) -> Reply:
    """Tool calls ``(id, name, arguments)`` streamed as OpenAI does: id and name in the
    first fragment, the JSON arguments split across several more, calls interleaved."""
    chunks = [openai_chunk({"role": "assistant", "content": text or None})]
    split = [split_evenly(json.dumps(arguments), fragments) for _, _, arguments in calls]
    for index, (call_id, name, _) in enumerate(calls):
        chunks.append(
            openai_chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
    for round_ in range(max(len(parts) for parts in split)):
        for index, parts in enumerate(split):
            if round_ < len(parts):
                fragment = {"index": index, "function": {"arguments": parts[round_]}}
                chunks.append(openai_chunk({"tool_calls": [fragment]}))
    chunks.append(openai_chunk({}, finish_reason="tool_calls"))
    chunks.append(openai_chunk(usage=openai_usage(20, 9)))
    return Reply(chunks=openai_stream(chunks))


# --- Anthropic Messages API -----------------------------------------------------------------


def anthropic_events(
    blocks: Sequence[tuple[str, Any]],
    *,
    stop_reason: str = "end_turn",
    usage: tuple[int, int] = (25, 7),
    stop: bool = True,
) -> tuple[bytes, ...]:
    """A Messages stream. ``blocks``: ``("text", [pieces])``, ``("thinking", [pieces])``,
    ``("tool_use", (id, name, arguments))``."""
    events = [
        sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-fake",
                    "stop_reason": None,
                    "usage": {"input_tokens": usage[0], "output_tokens": 1},
                },
            },
            event="message_start",
        ),
        sse({"type": "ping"}, event="ping"),
    ]
    for index, (kind, content) in enumerate(blocks):
        if kind == "tool_use":
            call_id, name, arguments = content
            start = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in ["", *split_evenly(json.dumps(arguments), 3)]
            ]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": piece} for piece in content]
            deltas.append({"type": "signature_delta", "signature": "c2lnbmF0dXJl"})
        else:
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in content]
        events.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": start},
                event="content_block_start",
            )
        )
        events += [
            sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                event="content_block_delta",
            )
            for delta in deltas
        ]
        events.append(
            sse({"type": "content_block_stop", "index": index}, event="content_block_stop")
        )
    events.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            event="message_delta",
        )
    )
    if stop:
        events.append(sse({"type": "message_stop"}, event="message_stop"))
    return tuple(events)


def anthropic_text_reply(*pieces: str, thinking: Sequence[str] = ()) -> Reply:
    blocks: list[tuple[str, Any]] = [("thinking", list(thinking))] if thinking else []
    blocks.append(("text", list(pieces)))
    return Reply(chunks=anthropic_events(blocks))


def anthropic_tool_reply(
    calls: Sequence[tuple[str, str, dict[str, Any]]], *, text: str = ""
) -> Reply:
    blocks: list[tuple[str, Any]] = [("text", [text])] if text else []
    blocks += [("tool_use", call) for call in calls]
    return Reply(chunks=anthropic_events(blocks, stop_reason="tool_use"))


def anthropic_error_event(kind: str, message: str) -> bytes:
    return sse({"type": "error", "error": {"type": kind, "message": message}}, event="error")
