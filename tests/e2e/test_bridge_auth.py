"""Tokens, pairing, --check and the error exits of the real bridge process."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import pytest
import trio

from tests.bridge.harness import (
    ISSUED_TOKEN,
    FakeGateway,
    bridge_env,
    jsonrpc_request,
    run_bridge,
    running_bridge,
    running_gateway,
    write_config,
    write_token_file,
)

pytestmark = pytest.mark.e2e

TIMEOUT = 20
NO_TOKEN = "ERROR: Gateway pairing is active but no ACP bridge token is cached."


async def _echo_once(config_dir: Path, env: dict[str, str], *args: str) -> tuple[int, str]:
    """Run a bridge for one request/reply; returns (exit code, stderr)."""
    async with running_bridge("--config-dir", str(config_dir), *args, env=env) as bridge:
        await bridge.send_line(jsonrpc_request(1, "test/echo"))
        reply = await bridge.read_line()
        await bridge.close_stdin()
        code = await bridge.wait()
    if code == 0:
        assert reply.startswith(b'{"jsonrpc":"2.0","id":1,"result"')
    return code, bridge.stderr_text


async def test_env_token_wins_over_cached_file(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="from-env")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            write_token_file(config_dir, "from-file")
            env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": " from-env \n"})
            assert (await _echo_once(config_dir, env))[0] == 0
            assert gateway.upgrade_requests[0].headers["Authorization"] == "Bearer from-env"


async def test_cached_file_is_used_without_env(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="from-file", pairing_code="111111")) as gw:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gw.port)
            write_token_file(config_dir, "from-file")
            assert (await _echo_once(config_dir, bridge_env(tmp_path)))[0] == 0
            assert gw.http_requests == []  # no pairing attempted


async def test_no_token_is_sent_when_pairing_is_not_required(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway()) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port, require_pairing=False)
            env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "secret"})
            assert (await _echo_once(config_dir, env))[0] == 0
            assert "Authorization" not in gateway.upgrade_requests[0].headers


async def test_pairing_with_the_gateway_code_caches_the_token_0600(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(
            FakeGateway(token="nobody-has-this", pairing_code="424242")
        ) as gw:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gw.port)
            assert (await _echo_once(config_dir, bridge_env(tmp_path)))[0] == 0
            assert [(r.method, r.path) for r in gw.http_requests] == [
                ("GET", "/pair/code"),
                ("POST", "/pair"),
            ]
            assert gw.http_requests[1].headers["X-Pairing-Code"] == "424242"
            assert gw.upgrade_requests[-1].headers["Authorization"] == f"Bearer {ISSUED_TOKEN}"
    token_file = config_dir / "acp-bridge-token"
    assert token_file.read_text() == ISSUED_TOKEN + "\n"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    # The atomic write leaves no temporary file behind.
    assert {p.name for p in config_dir.iterdir()} == {"config.toml", "acp-bridge-token"}


@pytest.mark.parametrize("how", ["flag", "env"])
async def test_pairing_with_a_given_code_skips_the_code_endpoint(tmp_path: Path, how: str) -> None:
    gateway = FakeGateway(token="x", pairing_code="777001", show_pairing_code=False)
    with trio.fail_after(TIMEOUT):
        async with running_gateway(gateway) as gw:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gw.port)
            args = ["--pair-code", "777001"] if how == "flag" else []
            env = bridge_env(
                tmp_path, {"ZEROCLAW_ACP_PAIRING_CODE": "777001"} if how == "env" else {}
            )
            code, stderr = await _echo_once(config_dir, env, *args, "--log-level", "debug")
            assert code == 0
            assert [(r.method, r.path) for r in gw.http_requests] == [("POST", "/pair")]
    assert (config_dir / "acp-bridge-token").read_text().strip() == ISSUED_TOKEN
    # Secrets never reach the logs, even at debug level.
    assert ISSUED_TOKEN not in stderr
    assert "777001" not in stderr
    assert "<redacted>" in stderr


async def test_wrong_pairing_code_exits_3_with_advice(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="x", pairing_code="123456")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            code, stdout, stderr = await run_bridge(
                "--config-dir", str(config_dir), "--pair-code", "999999", env=bridge_env(tmp_path)
            )
    assert code == 3
    assert stdout == b""
    assert "gateway returned 403 (Invalid pairing code)" in stderr
    assert "zeroclaw gateway get-paircode --new" in stderr
    assert not (config_dir / "acp-bridge-token").exists()


async def test_no_token_available_prints_zeroclaw_message(tmp_path: Path) -> None:
    gateway = FakeGateway(token="x", pairing_code="123456", show_pairing_code=False)
    with trio.fail_after(TIMEOUT):
        async with running_gateway(gateway) as gw:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gw.port)
            code, stdout, stderr = await run_bridge(
                "--config-dir", str(config_dir), env=bridge_env(tmp_path)
            )
    assert (code, stdout) == (2, b"")
    assert NO_TOKEN in stderr
    assert "zeroclaw-acp-bridge --pair-code <code>" in stderr
    assert gw.upgrade_requests == []


async def test_group_readable_token_file_is_refused(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="tok")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            path = write_token_file(config_dir, "tok", mode=0o640)
            code, _, stderr = await run_bridge(
                "--config-dir", str(config_dir), env=bridge_env(tmp_path)
            )
            assert gateway.upgrade_requests == []
    assert code == 2
    assert f"chmod 600 {path}" in stderr
    assert "mode 0640" in stderr


@pytest.mark.parametrize(
    ("writable", "mode"),
    [("file", 0o664), ("file", 0o602), ("dir", 0o775), ("dir", 0o777)],
    ids=["file-0664", "file-0602", "dir-0775", "dir-0777"],
)
async def test_a_config_others_can_write_is_refused_before_any_token_is_sent(
    tmp_path: Path, writable: str, mode: int
) -> None:
    """config.toml decides where the token goes: when group or others can write it (or its
    directory), the bridge exits 2 without contacting the gateway."""
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="tok", pairing_code="123456")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            config_dir.chmod(0o700)
            write_token_file(config_dir, "tok")
            path = config_dir / "config.toml" if writable == "file" else config_dir
            path.chmod(mode)
            code, _, stderr = await run_bridge(
                "--config-dir", str(config_dir), env=bridge_env(tmp_path)
            )
            assert gateway.upgrade_requests == []
            assert gateway.http_requests == []
    assert code == 2
    assert f"chmod go-w {path}" in stderr
    assert f"mode {mode:04o}" in stderr


@pytest.mark.parametrize("source", ["env", "file"])
async def test_401_exits_3_with_advice_and_never_retries(tmp_path: Path, source: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="the-right-one")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            extra = {}
            if source == "env":
                extra["ZEROCLAW_ACP_BRIDGE_TOKEN"] = "revoked-token"
            else:
                write_token_file(config_dir, "revoked-token")
            code, stdout, stderr = await run_bridge(
                "--config-dir", str(config_dir), env=bridge_env(tmp_path, extra)
            )
            assert len(gateway.upgrade_requests) == 1
    assert (code, stdout) == (3, b"")
    assert "HTTP 401" in stderr
    assert "revoked-token" not in stderr
    if source == "env":
        assert "ZEROCLAW_ACP_BRIDGE_TOKEN was rejected" in stderr
    else:
        assert "Delete that file" in stderr
        assert str(config_dir / "acp-bridge-token") in stderr


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_connection_refused_exits_1_naming_the_url(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    port = _closed_port()
    write_config(config_dir, port, require_pairing=False)
    with trio.fail_after(TIMEOUT):
        code, stdout, stderr = await run_bridge(
            "--config-dir", str(config_dir), env=bridge_env(tmp_path)
        )
    assert (code, stdout) == (1, b"")
    assert f"failed to connect to ws://127.0.0.1:{port}/acp" in stderr


async def test_missing_config_exits_1_with_zeroclaw_message(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        code, _, stderr = await run_bridge(
            env=bridge_env(tmp_path, {"ZEROCLAW_CONFIG_DIR": str(tmp_path / "nowhere")})
        )
    assert code == 1
    assert stderr.startswith("ERROR: config.toml not found.  Are you sure the bridge and ")
    assert str(tmp_path / "nowhere" / "config.toml") in stderr


async def test_usage_errors_exit_2(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        code, _, stderr = await run_bridge("--config-dir", env=bridge_env(tmp_path))
        assert (code, stderr.splitlines()[-1]) == (
            2,
            "zeroclaw-acp-bridge: error: --config-dir requires a path value",
        )
        code, _, stderr = await run_bridge("--url", "http://x/acp", env=bridge_env(tmp_path))
        assert code == 2
        assert "--url must be a ws:// or wss:// URL" in stderr


async def test_check_reports_url_agent_protocol_and_latency(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="tok", path_prefix="/zc")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port, path_prefix="/zc/")
            env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "tok"})
            code, stdout, stderr = await run_bridge(
                "--config-dir", f"{config_dir}", "--check", "--agent", "my agent", env=env
            )
            assert gateway.upgrade_requests[0].path == "/zc/acp?agent=my%20agent"
    assert code == 0, stderr
    report = stdout.decode()
    assert f"gateway:  {gateway.url}?agent=my%20agent" in report
    assert "agent:    Fake Gateway 9.9 (fake-gateway)" in report
    assert "protocol: 1" in report
    assert "latency:  initialize " in report
    assert "auth:     $ZEROCLAW_ACP_BRIDGE_TOKEN" in report
    assert gateway.received_json()[0]["method"] == "initialize"


async def test_check_exits_3_on_401(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="tok")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "wrong"})
            code, stdout, _ = await run_bridge("--config-dir", str(config_dir), "--check", env=env)
    assert (code, stdout) == (3, b"")


async def test_url_flag_needs_no_config_file(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="tok")) as gateway:
            env = bridge_env(
                tmp_path,
                {
                    "ZEROCLAW_CONFIG_DIR": str(tmp_path / "empty"),
                    "ZEROCLAW_ACP_BRIDGE_TOKEN": "tok",
                },
            )
            code, stdout, stderr = await run_bridge("--url", gateway.url, "--check", env=env)
    assert code == 0, stderr
    assert gateway.url.encode() in stdout


async def test_url_flag_without_config_asks_the_gateway_whether_pairing_is_on(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway()) as gateway:
            env = bridge_env(tmp_path, {"ZEROCLAW_CONFIG_DIR": str(tmp_path / "empty")})
            code, stdout, stderr = await run_bridge("--url", gateway.url, "--check", env=env)
            assert [r.path for r in gateway.http_requests] == ["/pair/code"]
            assert "Authorization" not in gateway.upgrade_requests[0].headers
    assert code == 0, stderr
    assert b"auth:     pairing not required" in stdout


async def test_log_file_gets_the_logs_and_stderr_only_errors(tmp_path: Path) -> None:
    log_file = tmp_path / "bridge.log"
    with trio.fail_after(TIMEOUT):
        async with running_gateway(FakeGateway(token="s3cret-token")) as gateway:
            config_dir = tmp_path / "cfg"
            write_config(config_dir, gateway.port)
            env = bridge_env(tmp_path, {"ZEROCLAW_ACP_BRIDGE_TOKEN": "s3cret-token"})
            args = ["--config-dir", str(config_dir), "--log-level", "debug"]
            code, stdout, stderr = await run_bridge(
                *args, "--log-file", str(log_file), env=env, stdin=jsonrpc_request(1, "x")
            )
    assert code == 0
    assert b'"id":1' in stdout
    assert stderr == ""
    logged = log_file.read_text()
    assert "connected to ws://127.0.0.1:" in logged
    assert '→ {"jsonrpc":"2.0","id":1,"method":"x"}' in logged
    assert "s3cret-token" not in logged
