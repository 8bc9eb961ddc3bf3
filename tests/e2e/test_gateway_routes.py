"""The gateway's HTTP front in-process: routing, limits, timeouts and drain."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.trio.client import connect
from wsproto.connection import Connection, ConnectionType
from wsproto.events import TextMessage

from acp_server.config import load_config
from acp_server.gateway.service import Gateway, GatewayError
from acp_server.protocol.services.context import AcpApp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e  # binds 127.0.0.1


def _app(tmp_path: Path, **gateway: Any) -> AcpApp:
    document = echo_config()
    document["gateway"] = {"require_pairing": False, **gateway}
    write_config(tmp_path, document)
    return AcpApp(config=load_config(tmp_path), store=None)


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[str]:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(gateway.serve, handle_signals=False))
        yield f"127.0.0.1:{port}"
        nursery.cancel_scope.cancel()


async def _get(url: str, method: str = "GET", **kwargs: Any) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        return await client.request(method, url, **kwargs)


async def test_routes_live_under_the_path_prefix(tmp_path: Path) -> None:
    gateway = Gateway(_app(tmp_path, path_prefix="/zc/"), port=0, announce=lambda _: None)
    with trio.fail_after(10):
        async with serving(gateway) as address:
            assert (await _get(f"http://{address}/zc/health")).status_code == 200
            assert (await _get(f"http://{address}/health")).status_code == 404
            assert (await _get(f"http://{address}/zc/nothing")).status_code == 404
            wrong_method = await _get(f"http://{address}/zc/health", "POST")
            assert wrong_method.status_code == 405
            assert wrong_method.headers["Allow"] == "GET, HEAD"
            plain = await _get(f"http://{address}/zc/acp")
            assert plain.status_code == 426
            assert f"ws://{address}/zc/acp" in plain.text
            old_version = await _get(
                f"http://{address}/zc/acp",
                headers={
                    "Upgrade": "websocket",
                    "Connection": "Upgrade",
                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                    "Sec-WebSocket-Version": "8",
                },
            )
            assert old_version.status_code == 426
            assert old_version.headers["Sec-WebSocket-Version"] == "13"
            async with connect(f"ws://{address}/zc/acp", proxy=None) as ws:
                await ws.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
                assert '"protocolVersion":1' in str(await ws.recv())


async def test_connection_limit_answers_503(tmp_path: Path) -> None:
    gateway = Gateway(_app(tmp_path), port=0, max_connections=1, announce=lambda _: None)
    with trio.fail_after(10):
        async with serving(gateway) as address, connect(f"ws://{address}/acp", proxy=None):
            with pytest.raises(InvalidStatus) as caught:
                async with connect(f"ws://{address}/acp", proxy=None):
                    pass
            assert caught.value.response.status_code == 503


async def test_slow_and_garbled_requests_are_cut_off(tmp_path: Path) -> None:
    gateway = Gateway(_app(tmp_path), port=0, handshake_timeout_secs=0.2, announce=lambda _: None)
    with trio.fail_after(10):
        async with serving(gateway) as address:
            host, port = address.split(":")
            silent = await trio.open_tcp_stream(host, int(port))
            assert await silent.receive_some(100) == b""  # closed after the head timeout
            await silent.aclose()
            garbled = await trio.open_tcp_stream(host, int(port))
            await garbled.send_all(b"NOT HTTP AT ALL\r\n\r\n")
            assert (await garbled.receive_some(100)).startswith(b"HTTP/1.1 400 ")
            await garbled.aclose()
            huge = await _get(f"http://{address}/pair", "POST", content=b"x" * 100_000)
            assert huge.status_code == 413
            assert (await _get(f"http://{address}/health")).status_code == 200


async def test_request_drain_closes_idle_connections_with_1012(tmp_path: Path) -> None:
    gateway = Gateway(_app(tmp_path), port=0, announce=lambda _: None)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(partial(gateway.serve, handle_signals=False))
            async with connect(f"ws://127.0.0.1:{port}/acp", proxy=None) as ws:
                gateway.request_drain()
                with pytest.raises(ConnectionClosed) as caught:
                    await ws.recv()
            assert caught.value.rcvd is not None
            assert caught.value.rcvd.code == 1012
        # serve() returned by itself: the nursery closed without being cancelled.


async def test_public_bind_and_missing_tls_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(GatewayError, match="allow_public_bind") as public:
        await Gateway(_app(tmp_path), host="0.0.0.0", port=0).serve(handle_signals=False)
    assert public.value.config_problem
    tls = {"enabled": True, "cert_path": "missing.pem", "key_path": "missing.pem"}
    with pytest.raises(GatewayError, match="TLS certificate"):
        await Gateway(_app(tmp_path, tls=tls), port=0).serve(handle_signals=False)


async def test_frames_sent_with_the_upgrade_request_are_not_lost(tmp_path: Path) -> None:
    gateway = Gateway(_app(tmp_path), port=0, announce=lambda _: None)
    client = Connection(ConnectionType.CLIENT)
    head = (
        b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    frame = client.send(TextMessage(data='{"jsonrpc":"2.0","id":1,"method":"initialize"}'))
    with trio.fail_after(10):
        async with serving(gateway) as address:
            host, port = address.split(":")
            stream = await trio.open_tcp_stream(host, int(port))
            await stream.send_all(head + frame)  # one write: the frame rides with the head
            received = b""
            while b"protocolVersion" not in received:
                chunk = await stream.receive_some(65536)
                assert chunk, received
                received += chunk
            assert received.startswith(b"HTTP/1.1 101 ")
            await stream.aclose()
