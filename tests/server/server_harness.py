"""In-memory harness for the ACP server: a channel transport, scripted providers, stub tools.

``ServerHarness`` runs ``serve_connection`` in a nursery over ``MemoryTransport`` and plays
the client: ``call`` sends a request and returns its response, keeping notifications in
``notifications`` and answering ``session/request_permission`` with ``on_request``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from acp_server.agent.providers import ProviderFactory, create_provider
from acp_server.agent.providers.base import (
    ModelRequest,
    Provider,
    ProviderEvent,
    StreamEnd,
    TextDelta,
    ToolCallRequested,
)
from acp_server.agent.tools.base import Tool, ToolContext, ToolOutput
from acp_server.config import Config
from acp_server.model import ToolCall
from acp_server.protocol.connection import serve_connection
from acp_server.protocol.services.context import AcpApp
from acp_server.storage import AsyncSessionStore
from tests.helpers import session_dir
from tests.jsonrpc_peer import JsonDict, JsonRpcPeer, RequestHandler


class MemoryTransport:
    """A ``MessageTransport`` over trio memory channels (``None`` from the client = EOF)."""

    def __init__(self) -> None:
        self.client_send, self._server_receive = trio.open_memory_channel[str](256)
        self._server_send, self.client_receive = trio.open_memory_channel[bytes](4096)

    async def receive_message(self) -> str | None:
        try:
            return await self._server_receive.receive()
        except trio.EndOfChannel:
            return None

    async def send_message(self, payload: bytes) -> None:
        await self._server_send.send(payload)

    async def aclose(self) -> None:
        await self._server_send.aclose()


@dataclass
class ScriptedProvider:
    """A provider that plays back ``rounds`` (one list of events per model call).

    ``gate`` (when set) is awaited before each event after the first, so a test can hold a
    turn mid-stream; ``delay`` sleeps between events (use with autojump_clock).
    """

    rounds: list[list[ProviderEvent]]
    delay: float = 0.0
    requests: list[ModelRequest] = field(default_factory=list)
    gate: trio.Event | None = None

    @property
    def model(self) -> str:
        return "scripted"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        index = min(len(self.requests) - 1, len(self.rounds) - 1)
        for position, event in enumerate(self.rounds[index]):
            if position and self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await trio.sleep(self.delay)
            yield event


def text_round(*words: str) -> list[ProviderEvent]:
    return [*(TextDelta(word) for word in words), StreamEnd()]


def tool_round(
    name: str, arguments: Mapping[str, Any], call_id: str = "call-1"
) -> list[ProviderEvent]:
    return [
        ToolCallRequested(ToolCall(id=call_id, name=name, arguments=dict(arguments))),
        StreamEnd("tool_use"),
    ]


@dataclass
class StubTool:
    """A tool that records its calls; ``block`` makes it wait (for cancel-mid-tool tests)."""

    name: str = "stub"
    description: str = "a stub tool"
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    side_effects: bool = True
    output: str = "stub output"
    calls: list[dict[str, Any]] = field(default_factory=list)
    block: trio.Event | None = None
    started: trio.Event = field(default_factory=trio.Event)
    cancelled: bool = False
    action: Callable[[dict[str, Any], ToolContext], Awaitable[ToolOutput]] | None = None

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        self.calls.append(arguments)
        self.started.set()
        if self.action is not None:
            return await self.action(arguments, ctx)
        if self.block is not None:
            try:
                await self.block.wait()
            except trio.Cancelled:
                self.cancelled = True
                raise
        return ToolOutput(self.output)


class ServerHarness(JsonRpcPeer):
    """The client side of an in-memory connection."""

    def __init__(self, transport: MemoryTransport) -> None:
        super().__init__()
        self.transport = transport
        self.frames: list[JsonDict] = []

    async def send_raw(self, text: str) -> None:
        await self.transport.client_send.send(text)

    async def _next_message(self) -> JsonDict:
        payload = await self.transport.client_receive.receive()
        message: JsonDict = json.loads(payload)
        self.frames.append(message)
        return message

    async def new_session(self, cwd: Path, **params: Any) -> str:
        result = await self.result("session/new", {"cwd": str(cwd), **params})
        session_id: str = result["sessionId"]
        return session_id

    def updates(self, session_id: str | None = None) -> list[JsonDict]:
        return [
            note["params"]["update"]
            for note in self.notifications
            if note["method"] == "session/update"
            and (session_id is None or note["params"]["sessionId"] == session_id)
        ]

    async def close_input(self) -> None:
        await self.transport.client_send.aclose()


def answer(option_id: str | None) -> RequestHandler:
    """A permission handler picking ``option_id`` (None = the client dismisses it)."""

    async def handler(request: JsonDict) -> JsonDict:
        if option_id is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option_id}}

    return handler


def harness_app(
    config: Config,
    *,
    provider: Provider | None = None,
    provider_factory: ProviderFactory | None = None,
    tools: Sequence[Tool] = (),
    store: AsyncSessionStore | None = None,
    launch_dir: Path | None = None,
) -> AcpApp:
    """The process-wide state ``open_server`` serves a connection in."""
    return AcpApp(
        config=config,
        store=store,
        provider_factory=(
            provider_factory
            or ((lambda _config: provider) if provider is not None else create_provider)
        ),
        tools_factory=lambda _agent, _workspace, _config: {tool.name: tool for tool in tools},
        launch_dir=launch_dir or session_dir(config.config_dir),
    )


@asynccontextmanager
async def open_server(
    config: Config,
    *,
    provider: Provider | None = None,
    tools: Sequence[Tool] = (),
    store: AsyncSessionStore | None = None,
    launch_dir: Path | None = None,
    connection_default_agent: str | None = None,
    reap_idle_sessions: bool = False,
    provider_factory: ProviderFactory | None = None,
    app: AcpApp | None = None,
) -> AsyncIterator[ServerHarness]:
    """Serve one in-memory connection; on exit, end the input and wait for the server.

    ``app`` (from ``harness_app``) serves this connection in that process-wide state, so
    several connections can share one store and one registry of live sessions."""
    transport = MemoryTransport()
    if app is None:
        app = harness_app(
            config,
            provider=provider,
            provider_factory=provider_factory,
            tools=tools,
            store=store,
            launch_dir=launch_dir,
        )
    harness = ServerHarness(transport)
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def serve() -> None:
            try:
                await serve_connection(
                    transport,
                    app,
                    connection_default_agent=connection_default_agent,
                    reap_idle_sessions=reap_idle_sessions,
                )
            finally:
                done.set()

        nursery.start_soon(serve)
        try:
            yield harness
        finally:
            await harness.close_input()

            # Drain so the writer never blocks while the server shuts down.
            async def drain() -> None:
                async for payload in transport.client_receive:
                    harness.frames.append(json.loads(payload))

            nursery.start_soon(drain)
            await done.wait()
            nursery.cancel_scope.cancel()
