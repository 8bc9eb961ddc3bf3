"""An editor starts `zeroclaw acp` (or `zeroclaw-acp-bridge`) for every agent session: until
the first prompt it must not load what only a prompt, a tool or another command uses.

The real console scripts run with ``PYTHONPROFILEIMPORTTIME=1`` (CPython's ``-X
importtime``), answer ``initialize`` and ``session/new``, and exit when stdin closes:
stderr then names every module the process imported, none of them for a prompt.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import pytest
import trio

from tests.e2e.gateway_harness import run_gateway
from tests.e2e.helpers import RpcPipeClient, child_env, console_script, open_session
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e  # spawns the real processes

CEILING_SECS: Final = 60
IMPORT_TIME_PREFIX: Final = "import time:"

HEAVY_BEFORE_THE_FIRST_PROMPT: Final = (
    # the HTTP stack of the model providers and the web tools
    "httpx",
    "httpcore",
    "httpx_sse",
    "h11",
    "acp_server.agent.providers.sse",
    "acp_server.agent.tools.web_guard",
    # what xml.sax.saxutils and httpx's CLI would bring along
    "urllib.request",
    "http.client",
    "pygments",
    # skills' YAML front matter, content_search's RE2, the platform config dir
    "yaml",
    "re2",
    "platformdirs",
    # MCP servers, the PostgreSQL store, the gateway's WebSocket stack
    "mcp",
    "mcp_types",
    "acp_server.agent.tools.mcp",  # only for a session with MCP servers
    # the built-in tools' table and modules: a session names its tools, the first turn
    # makes them (agent/tools/builtin_set.py)
    "acp_server.agent.tools.registry",
    "acp_server.agent.tools.shell",
    "acp_server.agent.tools.files",
    "acp_server.agent.tools.search",
    "acp_server.agent.tools.deliver",
    "acp_server.agent.tools.interaction",
    "acp_server.agent.tools.web",
    # the process supervisor and its client: only a shell command starts them
    "acp_server.security.sandbox.supervisor",
    "acp_server.security.sandbox.processes",
    "psycopg",
    "acp_server.storage.postgres",
    "acp_server.gateway",
    # the gateway's metrics (a stdio server keeps none)
    "prometheus_client",
    "acp_server.observability.prometheus",
    "websockets",
    "trio_websocket",
    # the click group: a plain `zeroclaw acp` is read without it (acp_server/cli/launch.py)
    "click",
    # the turn runtime, session/list and session/load's replay: imported by the services
    # that use them (acp_server/protocol/services/prompt.py, lifecycle.py, router.py)
    "acp_server.agent.runtime.turn",
    "acp_server.protocol.services.listing",
    "acp_server.protocol.services.restore_replay",
)
"""Loaded on first use only (the agent's first model call, tool call, or another command)."""

HEAVY_FOR_THE_BRIDGE: Final = (
    "acp_server",
    "httpx",
    "trio_websocket",
    "yaml",
    "platformdirs",
    "acp_bridge.check",  # only `--check` runs it
)


def imported_modules(stderr: str) -> set[str]:
    """The modules an ``-X importtime`` report names."""
    names: set[str] = set()
    for line in stderr.splitlines():
        if line.startswith(IMPORT_TIME_PREFIX) and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    names.discard("imported package")
    return names


def heavy_among(modules: set[str], heavy: Sequence[str]) -> list[str]:
    return sorted(
        name for name in modules if any(name == h or name.startswith(h + ".") for h in heavy)
    )


async def imports_until_session_opened(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path
) -> set[str]:
    """Run ``argv`` with import profiling, open a session through it, close its stdin;
    the modules it imported in all."""
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    assert process.stderr is not None
    stderr = bytearray()

    async def collect_stderr() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.receive_some(65536):
            stderr.extend(chunk)

    with trio.fail_after(CEILING_SECS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect_stderr)
            client = RpcPipeClient(process)
            try:
                await open_session(client, cwd)
            finally:
                await client.close_stdin()
                await process.wait()
    modules = imported_modules(stderr.decode(errors="replace"))
    assert "acp_core" in modules, stderr.decode(errors="replace")[-2000:]
    return modules


def provider_config() -> dict[str, object]:
    """A real provider configured (nothing needs to answer: start-up calls no model)."""
    return echo_config(
        providers={
            "openai_compatible": {"default": {"model": "m", "uri": "http://127.0.0.1:9/v1"}}
        },
        agents={"coder": {"model_provider": "openai_compatible.default"}},
    )


async def test_zeroclaw_acp_opens_a_session_without_the_heavy_modules(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "config", provider_config())
    modules = await imports_until_session_opened(
        [str(console_script("zeroclaw")), "acp"], child_env(config_dir), session_dir(tmp_path)
    )
    assert "acp_server.protocol.services.lifecycle" in modules  # the session really was served
    assert heavy_among(modules, HEAVY_BEFORE_THE_FIRST_PROMPT) == []


async def test_the_bridge_relays_a_session_without_the_heavy_modules(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "config", provider_config())
    async with run_gateway(config_dir) as gateway:
        token = await gateway.pair()
        env = child_env(config_dir, {"ZEROCLAW_ACP_BRIDGE_TOKEN": token})
        argv = [str(console_script("zeroclaw-acp-bridge")), "--url", gateway.ws_url()]
        modules = await imports_until_session_opened(argv, env, session_dir(tmp_path))
    assert "acp_bridge.relay" in modules
    assert heavy_among(modules, HEAVY_FOR_THE_BRIDGE) == []
