"""Streamable HTTP in operation: a drain on SIGTERM, and replicas behind a real HAProxy.

* SIGTERM while a turn waits for the client's permission answer: the answer, POSTed on a
  new TCP connection during the drain, still gets through and the turn finishes; a new
  request on the connection is refused on its stream ("restarting"); a new connection is
  refused 503, and so is ``/health`` (out of a balancer's rotation); the streams end saying
  "gateway restarting, retry"; the exit is 0.
* Two replicas on one store behind HAProxy (PROXY protocol, a sticky cookie): the official
  Python SDK's HTTP client runs a whole session through it, every request of a connection
  reaching the replica that holds it, and a second connection sent to the other replica
  loads the session there.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from acp_server.gateway.auth import hash_token
from tests.e2e.acp_sdk_http import FIRST_PROMPT, FIRST_TEXT, run_python_sdk_flow
from tests.e2e.gateway_harness import run_gateway
from tests.e2e.haproxy_harness import replica_health, require_haproxy, run_haproxy
from tests.e2e.helpers import unused_port
from tests.e2e.streamable_http_client import HttpAcpClient
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 120
TOKEN = "zc_" + "c" * 64
STICKY_COOKIE = "ZCREPLICA"


async def test_sigterm_drains_a_streamable_http_connection(tmp_path: Path) -> None:
    document = echo_config(chunk_delay_ms=20)
    document["gateway"] = {"require_pairing": True, "paired_tokens": [hash_token(TOKEN)]}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir, "--drain-timeout", "20") as gateway:
            client = HttpAcpClient(gateway.base_url, TOKEN)
            await client.initialize()
            async with client.events() as connection_stream:
                new = client.request("session/new", {"cwd": str(session_dir(tmp_path))})
                await client.post(new)
                replies = await connection_stream.until(lambda m: m.get("id") == new["id"])
                session_id = replies[-1]["result"]["sessionId"]
                async with client.events(session_id) as session_stream:
                    prompt = client.request(
                        "session/prompt",
                        {"sessionId": session_id, "prompt": [{"type": "text", "text": "Drain\n/tool shell {\"command\": \"ls\"}"}]},
                    )  # fmt: skip
                    await client.post(prompt, session_id=session_id)
                    asked = await session_stream.until(
                        lambda m: m.get("method") == "session/request_permission"
                    )
                    permission = asked[-1]

                    gateway.signal(signal.SIGTERM)
                    await gateway.log.wait_for("still accepting for 1 Streamable HTTP")
                    # Still listening, but out of a load balancer's rotation.
                    health = await gateway.http("GET", "/health")
                    assert (health.status_code, health.json()["status"]) == (503, "draining")
                    # New work on the connection is refused on its stream, with a reason...
                    late = client.request("session/new", {"cwd": str(session_dir(tmp_path))})
                    assert (await client.post(late)).status_code == 202
                    refusal = await connection_stream.until(lambda m: m.get("id") == late["id"])
                    assert refusal[-1]["error"]["code"] == -32603
                    assert "restarting" in refusal[-1]["error"]["message"]
                    # ...a new connection is refused outright...
                    newcomer = HttpAcpClient(gateway.base_url, TOKEN)
                    opening = await newcomer.post(newcomer.request("initialize", {}))
                    assert opening.status_code == 503
                    assert opening.headers["Retry-After"] == "1"
                    await newcomer.aclose()
                    # ...while the permission answer, on a new TCP connection, gets through.
                    option = permission["params"]["options"][0]["optionId"]
                    answer = {
                        "jsonrpc": "2.0",
                        "id": permission["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": option}},
                    }
                    assert (await client.post(answer, session_id=session_id)).status_code == 202
                    rest = await session_stream.until(lambda m: m.get("id") == prompt["id"])
                    assert rest[-1]["result"]["stopReason"] == "end_turn"
                    # Then both streams end, saying why.
                    for stream in (session_stream, connection_stream):
                        event_id, comment = await stream.next()
                        assert event_id is None
                        assert comment == {"comment": "gateway restarting, retry"}
                        with pytest.raises(StopAsyncIteration):
                            await stream.next()
            await client.aclose()
            assert await gateway.wait_exit() == 0


def _replica_config(tmp_path: Path, name: str) -> Path:
    document = echo_config(chunk_delay_ms=10)
    document["workspace_dir"] = str(tmp_path / "shared")  # one store for both replicas
    document["gateway"] = {
        "require_pairing": True,
        "paired_tokens": [hash_token(TOKEN)],
        "trusted_proxies": ["127.0.0.1"],
        "proxy_protocol": True,
    }
    return write_config(tmp_path / f"replica-{name}", document)


async def test_the_python_sdk_through_haproxy_with_a_sticky_cookie(tmp_path: Path) -> None:
    haproxy_binary = require_haproxy()
    ports = {"a": unused_port(), "b": unused_port()}
    cwd = str(session_dir(tmp_path))
    with trio.fail_after(TIMEOUT):
        async with (
            run_gateway(_replica_config(tmp_path, "a"), "--port", str(ports["a"])),
            run_gateway(_replica_config(tmp_path, "b"), "--port", str(ports["b"])),
            run_haproxy(
                haproxy_binary, tmp_path, sorted(ports.items()), sticky_cookie=STICKY_COOKIE
            ) as haproxy,
        ):
            url = f"http://127.0.0.1:{haproxy.port}/acp"
            # The second connection carries the cookie of a replica: "b". Whichever replica
            # the first one got, the session is then loaded from the store by "b".
            seen = await trio.to_thread.run_sync(
                lambda: run_python_sdk_flow(url, TOKEN, cwd, {STICKY_COOKIE: "b"})
            )
            for port in ports.values():
                assert (await replica_health(port))["connections"] == 0
    # Every request of the first connection went to the replica its cookie names (a POST
    # landing elsewhere would have been 404: that replica does not know the connection).
    assert seen["cookies"][STICKY_COOKIE] in ports
    assert seen["second_cookies"][STICKY_COOKIE] == "b"
    assert seen["stop_reason"] == "end_turn"
    assert seen["first_text"] == FIRST_TEXT
    assert seen["permissions"] == ["`ls`"]
    assert seen["cancelled"] == "cancelled"
    assert seen["replayed_prompt"] == [FIRST_PROMPT]
