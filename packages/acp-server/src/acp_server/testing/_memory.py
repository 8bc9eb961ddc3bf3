"""One ACP connection served in memory, and the client that drives it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio

from acp_core import methods
from acp_server.agent.providers import ProviderFactory, create_provider
from acp_server.agent.providers.base import Provider
from acp_server.agent.tools.base import Tool
from acp_server.config import Config
from acp_server.protocol.client import JsonDict, JsonRpcPeer, RequestHandler
from acp_server.protocol.connection import serve_connection
from acp_server.protocol.services.context import AcpApp
from acp_server.storage import AsyncSessionStore

DEFAULT_CLIENT_TO_SERVER_MESSAGES: Final = 256
DEFAULT_SERVER_TO_CLIENT_MESSAGES: Final = 4096
"""Room in each direction, in messages: a test that reads nothing for a while (a whole
turn's updates) does not stall the server's writer."""


class MemoryTransport:
    """A ``MessageTransport`` over trio memory channels: the server's side, with the
    client's ends in ``client_send`` / ``client_receive`` (closing ``client_send`` is EOF)."""

    def __init__(self) -> None:
        self.client_send, self._server_receive = trio.open_memory_channel[str](
            DEFAULT_CLIENT_TO_SERVER_MESSAGES
        )
        self._server_send, self.client_receive = trio.open_memory_channel[bytes](
            DEFAULT_SERVER_TO_CLIENT_MESSAGES
        )

    async def receive_message(self) -> str | None:
        try:
            return await self._server_receive.receive()
        except trio.EndOfChannel:
            return None

    async def send_message(self, payload: bytes) -> None:
        await self._server_send.send(payload)

    async def aclose(self) -> None:
        await self._server_send.aclose()


class MemoryClient(JsonRpcPeer):
    """The client side of an in-memory connection; ``frames`` is every message received."""

    def __init__(self, transport: MemoryTransport) -> None:
        super().__init__()
        self.memory = transport
        self.frames: list[JsonDict] = []

    async def send_raw(self, text: str) -> None:
        await self.memory.client_send.send(text)

    async def _next_message(self) -> JsonDict:
        payload = await self.memory.client_receive.receive()
        message: JsonDict = json.loads(payload)
        self.frames.append(message)
        return message

    async def new_session(self, cwd: Path, **params: Any) -> str:
        result = await self.result(methods.SESSION_NEW, {"cwd": str(cwd), **params})
        session_id: str = result["sessionId"]
        return session_id

    def updates(self, session_id: str | None = None) -> list[JsonDict]:
        """The ``update`` objects of the session/update notifications kept so far."""
        return [
            note["params"]["update"]
            for note in self.notifications
            if note["method"] == methods.SESSION_UPDATE
            and (session_id is None or note["params"]["sessionId"] == session_id)
        ]

    async def close_input(self) -> None:
        await self.memory.client_send.aclose()


def answer(option_id: str | None) -> RequestHandler:
    """A permission handler picking ``option_id`` (None = the client dismisses it)."""

    async def handler(request: JsonDict) -> JsonDict:
        if option_id is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option_id}}

    return handler


def memory_app(
    config: Config,
    *,
    provider: Provider | None = None,
    provider_factory: ProviderFactory | None = None,
    tools: Sequence[Tool] = (),
    store: AsyncSessionStore | None = None,
    launch_dir: Path | None = None,
) -> AcpApp:
    """The process-wide state ``open_server`` serves a connection in: ``provider`` for
    every agent (else the configured ones), exactly ``tools``, ``launch_dir`` (default
    ``<config dir>/ws``, created) as the directory the server was started in."""
    if launch_dir is None:
        launch_dir = config.config_dir / "ws"
        launch_dir.mkdir(parents=True, exist_ok=True)
    return AcpApp(
        config=config,
        store=store,
        provider_factory=(
            provider_factory
            or ((lambda _config: provider) if provider is not None else create_provider)
        ),
        tools_factory=lambda _agent, _workspace, _config: {tool.name: tool for tool in tools},
        launch_dir=launch_dir,
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
    principal: str | None = None,
) -> AsyncIterator[MemoryClient]:
    """Serve one in-memory connection; on exit, end the input and wait for the server.

    ``app`` (from ``memory_app``) serves this connection in that process-wide state, so
    several connections can share one store and one registry of live sessions.
    ``principal`` is who the connection is, as a gateway token's name (None: the local
    operator)."""
    transport = MemoryTransport()
    if app is None:
        app = memory_app(
            config,
            provider=provider,
            provider_factory=provider_factory,
            tools=tools,
            store=store,
            launch_dir=launch_dir,
        )
    client = MemoryClient(transport)
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def serve() -> None:
            try:
                await serve_connection(
                    transport,
                    app,
                    connection_default_agent=connection_default_agent,
                    reap_idle_sessions=reap_idle_sessions,
                    principal=principal,
                )
            finally:
                done.set()

        nursery.start_soon(serve)
        try:
            yield client
        finally:
            await client.close_input()

            # Drain so the writer never blocks while the server shuts down.
            async def drain() -> None:
                async for payload in transport.client_receive:
                    client.frames.append(json.loads(payload))

            nursery.start_soon(drain)
            await done.wait()
            nursery.cancel_scope.cancel()
