"""Two real `zeroclaw gateway` replicas on one SQLite store behind a real HAProxy, with real
`zeroclaw-acp-bridge` processes as the IDEs' side (docs/deployment.md).

* A planned restart (runtime API drain, SIGTERM, restart, ready) moves every bridge to the
  other replica without the IDE seeing an error; a turn running at the SIGTERM finishes.
* ``kill -9`` of a replica mid-turn: the IDE's request is answered exactly once (the bridge's
  connection-lost error), the bridge resumes on the other replica, the next prompt works, and
  ``session/load`` shows every answered turn and not the interrupted one.
* ``/pair/code`` through HAProxy never hands out the code.
"""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.e2e.gateway_harness import RunningGateway, WsRpc, run_gateway, ws_connect
from tests.e2e.haproxy_harness import (
    REQUIRE_HAPROXY_ENV,
    RunningHaproxy,
    replica_health,
    require_haproxy,
    run_haproxy,
)
from tests.e2e.helpers import RpcPipeClient, open_session, spawn_zeroclaw, unused_port
from tests.helpers import echo_config, poll_until, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 120
WORD_DELAY_MS = 40
LONG_PROMPT = " ".join(f"w{n}" for n in range(60))  # about 2.4 s of streaming


@pytest.fixture
def haproxy_binary() -> str:
    return require_haproxy()


def test_without_haproxy_the_tests_skip_or_fail_when_required(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(REQUIRE_HAPROXY_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="haproxy is not installed"):
        require_haproxy()
    monkeypatch.setenv(REQUIRE_HAPROXY_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_HAPROXY_ENV}=1 but haproxy"):
        require_haproxy()


def _replica_config(tmp_path: Path, name: str, **gateway: object) -> Path:
    document = echo_config(chunk_delay_ms=WORD_DELAY_MS)
    document["workspace_dir"] = str(tmp_path / "shared")  # one store for every replica
    document["gateway"] = {
        "require_pairing": False,
        "trusted_proxies": ["127.0.0.1"],
        "proxy_protocol": True,
        **gateway,
    }
    return write_config(tmp_path / f"replica-{name}", document)


@asynccontextmanager
async def _bridge(
    tmp_path: Path, haproxy: RunningHaproxy, name: str
) -> AsyncIterator[RpcPipeClient]:
    config_dir = tmp_path / f"bridge-{name}"
    config_dir.mkdir()
    async with spawn_zeroclaw(
        ["--url", haproxy.ws_url], config_dir=config_dir, script="zeroclaw-acp-bridge"
    ) as ide:
        yield ide


async def _connections(port: int) -> int:
    count: int = (await replica_health(port))["connections"]
    return count


async def _wait_connections(port: int, count: int) -> None:
    async def reached() -> bool:
        return await _connections(port) == count

    await poll_until(reached, within=15)


def _answers(ide: RpcPipeClient, request_id: Any) -> list[dict[str, Any]]:
    """Every response the IDE got for ``request_id``."""
    parsed = [json.loads(line) for line in ide.raw_lines]
    return [m for m in parsed if m.get("id") == request_id and "method" not in m]


def _errors(ide: RpcPipeClient) -> list[dict[str, Any]]:
    return [m for m in map(json.loads, ide.raw_lines) if "error" in m]


async def _prompt(ide: RpcPipeClient, session_id: str, text: str) -> None:
    reply = await ide.call("session/prompt", {"sessionId": session_id, "prompt": text}, within=30)
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply


@dataclass
class Deployment:
    """Two replicas behind HAProxy and a first bridge with one session, on ``target``."""

    replicas: dict[str, RunningGateway]
    ports: dict[str, int]
    haproxy: RunningHaproxy
    workspace: Path
    ide: RpcPipeClient
    session_id: str
    target: str
    other: str


@asynccontextmanager
async def _deployment(
    tmp_path: Path, haproxy_binary: str, bridge_name: str
) -> AsyncIterator[Deployment]:
    workspace = tmp_path / "work"
    workspace.mkdir()
    ports = {"a": unused_port(), "b": unused_port()}
    async with (
        run_gateway(_replica_config(tmp_path, "a"), "--port", str(ports["a"]), expect_exit=None) as a,
        run_gateway(_replica_config(tmp_path, "b"), "--port", str(ports["b"]), expect_exit=None) as b,
        run_haproxy(haproxy_binary, tmp_path, sorted(ports.items())) as haproxy,
        _bridge(tmp_path, haproxy, bridge_name) as ide,
    ):  # fmt: skip
        session_id = await open_session(ide, workspace)

        async def one_open() -> bool:
            return sum([await _connections(port) for port in ports.values()]) == 1

        await poll_until(one_open, within=15)
        target = "a" if await _connections(ports["a"]) == 1 else "b"
        other = "b" if target == "a" else "a"
        yield Deployment(
            {"a": a, "b": b}, ports, haproxy, workspace, ide, session_id, target, other
        )


async def test_a_planned_restart_moves_bridges_to_the_other_replica_with_no_error(
    tmp_path: Path, haproxy_binary: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with _deployment(tmp_path, haproxy_binary, "busy") as d:
            busy, busy_session = d.ide, d.session_id
            async with _bridge(tmp_path, d.haproxy, "idle") as idle:
                idle_session = await open_session(idle, d.workspace)
                await _wait_connections(d.ports[d.other], 1)  # leastconn: the other replica
                await _prompt(idle, idle_session, "before")

                # The runtime API stops new connections to the target first.
                await d.haproxy.runtime(f"set server gateways/{d.target} state drain")
                await d.haproxy.wait_status(d.target, "DRAIN")
                prompt_id = await busy.prompt_request(busy_session, LONG_PROMPT)
                first = await busy.receive()
                assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                d.replicas[d.target].signal(signal.SIGTERM)
                # The running turn finishes; then the bridge moves.
                reply = await busy.wait_response(prompt_id, within=30)
                assert reply["result"]["stopReason"] == "end_turn", reply
                assert await d.replicas[d.target].wait_exit() == 0
                await _wait_connections(d.ports[d.other], 2)
                await _prompt(busy, busy_session, "after the drain")
                await _prompt(idle, idle_session, "after")
                assert _errors(busy) == _errors(idle) == []

                # Restart the replica and put it back; leastconn sends it the next client.
                config = d.replicas[d.target].config_dir
                port = str(d.ports[d.target])
                async with run_gateway(config, "--port", port) as restarted:
                    await d.haproxy.runtime(f"set server gateways/{d.target} state ready")
                    await d.haproxy.wait_status(d.target, "UP")
                    async with _bridge(tmp_path, d.haproxy, "late") as late:
                        late_session = await open_session(late, d.workspace)
                        await _prompt(late, late_session, "on the restarted replica")
                        assert await _connections(restarted.port) == 1


async def test_kill_9_mid_turn_answers_once_and_the_bridge_resumes_on_the_other_replica(
    tmp_path: Path, haproxy_binary: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with _deployment(tmp_path, haproxy_binary, "ide") as d:
            ide, session_id = d.ide, d.session_id
            await _prompt(ide, session_id, "turn 0")
            await _prompt(ide, session_id, "turn 1")

            prompt_id = await ide.prompt_request(session_id, LONG_PROMPT)
            first = await ide.receive()
            assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            d.replicas[d.target].process.kill()
            killed_at = trio.current_time()
            lost = await ide.wait_response(prompt_id, within=30)
            data = lost["error"]["data"]
            assert {k: v for k, v in data.items() if k != "details"} == {
                "bridge": "connection_lost",
                "method": "session/prompt",
                "sessionId": session_id,
                "reconnecting": True,
            }, lost
            assert "the bridge is reconnecting, send the request again" in data["details"]
            await _prompt(ide, session_id, "turn 2")
            failover_secs = trio.current_time() - killed_at
            assert await _connections(d.ports[d.other]) == 1
            assert len(_answers(ide, prompt_id)) == 1  # exactly once, even after resuming
            assert failover_secs < 15, failover_secs

            # A new client through HAProxy sees every answered turn and not the lost one.
            async with ws_connect(d.haproxy.ws_url) as ws:
                rpc = WsRpc(ws)
                await rpc.call("initialize", {"protocolVersion": 1})
                loaded = await rpc.call(
                    "session/load", {"sessionId": session_id, "cwd": str(d.workspace)}
                )
                assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
                replay = [n["params"]["update"] for n in rpc.notifications]
                user = [
                    u["content"]["text"]
                    for u in replay
                    if u["sessionUpdate"] == "user_message_chunk"
                ]
                assert user == ["turn 0", "turn 1", "turn 2"]


async def test_pair_code_through_haproxy_is_refused_and_direct_peers_must_send_a_header(
    tmp_path: Path, haproxy_binary: str
) -> None:
    port = unused_port()
    config_dir = _replica_config(tmp_path, "a", require_pairing=True)
    with trio.fail_after(TIMEOUT):
        async with (
            run_gateway(config_dir, "--port", str(port)) as replica,
            run_haproxy(haproxy_binary, tmp_path, [("a", port)]) as haproxy,
            httpx.AsyncClient(trust_env=False, timeout=10) as client,
        ):
            through = await client.get(f"http://127.0.0.1:{haproxy.port}/pair/code")
            assert through.status_code == 200
            assert through.json()["pairing_code"] is None
            # Unpaired: the code exists, but only the gateway's operator is given it.
            assert "only given to the gateway's operator" in through.json()["message"]
            # The replica's own port: a peer in trusted_proxies without a PROXY header.
            direct = await client.get(f"{replica.base_url}/pair/code")
            assert direct.status_code == 400
            assert "PROXY protocol header" in direct.text
