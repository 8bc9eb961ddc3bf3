"""Two real `zeroclaw gateway` replicas on one PostgreSQL store share tokens and pairing.

A token paired through one replica works on the other; one pairing code pairs once across
both; a token revoked on one (`zeroclaw gateway revoke-token`, `get-paircode --rotate`) is
refused by the other, whose live connection with it is closed with 1008 within a second.
Without a PostgreSQL store, `revoke-token` works on the one gateway and its config.toml.
"""

from __future__ import annotations

import subprocess
import time
import tomllib
from pathlib import Path

import pytest
import trio
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.trio.client import ClientConnection

from acp_server.gateway.auth import hash_token
from tests.e2e.gateway_harness import RunningGateway, WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 90
REVOCATION_DEADLINE_SECS = 1.0


def _replica_config(tmp_path: Path, name: str, url: str | None, **gateway: object) -> Path:
    document = {**echo_config(), "gateway": dict(gateway)}
    if url is not None:
        document["storage"] = {"url": url}
    return write_config(tmp_path / name, document)


async def _gateway_cli(config_dir: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    result = await trio.run_process(
        [str(console_script("zeroclaw")), "gateway", *args, "--port", str(port)],
        env=child_env(config_dir),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


async def _refused(gateway: RunningGateway, token: str) -> int:
    with pytest.raises(InvalidStatus) as caught:
        async with ws_connect(gateway.ws_url(), token=token):
            pass
    return caught.value.response.status_code


async def _initialized(ws: ClientConnection) -> None:
    reply = await WsRpc(ws).call("initialize", {"protocolVersion": 1})
    assert "result" in reply, reply


async def _closed_code(ws: ClientConnection, within: float) -> int:
    with pytest.raises(ConnectionClosed) as closed, trio.fail_after(within):
        await ws.recv()
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


async def test_a_token_revoked_on_one_replica_is_refused_and_cut_on_the_other(
    tmp_path: Path, postgres_url: str
) -> None:
    first_dir = _replica_config(tmp_path, "first", postgres_url)
    second_dir = _replica_config(tmp_path, "second", postgres_url)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(first_dir) as first, run_gateway(second_dir) as second:
            # Both replicas show the one code; it pairs once, on whichever is asked first.
            assert first.pairing_code is not None
            assert second.pairing_code == first.pairing_code
            token = await second.pair(first.pairing_code)
            again = await first.http(
                "POST", "/pair", headers={"X-Pairing-Code": first.pairing_code}
            )
            assert again.status_code == 403
            assert (await first.http("GET", "/health")).json()["paired"] is True

            async with (
                ws_connect(first.ws_url(), token=token) as on_first,
                ws_connect(second.ws_url(), token=token) as on_second,
            ):
                await _initialized(on_first)
                await _initialized(on_second)
                revoked = await _gateway_cli(first_dir, first.port, "revoke-token", token)
                asked_at = time.monotonic()
                assert revoked.returncode == 0, revoked.stderr
                assert f"revoked 1 token(s) ({hash_token(token)[:12]})" in revoked.stderr
                # The other replica heard it: its live connection is closed, "stop, pair again".
                assert await _closed_code(on_second, REVOCATION_DEADLINE_SECS) == 1008
                latency = time.monotonic() - asked_at
                assert await _closed_code(on_first, REVOCATION_DEADLINE_SECS) == 1008
            assert latency < REVOCATION_DEADLINE_SECS
            assert await _refused(second, token) == 401
            assert await _refused(first, token) == 401
            assert (await second.http("GET", "/health")).json()["paired"] is False
    # The shared store is the record: neither config.toml was rewritten.
    for config_dir in (first_dir, second_dir):
        document = tomllib.loads((config_dir / "config.toml").read_text())
        assert "paired_tokens" not in document["gateway"]


async def test_config_tokens_are_shared_and_rotate_on_one_replica_revokes_them_on_all(
    tmp_path: Path, postgres_url: str
) -> None:
    old_token = "zc_" + "ab" * 32
    first_dir = _replica_config(
        tmp_path, "first", postgres_url, paired_tokens=[hash_token(old_token)]
    )
    second_dir = _replica_config(tmp_path, "second", postgres_url)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(first_dir) as first, run_gateway(second_dir) as second:
            assert first.pairing_code is None  # config.toml's token was imported: paired
            assert second.pairing_code is None
            async with ws_connect(second.ws_url(), token=old_token) as on_second:
                await _initialized(on_second)
                rotated = await _gateway_cli(second_dir, second.port, "get-paircode", "--rotate")
                assert rotated.returncode == 0, rotated.stderr
                assert "revoked 1 token" in rotated.stderr
                assert await _closed_code(on_second, REVOCATION_DEADLINE_SECS) == 1008
            assert await _refused(first, old_token) == 401
            code = rotated.stdout.strip()
            # The code the operator got from one replica is every replica's, and pairs once.
            shown = await _gateway_cli(first_dir, first.port, "get-paircode")
            assert shown.stdout.strip() == code
            token = await first.pair(code)
            assert (
                await second.http("POST", "/pair", headers={"X-Pairing-Code": code})
            ).status_code == 403
            async with ws_connect(second.ws_url(), token=token) as ws:
                await _initialized(ws)
        # A restart imports config.toml again, which brings the revoked token back nowhere.
        async with run_gateway(first_dir) as restarted:
            assert await _refused(restarted, old_token) == 401


async def test_revoke_token_without_a_shared_store_rewrites_config_toml(tmp_path: Path) -> None:
    config_dir = _replica_config(tmp_path, "cfg", None)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            kept = await gateway.pair()
            fresh = await _gateway_cli(config_dir, gateway.port, "get-paircode", "--new")
            revoked_token = await gateway.pair(fresh.stdout.strip())
            prefix = hash_token(revoked_token)[:10]
            async with (
                ws_connect(gateway.ws_url(), token=kept) as stays,
                ws_connect(gateway.ws_url(), token=revoked_token) as cut,
            ):
                await _initialized(stays)
                await _initialized(cut)
                bad = await _gateway_cli(config_dir, gateway.port, "revoke-token", "abc")
                assert bad.returncode == 1
                assert "at least 8 hex digits" in bad.stderr
                done = await _gateway_cli(config_dir, gateway.port, "revoke-token", prefix)
                assert done.returncode == 0, done.stderr
                assert await _closed_code(cut, REVOCATION_DEADLINE_SECS) == 1008
                # The other token's connection is untouched.
                listed = await WsRpc(stays).call("session/list", {})
                assert "result" in listed, listed
            assert await _refused(gateway, revoked_token) == 401
            document = tomllib.loads((config_dir / "config.toml").read_text())
            assert document["gateway"]["paired_tokens"] == [hash_token(kept)]
            everything = await _gateway_cli(config_dir, gateway.port, "revoke-token", "--all")
            assert everything.returncode == 0, everything.stderr
            assert await _refused(gateway, kept) == 401
