"""The real bridge process against a real `zeroclaw gateway` process."""

from __future__ import annotations

import asyncio
import hashlib
import json
import stat
import tomllib
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from tests.bridge.harness import BRIDGE, bridge_env, run_bridge, running_bridge
from tests.e2e.gateway_harness import run_gateway
from tests.e2e.helpers import allow_once, open_session, spawn_zeroclaw, unused_port
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 60


def _config(tmp_path: Path, *, chunk_delay_ms: int = 0, **gateway: object) -> Path:
    document = echo_config(chunk_delay_ms=chunk_delay_ms)
    if gateway:
        document["gateway"] = dict(gateway)
    return write_config(tmp_path / "cfg", document)


def _bridge(config_dir: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return spawn_zeroclaw(list(args), config_dir=config_dir, env=env, script="zeroclaw-acp-bridge")


def _text(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


async def test_full_session_pairing_permission_cancel_and_load_with_a_second_bridge(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=20)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is not None
            url = gateway.ws_url()
            async with _bridge(
                config_dir, "--url", url, "--pair-code", gateway.pairing_code
            ) as ide:
                session_id = await open_session(ide, workspace)

                # A streamed prompt.
                reply = await ide.prompt(session_id, "tides and moons")
                assert reply["result"]["stopReason"] == "end_turn"
                assert _text(ide.updates(session_id)) == "tides and moons"

                # A tool call that needs the client's permission, answered through the bridge.
                args = json.dumps({"path": "marker.txt", "content": "written via the bridge"})
                reply = await ide.call(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": f"/tool file_write {args}"},
                    on_request=allow_once,
                )
                assert reply["result"]["stopReason"] == "end_turn"
                [permission] = ide.server_requests
                assert permission["method"] == "session/request_permission"
                assert (workspace / "marker.txt").read_text() == "written via the bridge"
                kinds = {u["sessionUpdate"] for u in ide.updates(session_id)}
                assert {"tool_call", "tool_call_update"} <= kinds

                # Cancel a long turn mid-stream.
                ide.notifications.clear()
                prompt_id = await ide.prompt_request(session_id, " ".join(["wave"] * 200))
                first = await ide.receive()
                assert first["method"] == "session/update"
                await ide.notify("session/cancel", {"sessionId": session_id})
                reply = await ide.wait_response(prompt_id)
                assert reply["result"]["stopReason"] == "cancelled"
            assert ide.process.returncode == 0

            token_file = config_dir / "acp-bridge-token"
            assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

            # A second bridge process (cached token, no pairing code) loads the session.
            async with _bridge(config_dir, "--url", url) as ide:
                await ide.call("initialize", {"protocolVersion": 1})
                loaded = await ide.call(
                    "session/load", {"sessionId": session_id, "cwd": str(workspace)}
                )
                assert loaded["result"].keys() == {"modes", "configOptions"}
                replayed = ide.updates(session_id)
                user_text = [
                    u["content"]["text"]
                    for u in replayed
                    if u["sessionUpdate"] == "user_message_chunk"
                ]
                assert "tides and moons" in user_text[0]
                assert any(u["sessionUpdate"] == "tool_call" for u in replayed)
            assert ide.process.returncode == 0


async def test_address_comes_from_the_daemon_config_and_check_reports_it(tmp_path: Path) -> None:
    port = unused_port()
    config_dir = _config(tmp_path, port=port, require_pairing=False, path_prefix="/zc/")
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir, "--port", str(port)) as gateway:
            assert gateway.port == port
            env = bridge_env(tmp_path, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
            code, stdout, stderr = await run_bridge("--check", env=env)
    assert code == 0, stderr
    report = stdout.decode()
    assert f"gateway:  ws://127.0.0.1:{port}/zc/acp\n" in report
    assert "auth:     pairing not required" in report
    assert "agent:    ZeroClaw ACP " in report
    assert "protocol: 1\n" in report


async def test_both_sides_read_a_bare_prefix_and_a_blank_config_dir_the_same_way(
    tmp_path: Path,
) -> None:
    port = unused_port()
    config_dir = _config(tmp_path, port=port, require_pairing=False, path_prefix="zc")
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir, "--port", str(port)):
            env = bridge_env(tmp_path, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
            code, stdout, stderr = await run_bridge("--config-dir=", "--check", env=env)
    assert code == 0, stderr
    assert f"gateway:  ws://127.0.0.1:{port}/zc/acp\n" in stdout.decode()


async def test_port_0_serves_but_a_bridge_needs_the_url_the_gateway_announced(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path, port=0, require_pairing=False)
    env = bridge_env(tmp_path, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            code, _, stderr = await run_bridge("--check", env=env)
            assert code == 2
            assert "[gateway].port is 0" in stderr
            assert "--url" in stderr
            code, stdout, stderr = await run_bridge("--url", gateway.ws_url(), "--check", env=env)
    assert code == 0, stderr
    assert f"gateway:  {gateway.ws_url()}\n" in stdout.decode()


async def test_every_token_source_against_the_real_gateway(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            home = tmp_path / "home"
            home.mkdir()

            async def check(extra: dict[str, str] | None = None) -> tuple[int, str]:
                env = bridge_env(home, {"ZEROCLAW_CONFIG_DIR": str(config_dir), **(extra or {})})
                code, _, stderr = await run_bridge("--url", url, "--check", env=env)
                return code, stderr

            # Nothing cached: the bridge fetches the one-time code from /pair/code and pairs.
            assert await check() == (0, "")
            token_file = config_dir / "acp-bridge-token"
            token = token_file.read_text().strip()
            assert token.startswith("zc_")
            assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
            # The code is used up: with the cache gone, there is no way to get a token.
            token_file.rename(tmp_path / "saved-token")
            code, stderr = await check()
            assert code == 2
            assert "zeroclaw gateway get-paircode --new" in stderr
            (tmp_path / "saved-token").rename(token_file)
            # The env token wins over the (valid) cached file: a wrong one is a 401, exit 3.
            code, stderr = await check({"ZEROCLAW_ACP_BRIDGE_TOKEN": "zc_" + "0" * 64})
            assert code == 3
            assert "HTTP 401" in stderr
            assert "ZEROCLAW_ACP_BRIDGE_TOKEN was rejected" in stderr
            assert (await check({"ZEROCLAW_ACP_BRIDGE_TOKEN": token}))[0] == 0
            # A cached token others can read is refused before connecting.
            token_file.chmod(0o644)
            code, stderr = await check()
            assert code == 2
            assert f"chmod 600 {token_file}" in stderr
            token_file.chmod(0o600)
            assert (await check())[0] == 0


async def test_stdin_eof_still_delivers_the_running_turn(tmp_path: Path) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=10, require_pairing=False)
    words = " ".join(f"w{i}" for i in range(30))
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            async with _bridge(config_dir, "--url", gateway.ws_url()) as ide:
                session_id = await open_session(ide, session_dir(tmp_path))
                prompt_id = await ide.prompt_request(session_id, words)
                await ide.close_stdin()  # the IDE is done writing, not reading
                reply = await ide.wait_response(prompt_id)
                assert reply["result"]["stopReason"] == "end_turn"
                assert _text(ide.updates(session_id)) == words
                with pytest.raises(EOFError):
                    await ide.receive()
            assert ide.process.returncode == 0


@pytest.mark.parametrize("how", ["kill", "sigterm"])
async def test_gateway_going_away_mid_turn_without_reconnect(tmp_path: Path, how: str) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=30, require_pairing=False)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir, "--drain-timeout", "0.2", expect_exit=None) as gateway:
            url = gateway.ws_url()
            async with _bridge(config_dir, "--url", url, "--no-reconnect") as ide:
                session_id = await open_session(ide, session_dir(tmp_path))
                prompt_id = await ide.prompt_request(session_id, "tick " * 300)
                await ide.receive()  # streaming has started
                if how == "kill":
                    gateway.process.kill()
                else:
                    gateway.signal()
                reply = await ide.wait_response(prompt_id)
                with pytest.raises(EOFError):
                    await ide.receive()
            assert ide.process.returncode == 1
    if how == "kill":
        # Nobody answered the turn: the bridge does, naming the cause.
        assert reply["error"]["data"]["bridge"] == "connection_lost"
        assert "connection to the gateway was lost" in reply["error"]["message"]
    else:
        # The drain deadline cancelled the turn and the gateway answered it before 1012.
        assert reply["result"]["stopReason"] == "cancelled"


async def test_the_official_acp_sdk_drives_the_bridge(tmp_path: Path) -> None:
    import acp
    from acp import schema

    # An edit tool: its approval offers reject-with-edit, which must still validate in a
    # strict client (the SDK rejects unknown option kinds, and with them the whole request).
    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("read through the bridge")

    class Ide:
        def __init__(self) -> None:
            self.chunks: list[str] = []
            self.permissions = 0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            if isinstance(update, schema.AgentMessageChunk) and isinstance(
                update.content, schema.TextContentBlock
            ):
                self.chunks.append(update.content.text)

        async def request_permission(
            self, session_id: str, tool_call: Any, options: Any, **kwargs: Any
        ) -> schema.RequestPermissionResponse:
            self.permissions += 1
            return schema.RequestPermissionResponse(
                outcome=schema.AllowedOutcome(outcome="selected", option_id="allow-once")
            )

    async def ide_session(url: str) -> tuple[Ide, str, str, int]:
        ide = Ide()
        env = bridge_env(tmp_path, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
        # The IDE implements only the two callbacks this session uses.
        client = cast("acp.Client", ide)
        async with acp.spawn_agent_process(client, str(BRIDGE), "--url", url, env=env) as (
            conn,
            _,
        ):
            init = await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(workspace))
            first = await conn.prompt(session.session_id, [acp.text_block("hello from the SDK")])
            args = json.dumps({"path": "notes.txt", "content": "written through the bridge"})
            second = await conn.prompt(
                session.session_id, [acp.text_block(f"/tool file_write {args}")]
            )
            assert second.stop_reason == "end_turn"
            return ide, str(first.stop_reason), str(init.agent_info.name), init.protocol_version  # type: ignore[union-attr]

    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            ide, stop_reason, agent_name, version = await trio.to_thread.run_sync(
                asyncio.run, ide_session(url)
            )
    assert (stop_reason, version) == ("end_turn", 1)
    assert agent_name == "zeroclaw-acp"
    text = "".join(ide.chunks)
    assert text.startswith("hello from the SDK")
    assert ide.permissions == 1, text
    assert (workspace / "notes.txt").read_text() == "written through the bridge"


async def test_agent_flag_picks_the_default_agent_on_the_real_gateway(tmp_path: Path) -> None:
    """`--agent ALIAS` becomes `?agent=`: session/new without an alias gets that agent; an
    explicit alias still wins; an unknown one fails session/new with -32602."""
    document = echo_config(
        extra_agents={
            "beta": {
                "model_provider": "echo.default",
                "risk_profile": "default",
                "runtime_profile": "default",
            }
        }
    )
    document["acp"] = {"default_agent": "echo"}
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)

    async def owner(session_id: str) -> str:
        result = await trio.run_process(
            [str(BRIDGE.parent / "zeroclaw"), "sessions", "show", session_id, "--json"],
            capture_stdout=True,
            env={**bridge_env(tmp_path), "ZEROCLAW_CONFIG_DIR": str(config_dir)},
        )
        alias: str = json.loads(result.stdout)["agent"]
        return alias

    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            async with _bridge(config_dir, "--url", url, "--agent", "beta") as ide:
                by_flag = await open_session(ide, session_dir(tmp_path))
                explicit = await ide.call(
                    "session/new", {"cwd": str(session_dir(tmp_path)), "agentAlias": "echo"}
                )
            async with _bridge(config_dir, "--url", url) as ide:
                by_default = await open_session(ide, session_dir(tmp_path))
            async with _bridge(config_dir, "--url", url, "--agent", "ghost") as ide:
                await ide.call("initialize", {"protocolVersion": 1})
                unknown = await ide.call("session/new", {"cwd": str(session_dir(tmp_path))})
        assert await owner(by_flag) == "beta"
        assert await owner(explicit["result"]["sessionId"]) == "echo"
        assert await owner(by_default) == "echo"
    assert unknown["error"]["code"] == -32602, unknown
    assert "ghost" in unknown["error"]["message"]


async def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    await trio.run_process(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        capture_stdout=True,
        capture_stderr=True,
    )  # fmt: skip
    return cert, key


async def test_tls_gateway_needs_a_trusted_certificate_and_says_so(tmp_path: Path) -> None:
    """[gateway.tls] → wss://. A self-signed certificate the bridge does not trust is a clear
    exit 1 that says how to trust it (not a traceback); trusted via SSL_CERT_FILE, pairing
    (over https) and relaying work."""
    cert, key = await _self_signed(tmp_path)
    config_dir = _config(
        tmp_path, tls={"enabled": True, "cert_path": str(cert), "key_path": str(key)}
    )
    home = tmp_path / "home"
    home.mkdir()
    env = bridge_env(home, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
    trusted = {**env, "SSL_CERT_FILE": str(cert)}
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = f"wss://127.0.0.1:{gateway.port}/acp"
            # Untrusted: first the pairing request (https), then the upgrade (wss).
            code, _, stderr = await run_bridge("--url", url, "--check", env=env)
            assert code == 1, stderr
            assert "certificate verification failed" in stderr
            assert "SSL_CERT_FILE" in stderr
            assert "Traceback" not in stderr
            code, _, stderr = await run_bridge(
                "--url", url, "--check", env={**env, "ZEROCLAW_ACP_BRIDGE_TOKEN": "zc_x"}
            )
            assert code == 1, stderr
            assert f"failed to connect to {url}: TLS certificate verification failed" in stderr
            assert "Traceback" not in stderr

            # Trusted: pairs over https, then relays over wss.
            code, stdout, stderr = await run_bridge("--url", url, "--check", env=trusted)
            assert code == 0, stderr
            assert f"gateway:  {url}\n" in stdout.decode()
            request = (
                b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}'
            )
            code, stdout, stderr = await run_bridge(
                "--url", url, env=trusted, stdin=request + b"\n"
            )
            assert code == 0, stderr
            assert json.loads(stdout)["result"]["protocolVersion"] == 1

            # wss:// to a port that speaks plain HTTP is named as such.
            plain = _config(tmp_path / "plain", require_pairing=False)
            async with run_gateway(plain) as plain_gateway:
                code, _, stderr = await run_bridge(
                    "--url", f"wss://127.0.0.1:{plain_gateway.port}/acp", "--check", env=env
                )
            assert code == 1, stderr
            assert "does not speak TLS" in stderr
            assert "Traceback" not in stderr


async def test_bridges_started_together_pair_once_and_share_the_token(tmp_path: Path) -> None:
    """Editors start one bridge per window, often at the same moment. Only one can use the
    one-time code; the others must pick up the token it cached, not fail."""
    config_dir = _config(tmp_path)  # pairing required, nothing paired yet
    home = tmp_path / "home"
    home.mkdir()
    env = bridge_env(home, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
    results: list[tuple[int, str]] = []

    async def check(url: str) -> None:
        code, _, stderr = await run_bridge("--url", url, "--check", env=env)
        results.append((code, stderr))

    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway, trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(check, gateway.ws_url())
    assert results == [(0, "")] * 4
    token = (config_dir / "acp-bridge-token").read_text().strip()
    document = tomllib.loads((config_dir / "config.toml").read_text())
    assert document["gateway"]["paired_tokens"] == [hashlib.sha256(token.encode()).hexdigest()]


async def test_revoked_token_ends_a_live_bridge_with_exit_3(tmp_path: Path) -> None:
    """`zeroclaw gateway get-paircode --rotate` revokes every token: the gateway closes the
    bridge's connection with 1008 ("rejected, stop"), and the bridge stops at once with exit 3
    and pairing advice instead of reconnecting with a token that can never work again."""
    config_dir = _config(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = bridge_env(home, {"ZEROCLAW_CONFIG_DIR": str(config_dir)})
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            assert (await run_bridge("--url", gateway.ws_url(), "--check", env=env))[0] == 0
            async with running_bridge("--url", gateway.ws_url(), env=env) as bridge:
                await bridge.send_line(
                    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
                )
                assert "result" in await bridge.read_json()
                await gateway.wait_for_connections(1)
                rotated = await trio.run_process(
                    [str(BRIDGE.parent / "zeroclaw"), "gateway", "get-paircode", "--rotate",
                     "--port", str(gateway.port)],
                    capture_stdout=True,
                    capture_stderr=True,
                    env={**env, "HOME": str(home)},
                )  # fmt: skip
                assert b"revoked 1 token" in rotated.stderr
                assert await bridge.wait() == 3
    assert "close code 1008: token revoked" in bridge.stderr_text
    assert "not reconnecting" in bridge.stderr_text
    # The bridge's token came from its cache file: say to delete it and pair again.
    assert "Delete that file" in bridge.stderr_text
    assert "zeroclaw gateway get-paircode --new" in bridge.stderr_text
    # No reconnect attempt: the gateway never refused an upgrade (read after it exited).
    assert "refused /acp" not in gateway.stderr()
