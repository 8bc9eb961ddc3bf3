"""A Streamable HTTP connection's life in an in-process gateway: closed when nobody reads it
for the idle timeout (an open stream keeps it), closed when its token is revoked, and a
message past the size limit refused (413) while the connection serves on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio

from acp_server.config import load_config
from acp_server.gateway.auth import hash_token
from acp_server.gateway.service import Gateway
from acp_server.protocol.services.context import AcpApp
from tests.e2e.streamable_http_client import HttpAcpClient
from tests.helpers import echo_config, poll_until, write_config

TOKEN = "zc_" + "d" * 64


@asynccontextmanager
async def _serving(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[Gateway, str]]:
    document = echo_config()
    document["gateway"] = {"require_pairing": True, "paired_tokens": [hash_token(TOKEN)]}
    write_config(tmp_path, document)
    app = AcpApp(config=load_config(tmp_path), store=None)
    gateway = Gateway(app, port=0, announce=lambda _: None, **options)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(gateway.serve, handle_signals=False))
        yield gateway, f"http://127.0.0.1:{port}"
        nursery.cancel_scope.cancel()


async def test_a_connection_nobody_reads_is_closed_after_the_idle_timeout(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with _serving(tmp_path) as (gateway, base_url):
            gateway.http.idle_timeout_secs = 0.5
            gateway.http.keepalive_secs = 0.1
            watched = HttpAcpClient(base_url, TOKEN)
            await watched.initialize()
            forgotten = HttpAcpClient(base_url, TOKEN)
            await forgotten.initialize()  # and never opens a stream
            async with watched.events() as stream:

                async def forgotten_is_closed() -> bool:
                    return len(gateway.http) == 1

                await poll_until(forgotten_is_closed, within=10)
                # Keepalives for longer than the idle timeout: the read stream keeps its
                # connection open.
                for _ in range(8):
                    event_id, comment = await stream.next()
                    assert (event_id, comment) == (None, {"comment": "keepalive"})
                assert len(gateway.http) == 1
            gone = await forgotten.post(forgotten.request("session/list", {}))
            assert gone.status_code == 404
            kept = await watched.post(watched.request("session/list", {}))
            assert kept.status_code == 202
            for client in (watched, forgotten):
                await client.aclose()


async def test_revoking_the_token_closes_its_connections(tmp_path: Path) -> None:
    with trio.fail_after(20):
        async with _serving(tmp_path) as (gateway, base_url):
            client = HttpAcpClient(base_url, TOKEN)
            await client.initialize()
            async with client.events() as stream:
                assert gateway.state.revoke_all_tokens() == 1
                _, comment = await stream.next()
                assert comment == {"comment": "token revoked"}
            assert (await client.post(client.request("session/list", {}))).status_code == 401
            await client.aclose()


async def test_a_message_past_the_limit_is_refused_and_the_connection_serves_on(
    tmp_path: Path,
) -> None:
    with trio.fail_after(20):
        async with _serving(tmp_path, max_message_bytes=4096) as (_, base_url):
            client = HttpAcpClient(base_url, TOKEN)
            await client.initialize()
            text = "x" * 5000
            big = client.request("session/list", {"cursor": text})
            refused = await client.post(big)
            assert refused.status_code == 413
            assert "4096-byte limit" in refused.json()["error"]["message"]
            # Sent in chunks (no Content-Length): refused once the limit is passed.
            chunked = await client.client.post(
                client.url, content=_chunks(big), headers=client.headers()
            )
            assert chunked.status_code == 413
            async with client.events() as stream:
                small = client.request("session/list", {})
                assert (await client.post(small)).status_code == 202
                _, reply = await stream.message()
                assert reply["id"] == small["id"]
                assert "sessions" in reply["result"]
            await client.aclose()


async def _chunks(message: dict[str, object]) -> AsyncIterator[bytes]:
    raw = json.dumps(message).encode()
    for start in range(0, len(raw), 1000):
        yield raw[start : start + 1000]
