"""The command line the ACP Registry runs for our entry, from wheels built here.

A registry client (Zed, JetBrains, the registry's own CI) starts a uvx agent as
``uvx <package> <args>`` (the registry's FORMAT.md). Before the package is published that
command can only be proven against locally built wheels: ``uv build`` writes the
workspace's wheels into a temporary directory, and ``uvx --find-links <that directory>``
runs the entry's exact package and arguments in a fresh, isolated environment (uv prefers
the local wheels over an index that might hold a package of the same name; the other
dependencies come from the package index, no newer than the workspace's lock allows).
The agent must answer the registry auth check's ``initialize`` with an auth method that
check accepts, and that method's terminal command (the same command with the method's
``args``) must set the agent up and exit 0.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import trio

from tests.acp_registry import (
    AUTH_CHECK_INITIALIZE,
    REPO_ROOT,
    auth_check_failure,
    manifest,
    unavailable,
    workspace_exclude_newer,
)
from tests.e2e.helpers import child_env

pytestmark = pytest.mark.e2e

BUILD_TIMEOUT_SECS = 120
RUN_TIMEOUT_SECS = 120
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": AUTH_CHECK_INITIALIZE}


def _uv() -> str:
    """The uv executable: ``$ZEROCLAW_UV``, else uv on PATH."""
    found = os.environ.get("ZEROCLAW_UV") or shutil.which("uv")
    if found is None:
        unavailable("uv", "no uv on PATH (set ZEROCLAW_UV to its path)")
    return found


async def test_the_registry_command_runs_zeroclaw_acp_from_the_built_wheels(
    tmp_path: Path,
) -> None:
    uv = _uv()
    env = child_env(tmp_path / "config", {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"})
    env.pop("VIRTUAL_ENV", None)
    wheels = tmp_path / "wheels"
    with trio.fail_after(BUILD_TIMEOUT_SECS):
        built = await trio.run_process(
            [uv, "build", "--all-packages", "--wheel", "--out-dir", str(wheels), "--quiet"],
            cwd=REPO_ROOT,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if built.returncode != 0:
        unavailable("uv build", built.stderr.decode(errors="replace")[-2000:])
    assert {path.name.split("-")[0] for path in wheels.glob("*.whl")} == {
        "acp_core",
        "acp_server",
        "acp_bridge",
    }

    uvx = manifest()["distribution"]["uvx"]
    registry_command = [uvx["package"], *uvx["args"]]  # after `uvx`, as the registry runs it
    command = [uv, "tool", "run", "--isolated", "--find-links", str(wheels)]
    command += ["--exclude-newer", workspace_exclude_newer(), "--python", sys.executable]
    cwd = tmp_path / "project"
    cwd.mkdir()
    with trio.fail_after(RUN_TIMEOUT_SECS):
        ran = await trio.run_process(
            [*command, *registry_command],
            cwd=cwd,
            env=env,
            stdin=(json.dumps(INITIALIZE) + "\n").encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    stderr = ran.stderr.decode(errors="replace")
    if ran.returncode != 0 and "Failed to fetch" in stderr:
        unavailable("the package index", stderr[-2000:])
    assert ran.returncode == 0, stderr
    [line] = ran.stdout.decode().splitlines()  # stdout carries protocol frames only
    reply = json.loads(line)
    assert reply["id"] == 1
    result = reply["result"]
    assert result["protocolVersion"] == 1
    assert result["agentInfo"]["name"] == "zeroclaw-acp"
    assert result["agentInfo"]["version"] == manifest()["version"]
    assert auth_check_failure(result) is None, result["authMethods"]

    # Terminal auth: the client runs the same command with the method's args instead.
    [method] = result["authMethods"]
    config_dir = tmp_path / "config"
    assert not (config_dir / "config.toml").exists()
    with trio.fail_after(RUN_TIMEOUT_SECS):
        setup = await trio.run_process(
            [*command, uvx["package"], *method["args"]],
            cwd=cwd,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert setup.returncode == 0, setup.stderr.decode(errors="replace")
    assert (config_dir / "config.toml").is_file()
