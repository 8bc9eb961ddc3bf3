"""How a failed connection attempt is classified: a gateway that was reached but turned the
upgrade away (503, or the connection closed mid-handshake) is *busy* and worth another try
even on the first attempt; nothing listening, or a wrong path, is not."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial

import pytest
import trio

from acp_bridge.auth import Credentials, TokenSource
from acp_bridge.errors import BridgeExit, ExitCode
from acp_bridge.gateway import ConnectOptions, open_gateway
from tests.e2e.helpers import unused_port

Answer = Callable[[trio.SocketStream], Awaitable[None]]


@asynccontextmanager
async def _gateway(answer: Answer) -> AsyncIterator[str]:
    """A TCP server that reads the upgrade request's head, then does what ``answer`` does."""

    async def handle(stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            head += chunk
        await answer(stream)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
        yield f"ws://127.0.0.1:{listeners[0].socket.getsockname()[1]}/acp"
        nursery.cancel_scope.cancel()


async def _status(status: str, stream: trio.SocketStream) -> None:
    await stream.send_all(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n".encode())
    await stream.aclose()


async def _attempt(url: str) -> BridgeExit:
    options = ConnectOptions(url=url, credentials=Credentials(TokenSource.NOT_REQUIRED))
    with trio.fail_after(10), pytest.raises(BridgeExit) as failed:
        async with open_gateway(options):
            pass
    assert failed.value.code is ExitCode.CONNECTION
    return failed.value


async def test_a_connection_closed_during_the_handshake_is_a_busy_gateway() -> None:
    async with _gateway(trio.aclose_forcefully) as url:
        failed = await _attempt(url)
    assert failed.busy
    assert "closed the connection during the handshake" in failed.message
    assert "many clients connecting at once" in failed.message


async def test_a_503_is_a_busy_gateway_and_a_404_is_not() -> None:
    async with _gateway(partial(_status, "503 Service Unavailable")) as url:
        assert (await _attempt(url)).busy
    async with _gateway(partial(_status, "404 Not Found")) as url:
        not_found = await _attempt(url)
    assert not not_found.busy
    assert "Check [gateway].path_prefix" in not_found.message


async def test_nothing_listening_is_not_busy_and_says_so() -> None:
    failed = await _attempt(f"ws://127.0.0.1:{unused_port()}/acp")
    assert not failed.busy
    assert "connection refused. Is `zeroclaw gateway` running there" in failed.message
