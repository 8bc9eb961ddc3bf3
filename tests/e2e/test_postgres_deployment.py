"""Three real `zeroclaw gateway` replicas on one PostgreSQL store behind a real HAProxy, with
real `zeroclaw-acp-bridge` processes as the IDEs' side: the deployment docs/deployment.md
describes, tested end to end.

HAProxy connects to the replicas from 127.0.0.2 (``source``), with a PROXY v2 header and
health checks on ``/health``; the replicas trust that address alone (``trusted_proxies``),
so the test's own direct connections from 127.0.0.1 are plain local clients. Each replica
names itself to PostgreSQL (``application_name`` in its ``[storage] url``), which lets the
test see what a replica holds in the database.

* One pairing code pairs once through HAProxy, on whichever replica; a token revoked on one
  replica is refused by all (through HAProxy and directly) and its live connections are
  closed with 1008.
* ``kill -9`` of a replica mid-turn: every IDE request is answered exactly once, the bridge
  resumes on another replica, the next prompt works, the dead replica's hold on the session
  is gone (its database connections closed, the session's fencing epoch moved on and the new
  holder commits).
* A SIGTERM drain (runtime API first) moves a bridge mid-turn with no error.
* A token created on one replica (``zeroclaw gateway token create --name``) works on all,
  and its principal's session is, on every replica and through HAProxy, invisible to another
  principal: not listed, and its ``session/load`` answered as for a missing session.
* ``session/load`` from a fresh client shows every answered turn and no partial one.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest
import trio
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.e2e.gateway_harness import RunningGateway, WsRpc, run_gateway, ws_connect
from tests.e2e.haproxy_harness import RunningHaproxy, require_haproxy, run_haproxy
from tests.e2e.helpers import (
    RpcPipeClient,
    child_env,
    console_script,
    open_session,
    spawn_zeroclaw,
    unused_port,
)
from tests.helpers import echo_config, poll_until, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 300
WORD_DELAY_MS = 40
LONG_PROMPT = " ".join(f"w{n}" for n in range(60))  # about 2.4 s of streaming
PROXY_SOURCE = "127.0.0.2"
REPLICAS = ("a", "b", "c")
REVOCATION_DEADLINE_SECS = 3.0  # a second when idle; three for a loaded 2-core machine
BRIDGE_TOKEN_ENV = "ZEROCLAW_ACP_BRIDGE_TOKEN"

T = TypeVar("T")


@pytest.fixture
def haproxy_binary() -> str:
    return require_haproxy()


def application_name(replica: str) -> str:
    return f"zeroclaw-replica-{replica}"


def replica_config(tmp_path: Path, name: str, store_url: str) -> Path:
    """A replica on the shared PostgreSQL store, trusting HAProxy's source address only."""
    document = echo_config(chunk_delay_ms=WORD_DELAY_MS)
    document["workspace_dir"] = str(tmp_path / f"data-{name}")
    separator = "&" if "?" in store_url else "?"
    document["storage"] = {
        "url": f"{store_url}{separator}application_name={application_name(name)}"
    }
    document["gateway"] = {
        "require_pairing": True,
        "trusted_proxies": [PROXY_SOURCE],
        "proxy_protocol": True,
    }
    return write_config(tmp_path / f"replica-{name}", document)


async def in_database(url: str, query: str, *params: object) -> Any:
    """The first column of the first row of ``query``, run on a worker thread."""

    def run() -> Any:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(query, params).fetchone()
        return None if row is None else row[0]

    return await trio.to_thread.run_sync(run)


async def connections(gateway: RunningGateway) -> int:
    count: int = (await gateway.http("GET", "/health")).json()["connections"]
    return count


async def gateway_cli(gateway: RunningGateway, *args: str) -> subprocess.CompletedProcess[str]:
    """``zeroclaw gateway <args> --port <replica>``, against one replica directly."""
    result = await trio.run_process(
        [str(console_script("zeroclaw")), "gateway", *args, "--port", str(gateway.port)],
        env=child_env(gateway.config_dir),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


async def pair_through(haproxy: RunningHaproxy, code: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
        return await client.post(
            f"http://127.0.0.1:{haproxy.port}/pair", headers={"X-Pairing-Code": code}
        )


async def refused_status(url: str, token: str) -> int:
    with pytest.raises(InvalidStatus) as caught:
        async with ws_connect(url, token=token):
            pass
    return caught.value.response.status_code


async def closed_with(ws: Any, within: float) -> int:
    with pytest.raises(ConnectionClosed) as closed, trio.fail_after(within):
        await ws.recv()
    assert closed.value.rcvd is not None
    return int(closed.value.rcvd.code)


@asynccontextmanager
async def bridge(
    tmp_path: Path, haproxy: RunningHaproxy, name: str, token: str
) -> AsyncIterator[RpcPipeClient]:
    config_dir = tmp_path / f"bridge-{name}"
    config_dir.mkdir()
    async with spawn_zeroclaw(
        ["--url", haproxy.ws_url],
        config_dir=config_dir,
        env={BRIDGE_TOKEN_ENV: token},
        script="zeroclaw-acp-bridge",
    ) as ide:
        yield ide


def answer_counts(ide: RpcPipeClient) -> Counter[Any]:
    """How many responses the IDE got for each request id."""
    parsed = [json.loads(line) for line in ide.raw_lines]
    return Counter(m["id"] for m in parsed if "id" in m and "method" not in m)


def errors(ide: RpcPipeClient) -> list[dict[str, Any]]:
    return [m for m in map(json.loads, ide.raw_lines) if "error" in m]


async def prompt(ide: RpcPipeClient, session_id: str, text: str) -> None:
    reply = await ide.call("session/prompt", {"sessionId": session_id, "prompt": text}, within=60)
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply


async def start_long_turn(ide: RpcPipeClient, session_id: str) -> Any:
    """Send the long prompt and return its id once its first word has streamed."""
    prompt_id = await ide.prompt_request(session_id, LONG_PROMPT)
    first = await ide.receive(within=60)
    assert first["params"]["update"]["sessionUpdate"] == "agent_message_chunk", first
    return prompt_id


async def new_session_over(rpc: WsRpc, workspace: Path) -> str:
    assert "result" in await rpc.call("initialize", {"protocolVersion": 1})
    new = await rpc.call("session/new", {"cwd": str(workspace), "mcpServers": []})
    session_id: str = new["result"]["sessionId"]
    return session_id


async def listed_over(rpc: WsRpc) -> set[str]:
    """initialize, then session/list: the ids listed."""
    assert "result" in await rpc.call("initialize", {"protocolVersion": 1})
    reply = await rpc.call("session/list", {})
    return {session["sessionId"] for session in reply["result"]["sessions"]}


def load_params(session_id: str, workspace: Path) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}


async def holder(
    replicas: dict[str, RunningGateway], among: Callable[[str], bool], previous: set[str]
) -> str:
    """The replica (one of ``among``) that gained a connection beyond ``previous``'s."""
    found: list[str] = []

    async def one_more() -> bool:
        found.clear()
        for name, gateway in replicas.items():
            if among(name) and await connections(gateway) > (1 if name in previous else 0):
                found.append(name)
        return len(found) == 1

    await poll_until(one_more, within=30)
    return found[0]


async def test_three_replicas_on_postgres_behind_haproxy(
    tmp_path: Path, haproxy_binary: str, postgres_url: str
) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    ports = {name: unused_port() for name in REPLICAS}
    with trio.fail_after(TIMEOUT):
        async with AsyncExitStack() as stack:
            replicas: dict[str, RunningGateway] = {}
            for name in REPLICAS:
                config = replica_config(tmp_path, name, postgres_url)
                replicas[name] = await stack.enter_async_context(
                    run_gateway(config, "--port", str(ports[name]), expect_exit=None)
                )
            haproxy = await stack.enter_async_context(
                run_haproxy(haproxy_binary, tmp_path, sorted(ports.items()), source=PROXY_SOURCE)
            )

            # --- One pairing code pairs once, whichever replica HAProxy picks.
            codes = {gateway.pairing_code for gateway in replicas.values()}
            assert len(codes) == 1, codes  # the one shared code, shown by every replica
            code = codes.pop()
            assert code is not None
            paired = await pair_through(haproxy, code)
            assert paired.status_code == 200, paired.text
            token: str = paired.json()["token"]
            # Four refusals: the fifth wrong code in a row would lock pairing out.
            again = await pair_through(haproxy, code)
            assert again.status_code == 403, again.text
            for gateway in replicas.values():
                direct = await gateway.http("POST", "/pair", headers={"X-Pairing-Code": code})
                assert direct.status_code == 403, direct.text

            # --- A token revoked on one replica is refused by all.
            fresh = await gateway_cli(replicas["a"], "get-paircode", "--new")
            assert fresh.returncode == 0, fresh.stderr
            second = await pair_through(haproxy, fresh.stdout.strip())
            assert second.status_code == 200, second.text
            doomed: str = second.json()["token"]
            async with AsyncExitStack() as sockets:
                urls = [gateway.ws_url() for gateway in replicas.values()] + [haproxy.ws_url]
                live = [await sockets.enter_async_context(ws_connect(u, token=doomed)) for u in urls]  # fmt: skip
                for ws in live:
                    assert "result" in await WsRpc(ws).call("initialize", {"protocolVersion": 1})
                revoked = await gateway_cli(replicas["b"], "revoke-token", doomed)
                assert revoked.returncode == 0, revoked.stderr
                for ws in live:
                    assert await closed_with(ws, REVOCATION_DEADLINE_SECS) == 1008
            for url in [haproxy.ws_url] * len(REPLICAS) + urls:
                assert await refused_status(url, doomed) == 401, url

            # --- Principals: a token created on one replica works on all, and its session
            # is invisible to another principal on every replica, as a missing one is.
            created = await gateway_cli(replicas["c"], "token", "create", "--name", "carol")
            assert created.returncode == 0, created.stderr
            carol = created.stdout.strip()
            async with ws_connect(replicas["a"].ws_url(), token=carol) as ws:
                carol_session = await new_session_over(WsRpc(ws), workspace)
            missing = "00000000-0000-4000-8000-000000000000"
            for url in [gateway.ws_url() for gateway in replicas.values()] + [haproxy.ws_url]:
                async with ws_connect(url, token=carol) as ws:
                    assert carol_session in await listed_over(WsRpc(ws)), url
                async with ws_connect(url, token=token) as ws:
                    other = WsRpc(ws)
                    assert carol_session not in await listed_over(other), url
                    foreign = await other.call(
                        "session/load", load_params(carol_session, workspace)
                    )
                    absent = await other.call("session/load", load_params(missing, workspace))
                    assert json.dumps(foreign["error"]).replace(carol_session, "<id>") == (
                        json.dumps(absent["error"]).replace(missing, "<id>")
                    ), url

            async def all_idle() -> bool:
                return sum([await connections(g) for g in replicas.values()]) == 0

            await poll_until(all_idle, within=30)

            # --- Two bridges on two replicas, on the token that stays.
            ide = await stack.enter_async_context(bridge(tmp_path, haproxy, "ide", token))
            session_id = await open_session(ide, workspace)
            doomed_replica = await holder(replicas, lambda _: True, set())
            mover = await stack.enter_async_context(bridge(tmp_path, haproxy, "mover", token))
            mover_session = await open_session(mover, workspace)
            drained_replica = await holder(
                replicas, lambda name: name != doomed_replica, {doomed_replica}
            )
            await prompt(ide, session_id, "turn 0")
            await prompt(ide, session_id, "turn 1")
            await prompt(mover, mover_session, "mover 0")
            epoch_query = "SELECT owner_epoch FROM acp_sessions WHERE session_uuid = %s"
            epoch_before = await in_database(postgres_url, epoch_query, session_id)
            assert epoch_before is not None

            # --- kill -9 mid-turn: answered once, resumed elsewhere, the next prompt works.
            lost_id = await start_long_turn(ide, session_id)
            replicas[doomed_replica].process.kill()
            lost = await ide.wait_response(lost_id, within=60)
            assert lost["error"]["data"]["bridge"] == "connection_lost", lost
            assert lost["error"]["data"]["reconnecting"] is True, lost
            await prompt(ide, session_id, "turn 2")
            living = [name for name in REPLICAS if name != doomed_replica]
            assert sum([await connections(replicas[name]) for name in living]) == 2
            # The dead replica holds nothing: PostgreSQL closed its connections (and with them
            # any session-level lock), the epoch moved on and the new holder committed turn 2.
            backends = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"

            async def dead_replica_gone() -> bool:
                left = await in_database(postgres_url, backends, application_name(doomed_replica))
                return bool(left == 0)

            await poll_until(dead_replica_gone, within=60)
            epoch_after = await in_database(postgres_url, epoch_query, session_id)
            assert epoch_after > epoch_before
            await haproxy.wait_status(doomed_replica, "DOWN", within=30)

            # --- A SIGTERM drain moves the mover, mid-turn, with no error.
            await haproxy.runtime(f"set server gateways/{drained_replica} state drain")
            await haproxy.wait_status(drained_replica, "DRAIN")
            moving_id = await start_long_turn(mover, mover_session)
            replicas[drained_replica].signal(signal.SIGTERM)
            finished = await mover.wait_response(moving_id, within=60)
            assert finished.get("result", {}).get("stopReason") == "end_turn", finished
            assert await replicas[drained_replica].wait_exit(within=60) == 0
            await prompt(mover, mover_session, "mover after the drain")
            await prompt(ide, session_id, "turn 3")
            (survivor,) = [name for name in living if name != drained_replica]
            assert await connections(replicas[survivor]) == 2
            assert errors(mover) == []
            assert errors(ide) == [lost]  # the one connection-lost answer, nothing else
            for client in (ide, mover):
                counts = answer_counts(client)
                assert set(counts.values()) == {1}, counts

            # --- A fresh client through HAProxy loads every answered turn, not the lost one.
            async with ws_connect(haproxy.ws_url, token=token) as ws:
                rpc = WsRpc(ws)
                await rpc.call("initialize", {"protocolVersion": 1})
                loaded = await rpc.call(
                    "session/load", {"sessionId": session_id, "cwd": str(workspace)}
                )
                assert loaded["result"].keys() == {"modes", "configOptions"}, loaded
                replay = [n["params"]["update"] for n in rpc.notifications]
            said = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]  # fmt: skip
            assert said == ["turn 0", "turn 1", "turn 2", "turn 3"]
            replayed_text = " ".join(str(u.get("content", {}).get("text", "")) for u in replay)
            assert "w0" not in replayed_text.split()
