"""Who counts as the gateway's operator: whoever can read its config directory.

A real ``zeroclaw gateway`` (unpaired) and real ``zeroclaw-acp-bridge`` processes: a bridge
that uses the gateway's config directory pairs by itself (it sends the admin secret kept
there); a bridge on the same machine without it is just another loopback peer and gets no
code. The start-up code is printed on a terminal only, never into a log.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import trio

from acp_bridge.auth import NO_TOKEN_MESSAGE
from tests.bridge.harness import bridge_env, run_bridge
from tests.e2e.gateway_harness import run_gateway
from tests.e2e.helpers import child_env, console_script
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


async def test_a_bridge_pairs_by_itself_only_with_the_gateways_config_directory(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    stranger_dir = write_config(tmp_path / "stranger", echo_config())
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            env = bridge_env(tmp_path / "home")
            stranger = await run_bridge(
                "--config-dir", str(stranger_dir), "--url", url, "--check", env=env
            )
            still_unpaired = (await gateway.http("GET", "/health")).json()["paired"]
            operator = await run_bridge(
                "--config-dir", str(config_dir), "--url", url, "--check", env=env
            )
            paired = (await gateway.http("GET", "/health")).json()["paired"]
    code, _, stderr = stranger
    assert code == 2, stderr
    assert NO_TOKEN_MESSAGE in stderr
    assert not (stranger_dir / "acp-bridge-token").exists()
    assert still_unpaired is False
    assert operator[0] == 0, operator[2]
    assert (config_dir / "acp-bridge-token").exists()
    assert paired is True


async def test_the_start_up_code_is_not_written_into_a_log(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is not None  # the operator's route has it
            stderr = gateway.stderr()
    assert gateway.pairing_code not in stderr
    assert "zeroclaw gateway get-paircode" in stderr


async def test_the_start_up_code_is_shown_on_a_terminal(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    controller, terminal = os.openpty()
    process = await trio.lowlevel.open_process(
        [str(console_script("zeroclaw")), "gateway", "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=terminal,
        env=child_env(config_dir),
    )
    os.close(terminal)
    seen = b""
    async with trio.lowlevel.FdStream(controller) as screen:
        try:
            with trio.fail_after(30):
                while b"gateway listening on" not in seen:
                    chunk = await screen.receive_some(4096)
                    assert chunk, seen
                    seen += chunk
        finally:
            process.terminate()
            with trio.fail_after(30):
                await process.wait()
    text = seen.decode(errors="replace")
    assert re.search(r"pairing code: \d{6} \(one-time", text), text
