"""A reconnect storm against a real `zeroclaw gateway`: hundreds of clients from one
address open `/acp` at the same instant (as after a restart behind a proxy), directly and
through a real HAProxy with and without PROXY protocol, and every one is initialised at
its first attempt; idle sockets are still the ones cut; real bridges across a restart
under such a storm show the IDE no error.

The storm's clients are `websockets` connections in this test process that never retry:
one turned-away handshake fails the test. (A thousand bridge processes would not fit this
machine; bench/gateway_load.py storms 1,000 connections.)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from acp_server.gateway.auth import hash_token
from tests.e2e.gateway_harness import (
    RawWsClient,
    RunningGateway,
    WsRpc,
    run_gateway,
    ws_connect,
)
from tests.e2e.haproxy_harness import RunningHaproxy, require_haproxy, run_haproxy
from tests.e2e.helpers import RpcPipeClient, open_session, spawn_zeroclaw, unused_port
from tests.helpers import echo_config, session_dir, write_config
from tests.jsonrpc_peer import JsonDict

pytestmark = pytest.mark.e2e

TIMEOUT: Final = 120
STORM: Final = 400
"""Clients opened at once from 127.0.0.1: six times the old per-address cap of 64."""
PROXIED_STORM: Final = 300
HANDSHAKE_DEADLINE_SECS: Final = 5.0
"""The gateway closes a socket that has not sent its request head within this."""
OPEN_FILE_LIMIT: Final = 256
"""A gateway with this open-file limit holds at most 64 unauthenticated sockets."""


OpenAndInitialise = Callable[[], AbstractAsyncContextManager[JsonDict]]


async def _storm(clients: int, open_and_initialise: OpenAndInitialise) -> list[str]:
    """Open ``clients`` connections at once, each sending ``initialize`` as soon as it is
    open; every connection is held until all are answered. Returns the failures (none is
    retried)."""
    failures: list[str] = []
    answered = 0
    all_answered = trio.Event()

    def done() -> None:
        nonlocal answered
        answered += 1
        if answered == clients:
            all_answered.set()

    async def client() -> None:
        try:
            async with open_and_initialise() as reply:
                if "result" not in reply:
                    failures.append(f"initialize: {reply}")
                done()
                await all_answered.wait()
        except Exception as exc:  # a refused or cut handshake: what this test looks for
            failures.append(f"{type(exc).__name__}: {exc}")
            done()

    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(client)
    return failures


def _websockets(url: str) -> OpenAndInitialise:
    """A `websockets` client per connection."""

    @asynccontextmanager
    async def open_and_initialise() -> AsyncIterator[JsonDict]:
        async with ws_connect(url, token=TOKEN) as connection:
            yield await WsRpc(connection).call("initialize", {"protocolVersion": 1})

    return open_and_initialise


def _raw(port: int) -> OpenAndInitialise:
    """A bare socket per connection that writes its upgrade the moment its connect returns:
    the storm of separate client processes, which one busy test process otherwise is not."""

    @asynccontextmanager
    async def open_and_initialise() -> AsyncIterator[JsonDict]:
        client = await RawWsClient.open(port, TOKEN)
        try:
            await client.send_json(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
            yield await client.next_json()
        finally:
            await client.vanish()

    return open_and_initialise


TOKEN: Final = "zc_" + "5" * 64
"""Paired in config.toml from the start: no pairing exchange, which behind a proxy with
PROXY protocol only the operator's own tools could do."""


def _gateway_config(tmp_path: Path, **gateway: Any) -> Path:
    document = echo_config()
    document["gateway"] = {
        "require_pairing": True,
        "paired_tokens": [hash_token(TOKEN)],
        **gateway,
    }
    return write_config(tmp_path / "cfg", document)


async def test_a_storm_from_one_address_is_served_without_a_single_refusal(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with run_gateway(_gateway_config(tmp_path)) as gateway:
            assert await _storm(STORM, _websockets(gateway.ws_url())) == []
            assert "closed the oldest idle one" not in gateway.stderr()


def _few_files_prefix() -> list[str]:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("prlimit (util-linux) is not installed")
    return [prlimit, f"--nofile={OPEN_FILE_LIMIT}:{OPEN_FILE_LIMIT}", "--"]


async def test_at_the_cap_idle_sockets_are_cut_and_handshakes_never(tmp_path: Path) -> None:
    config_dir = _gateway_config(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir, prefix=_few_files_prefix()) as gateway:
            # The oldest pending socket is a client mid-handshake: part of its request head
            # is sent, the rest waits until the storm has made the gateway evict.
            resume, paused = trio.Event(), trio.Event()
            mid_handshake: list[JsonDict] = []

            async def finish_handshake() -> None:
                client = await RawWsClient.open(
                    gateway.port, TOKEN, pause_after=20, resume=resume, paused=paused
                )
                try:
                    await client.send_json(
                        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
                    )
                    mid_handshake.append(await client.next_json())
                finally:
                    await client.vanish()

            # Sockets that send nothing take every other unauthenticated slot...
            opened = trio.current_time()
            idle: list[trio.SocketStream] = []
            closed_after: list[float] = []

            async def watch_the_oldest() -> None:
                assert await idle[0].receive_some(1) == b""
                closed_after.append(trio.current_time() - opened)
                resume.set()

            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(finish_handshake)
                    await paused.wait()
                    idle.extend(
                        [
                            await trio.open_tcp_stream("127.0.0.1", gateway.port)
                            for _ in range(OPEN_FILE_LIMIT // 4 - 1)
                        ]
                    )
                    nursery.start_soon(watch_the_oldest)
                    # ...then a storm three times the cap arrives from the same address.
                    assert await _storm(3 * len(idle), _raw(gateway.port)) == []
                # The oldest idle socket made room: cut before its 5 s to send a request,
                # while the older socket that had begun its handshake was spared.
                assert closed_after[0] < HANDSHAKE_DEADLINE_SECS
                assert "result" in mid_handshake[0], mid_handshake
            finally:
                for stream in idle:
                    await trio.aclose_forcefully(stream)
            assert "closed the oldest idle one" in gateway.stderr()


@asynccontextmanager
async def _behind_haproxy(
    tmp_path: Path, *, proxy_protocol: bool
) -> AsyncIterator[tuple[RunningGateway, RunningHaproxy]]:
    """A gateway that trusts HAProxy (PROXY v2 or X-Forwarded-For), behind HAProxy."""
    binary = require_haproxy()
    config_dir = _gateway_config(
        tmp_path, trusted_proxies=["127.0.0.1"], proxy_protocol=proxy_protocol
    )
    async with (
        run_gateway(config_dir) as gateway,
        run_haproxy(
            binary, tmp_path, [("a", gateway.port)], proxy_protocol=proxy_protocol
        ) as haproxy,
    ):
        yield gateway, haproxy


@pytest.mark.parametrize("proxy_protocol", [True, False], ids=["proxy-v2", "x-forwarded-for"])
async def test_a_storm_through_haproxy_is_served_without_a_single_refusal(
    tmp_path: Path, proxy_protocol: bool
) -> None:
    with trio.fail_after(TIMEOUT):
        async with _behind_haproxy(tmp_path, proxy_protocol=proxy_protocol) as (gateway, haproxy):
            assert await _storm(PROXIED_STORM, _websockets(haproxy.ws_url)) == []
            assert "closed the oldest idle one" not in gateway.stderr()


async def _serve(
    config_dir: Path,
    port: int,
    task_status: trio.TaskStatus[RunningGateway] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A gateway on ``port`` until its process exits (drained by SIGTERM)."""
    async with run_gateway(config_dir, "--port", str(port), expect_exit=None) as gateway:
        task_status.started(gateway)
        await gateway.process.wait()


def _bridge(config_dir: Path, port: int, token: str) -> Any:
    return spawn_zeroclaw(
        ["--url", f"ws://127.0.0.1:{port}/acp"],
        config_dir=config_dir,
        script="zeroclaw-acp-bridge",
        env={"ZEROCLAW_ACP_BRIDGE_TOKEN": token},
    )


async def test_after_a_restart_bridges_under_a_storm_show_the_ide_no_error(
    tmp_path: Path,
) -> None:
    port = unused_port()
    config_dir = _gateway_config(tmp_path)
    workspace = session_dir(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            first: RunningGateway = await nursery.start(_serve, config_dir, port)
            async with _bridges(config_dir, port, TOKEN) as ides:
                sessions = [await open_session(ide, workspace) for ide in ides]
                first.signal()  # SIGTERM: idle connections are closed with 1012 at once
                assert await first.wait_exit() == 0
                # Prompts sent while the gateway is down are held by the bridges...
                held = [
                    await ide.prompt_request(session_id, "after the restart")
                    for ide, session_id in zip(ides, sessions, strict=True)
                ]
                second: RunningGateway = await nursery.start(_serve, config_dir, port)
                # ...while a storm of other clients arrives the moment it listens.
                assert await _storm(STORM, _websockets(second.ws_url())) == []
                for ide, request_id in zip(ides, held, strict=True):
                    reply = await ide.wait_response(request_id)
                    assert reply["result"]["stopReason"] == "end_turn", reply
            for ide in ides:
                assert ide.process.returncode == 0
                seen = [json.loads(line) for line in ide.raw_lines]
                assert not [message for message in seen if "error" in message]
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def _bridges(config_dir: Path, port: int, token: str) -> AsyncIterator[list[RpcPipeClient]]:
    async with (
        _bridge(config_dir, port, token) as first,
        _bridge(config_dir, port, token) as second,
        _bridge(config_dir, port, token) as third,
    ):
        yield [first, second, third]
