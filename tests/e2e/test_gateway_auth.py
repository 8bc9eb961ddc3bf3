"""`zeroclaw gateway` end to end: tokens, 401 before upgrade, pairing, lockout, origins."""

from __future__ import annotations

import ssl
import stat
import subprocess
import tomllib
from pathlib import Path

import httpx
import pytest
import tomli_w
import trio
from websockets.exceptions import ConnectionClosed, InvalidMessage, InvalidStatus
from websockets.trio.client import connect

from acp_server.gateway.admin import ADMIN_HEADER, ADMIN_SECRET_FILE
from acp_server.gateway.auth import UNAUTHORIZED_BODY, hash_token
from tests.e2e.gateway_harness import RawWsClient, WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


def _config_dir(tmp_path: Path) -> Path:
    return write_config(tmp_path / "cfg", echo_config())


async def _expect_401(url: str, **kwargs: object) -> None:
    with pytest.raises(InvalidStatus) as caught:
        async with ws_connect(url, **kwargs):  # type: ignore[arg-type]
            pass
    response = caught.value.response
    assert response.status_code == 401
    assert response.body is not None
    assert response.body.decode().strip() == UNAUTHORIZED_BODY
    assert response.headers["WWW-Authenticate"] == "Bearer"


async def test_pairing_then_each_token_form_is_accepted(tmp_path: Path) -> None:
    config_dir = _config_dir(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is not None
            operator = {ADMIN_HEADER: (config_dir / ADMIN_SECRET_FILE).read_text().strip()}
            code_page = (await gateway.http("GET", "/pair/code", headers=operator)).json()
            assert code_page == {
                "success": True,
                "pairing_required": True,
                "pairing_code": gateway.pairing_code,
            }
            # A local process without the admin secret is not the operator.
            anyone = (await gateway.http("GET", "/pair/code")).json()
            assert anyone["pairing_code"] is None
            assert "get-paircode" in anyone["message"]
            token = await gateway.pair()
            assert token.startswith("zc_")
            assert len(token) == 67
            # The code was consumed; only the digest is on disk, other settings intact.
            assert (await gateway.http("GET", "/pair/code")).json()["pairing_code"] is None
            document = tomllib.loads((config_dir / "config.toml").read_text())
            assert document["gateway"]["paired_tokens"] == [hash_token(token)]
            assert document["agents"]["echo"]["model_provider"] == "echo.default"
            assert token not in (config_dir / "config.toml").read_text()

            for how in ("header", "subprotocol", "query"):
                async with ws_connect(gateway.ws_url(), token=token, how=how) as ws:
                    # zeroclaw.acp.v1 is selected; the bearer.* entry is never echoed.
                    assert ws.subprotocol == "zeroclaw.acp.v1"
                    rpc = WsRpc(ws)
                    init = await rpc.call("initialize", {"protocolVersion": 1})
                    assert init["result"]["protocolVersion"] == 1
            async with ws_connect(gateway.ws_url(), token=token, subprotocols=()) as ws:
                assert ws.subprotocol is None

            # Missing and wrong tokens: 401 before any upgrade, the body names the 3 ways.
            await _expect_401(gateway.ws_url())
            await _expect_401(gateway.ws_url(), token="zc_" + "0" * 64)
            await _expect_401(gateway.ws_url(), token=token + "x", how="subprotocol")
            await _expect_401(gateway.ws_url(), token="nope", how="query")
            assert token not in gateway.stderr()  # tokens never reach the log

        # Restart: the persisted digest still authenticates, and no code is printed.
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is None
            async with ws_connect(gateway.ws_url(), token=token) as ws:
                init = await WsRpc(ws).call("initialize", {})
                assert "result" in init


async def test_wrong_codes_lock_out_and_get_paircode_recovers(tmp_path: Path) -> None:
    config_dir = _config_dir(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is not None
            wrong = "000000" if gateway.pairing_code != "000000" else "111111"
            statuses = []
            for _ in range(5):
                response = await gateway.http("POST", "/pair", headers={"X-Pairing-Code": wrong})
                statuses.append(response.status_code)
            assert statuses == [403, 403, 403, 403, 429]
            # Locked: even the right code is refused, with a retry_after.
            locked = await gateway.http(
                "POST", "/pair", headers={"X-Pairing-Code": gateway.pairing_code}
            )
            assert locked.status_code == 429
            assert locked.json()["retry_after"] > 0
            assert int(locked.headers["Retry-After"]) > 0

            # The operator issues a fresh code from the same machine: the lockout is lifted.
            fresh = await _get_paircode(config_dir, gateway.port, "--new")
            assert fresh.returncode == 0, fresh.stderr
            new_code = fresh.stdout.strip()
            assert len(new_code) == 6
            assert new_code.isdigit()
            token = await gateway.pair(new_code)

            # Without --new there is no active code any more (it was consumed).
            again = await _get_paircode(config_dir, gateway.port)
            assert again.returncode == 1
            assert "get-paircode --new" in again.stderr

            # --rotate revokes every token: a live connection is closed with 1008 (stop,
            # do not retry) and the old token is refused afterwards.
            async with ws_connect(gateway.ws_url(), token=token) as ws:
                rotated = await _get_paircode(config_dir, gateway.port, "--rotate")
                assert rotated.returncode == 0, rotated.stderr
                assert "revoked 1 token" in rotated.stderr
                with pytest.raises(ConnectionClosed) as closed:
                    with trio.fail_after(10):
                        await ws.recv()
                assert closed.value.rcvd is not None
                assert closed.value.rcvd.code == 1008
            await _expect_401(gateway.ws_url(), token=token)
            document = tomllib.loads((config_dir / "config.toml").read_text())
            assert document["gateway"]["paired_tokens"] == []
            assert (await gateway.http("GET", "/health")).json()["paired"] is False


async def test_a_code_after_rotate_is_shown_only_through_the_admin_path(tmp_path: Path) -> None:
    """Before the first pairing after `get-paircode --rotate`, `GET /pair/code` gives any
    local process nothing; the code printed by get-paircode (admin secret) still pairs."""
    config_dir = _config_dir(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            await gateway.pair()
            rotated = await _get_paircode(config_dir, gateway.port, "--rotate")
            assert rotated.returncode == 0, rotated.stderr
            assert len(rotated.stdout.strip()) == 6
            page = (await gateway.http("GET", "/pair/code")).json()
            assert page["pairing_code"] is None
            assert "get-paircode" in page["message"]
            fresh = await _get_paircode(config_dir, gateway.port, "--new")
            assert fresh.returncode == 0, fresh.stderr
            assert (await gateway.http("GET", "/pair/code")).json()["pairing_code"] is None
            # The admin path shows it, and it pairs.
            shown = await _get_paircode(config_dir, gateway.port)
            assert shown.stdout.strip() == fresh.stdout.strip()
            assert (await gateway.pair(fresh.stdout.strip())).startswith("zc_")


async def test_pairing_keeps_an_annotated_config_as_written(tmp_path: Path) -> None:
    """The token digest lands in config.toml with every comment and the layout intact."""
    annotated = (
        "# Build box: ask ops before changing this file.\n"
        + tomli_w.dumps(echo_config())
        + "\n[gateway]\n# the default, stated for the auditors\n"
        + "pair_rate_limit_per_minute = 10   # per minute\n"
    )
    config_dir = write_config(tmp_path / "cfg", annotated)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            token = await gateway.pair()
    assert (config_dir / "config.toml").read_text() == (
        annotated + f'paired_tokens = ["{hash_token(token)}"]\n'
    )


async def _get_paircode(
    config_dir: Path, port: int, *flags: str
) -> subprocess.CompletedProcess[str]:
    result = await trio.run_process(
        [str(console_script("zeroclaw")), "gateway", "get-paircode", "--port", str(port), *flags],
        env=child_env(config_dir),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


async def test_rate_limit_per_minute(tmp_path: Path) -> None:
    document = echo_config()
    document["gateway"] = {"pair_rate_limit_per_minute": 3}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(30):
        async with run_gateway(config_dir) as gateway:
            responses = [
                await gateway.http("POST", "/pair", headers={"X-Pairing-Code": "x"})
                for _ in range(4)
            ]
            assert [r.status_code for r in responses] == [403, 403, 403, 429]
            # The limit says when to come back, in the body and the header; even the right
            # code waits (the limit counts attempts, not failures).
            limited = responses[-1]
            assert 0 < limited.json()["retry_after"] <= 60
            assert int(limited.headers["Retry-After"]) == limited.json()["retry_after"]
            assert gateway.pairing_code is not None
            right = await gateway.http(
                "POST", "/pair", headers={"X-Pairing-Code": gateway.pairing_code}
            )
            assert right.status_code == 429


async def test_health_needs_no_auth_and_origins_are_checked(tmp_path: Path) -> None:
    document = echo_config()
    document["gateway"] = {"allowed_origins": ["https://ide.example.com"]}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(30):
        async with run_gateway(config_dir) as gateway:
            health = await gateway.http("GET", "/health")
            assert health.status_code == 200
            assert health.json()["status"] == "ok"
            token = await gateway.pair()
            # A page from another site cannot use the gateway, even with a token...
            with pytest.raises(InvalidStatus) as caught:
                async with ws_connect(gateway.ws_url(), token=token, origin="http://evil.example"):
                    pass
            assert caught.value.response.status_code == 403
            # ...while loopback and listed origins can.
            for origin in ("http://localhost:5173", "https://ide.example.com"):
                async with ws_connect(gateway.ws_url(), token=token, origin=origin) as ws:
                    assert "result" in await WsRpc(ws).call("initialize", {})
            # DNS rebinding: a foreign Host header is refused on a loopback-bound gateway.
            rebound = await gateway.http("GET", "/pair/code", headers={"Host": "evil.example"})
            assert rebound.status_code == 403
            # The admin endpoint refuses browsers, and local callers without the secret
            # that only readers of the config directory have (0600 file).
            secret_file = config_dir / ADMIN_SECRET_FILE
            assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
            secret = secret_file.read_text().strip()
            browser = await gateway.http(
                "POST",
                "/admin/paircode/rotate",
                headers={"Origin": "http://localhost:1", ADMIN_HEADER: secret},
            )
            assert browser.status_code == 403
            for presented in ({}, {ADMIN_HEADER: "0" * 64}):
                assert (
                    await gateway.http("GET", "/admin/paircode", headers=presented)
                ).status_code == 403
            allowed = await gateway.http("GET", "/admin/paircode", headers={ADMIN_HEADER: secret})
            assert allowed.status_code == 200
        assert not secret_file.exists()  # removed at shutdown
        # With no gateway running, get-paircode says so.
        orphan = await _get_paircode(config_dir, gateway.port)
        assert orphan.returncode == 1
        assert "no running gateway" in orphan.stderr


async def test_pairing_off_needs_no_token(tmp_path: Path) -> None:
    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(30):
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is None
            raw = await RawWsClient.open(gateway.port, token=None)
            await raw.send_json({"jsonrpc": "2.0", "id": 1, "method": "initialize"})
            assert (await raw.next_json())["id"] == 1
            await raw.vanish()


async def test_public_bind_is_refused_without_opt_in(tmp_path: Path) -> None:
    config_dir = _config_dir(tmp_path)
    result = await trio.run_process(
        [str(console_script("zeroclaw")), "gateway", "--host", "0.0.0.0", "--port", "0"],
        env=child_env(config_dir),
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == 2
    assert b"allow_public_bind = true" in result.stderr


async def test_tls_gateway_and_get_paircode_over_https(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    await trio.run_process(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        capture_stdout=True,
        capture_stderr=True,
    )  # fmt: skip
    document = echo_config()
    document["gateway"] = {"tls": {"enabled": True, "cert_path": str(cert), "key_path": str(key)}}
    config_dir = write_config(tmp_path / "cfg", document)
    context = ssl.create_default_context(cafile=str(cert))
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            assert "https://127.0.0.1" in gateway.stderr()
            assert "wss://127.0.0.1" in gateway.stderr()
            printed = await _get_paircode(config_dir, gateway.port)
            assert printed.returncode == 0, printed.stderr
            assert printed.stdout.strip() == gateway.pairing_code
            async with httpx.AsyncClient(verify=context, trust_env=False) as client:
                response = await client.post(
                    f"https://127.0.0.1:{gateway.port}/pair",
                    headers={"X-Pairing-Code": printed.stdout.strip()},
                )
            token = response.json()["token"]
            url = f"wss://127.0.0.1:{gateway.port}/acp"
            async with connect(
                url,
                ssl=context,
                proxy=None,
                additional_headers={"Authorization": f"Bearer {token}"},
            ) as ws:
                init = await WsRpc(ws).call("initialize", {})
                assert init["result"]["protocolVersion"] == 1
            # Plain ws:// to a TLS port fails cleanly and the gateway keeps serving.
            with pytest.raises((OSError, InvalidStatus, InvalidMessage)):
                async with ws_connect(gateway.ws_url(), token=token):
                    pass
            assert (await _https_health(gateway.port, context)) == 200


async def _https_health(port: int, context: ssl.SSLContext) -> int:
    async with httpx.AsyncClient(verify=context, trust_env=False) as client:
        return (await client.get(f"https://127.0.0.1:{port}/health")).status_code
