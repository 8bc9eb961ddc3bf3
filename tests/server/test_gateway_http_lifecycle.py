"""A Streamable HTTP connection's life in an in-process gateway: closed when nobody reads it
for the idle timeout (an open stream keeps it), and closed when its token is revoked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio

from acp_server.app import AcpApp
from acp_server.config import load_config
from acp_server.gateway.auth import hash_token
from acp_server.gateway.service import Gateway
from tests.e2e.streamable_http_client import HttpAcpClient
from tests.helpers import echo_config, poll_until, write_config

TOKEN = "zc_" + "d" * 64


@asynccontextmanager
async def _serving(tmp_path: Path) -> AsyncIterator[tuple[Gateway, str]]:
    document = echo_config()
    document["gateway"] = {"require_pairing": True, "paired_tokens": [hash_token(TOKEN)]}
    write_config(tmp_path, document)
    gateway = Gateway(
        AcpApp(config=load_config(tmp_path), store=None), port=0, announce=lambda _: None
    )
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
