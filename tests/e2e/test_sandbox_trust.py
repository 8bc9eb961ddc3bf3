"""What a sandboxed command can reach of the server's own trust: the gateway's pairing and
admin routes, the config directory, the data directory and the session store.

A real ``zeroclaw gateway`` (unpaired) and a real ``zeroclaw acp`` share a config directory
placed where the sandbox profiles grant read access (``/etc``, ``/opt``) or where nothing
hides it (``/srv``); each lives in a throwaway directory removed afterwards. The session's
``full`` profile lets every command through the word-level policy, so whatever is refused
is refused by the kernel or the gateway. The command is ``python3 w.py``: a script in the
workspace, which no word-level check can read.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
import tomli_w
import trio

from acp_server.config import DEFAULT_FORBIDDEN_PATHS
from tests.e2e.gateway_harness import run_gateway
from tests.e2e.helpers import (
    RpcPipeClient,
    allow_once,
    child_env,
    console_script,
    open_session,
    spawn_acp,
)
from tests.e2e.test_shell_sandbox import (
    EVERYTHING_ALLOWED,
    REQUIRE_ENV,
    SANDBOXED_BACKENDS,
    require_backend,
    run_shell,
)
from tests.helpers import JsonDict, echo_config, write_config

pytestmark = pytest.mark.e2e

PROVIDER_KEY: Final = "sk-zeroclaw-test-provider-key"
ATTACK_SCRIPT: Final = r"""
import json, os, sys, urllib.error, urllib.request
with open("targets.json") as handle:  # the paths, out of sight of the word-level policy
    targets = json.load(handle)
port, config_dir, store = targets["port"], targets["config_dir"], targets["store"]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def http(method, path, headers=None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, headers=headers or {}
    )
    try:
        with opener.open(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return None, str(exc)

def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).decode(errors="replace")
    except OSError as exc:
        return None

report = {}
status, body = http("GET", "/pair/code")
code = json.loads(body).get("pairing_code") if status == 200 else None
report["pair_code"] = code
secret = read(os.path.join(config_dir, "gateway-admin.token"))
report["admin_secret"] = secret
report["config_toml"] = read(os.path.join(config_dir, "config.toml"))
report["store"] = read(store)
try:
    report["config_listing"] = os.listdir(config_dir)
except OSError:
    report["config_listing"] = None
report["pair"] = http("POST", "/pair", {"X-Pairing-Code": code or "not-a-code"})[0]
admin = {"X-ZeroClaw-Admin": (secret or "a-guess").strip()}
report["admin_paircode"] = http("GET", "/admin/paircode", admin)[0]
report["admin_new_code"] = http("POST", "/admin/paircode/new", admin)[0]
print(json.dumps(report))
"""


@dataclass(frozen=True)
class Layout:
    """Where the config directory and the data directory (``workspace_dir``) live."""

    name: str
    config_parent: str
    data_parent: str


LAYOUTS: Final = (
    # /srv: readable under bubblewrap; /etc: granted to every command under Landlock.
    Layout("config-in-srv-data-in-etc", "/srv", "/etc"),
    Layout("config-in-etc-data-in-opt", "/etc", "/opt"),
)


def throwaway_dir(parent: str) -> Path:
    """A fresh directory under ``parent`` (a system directory: root only)."""
    try:
        return Path(tempfile.mkdtemp(prefix="zeroclaw-test-", dir=parent)).resolve()
    except OSError as exc:
        message = f"cannot create a throwaway directory in {parent}: {exc.strerror}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{message} ({REQUIRE_ENV}=1 requires it)")
        pytest.skip(message)


@dataclass(frozen=True)
class ServerFiles:
    config_dir: Path
    data_dir: Path

    @property
    def store(self) -> Path:
        return self.data_dir / "sessions" / "acp-sessions.db"


@pytest.fixture(params=LAYOUTS, ids=lambda layout: layout.name)
def server_files(request: pytest.FixtureRequest) -> Iterator[ServerFiles]:
    layout: Layout = request.param
    made: list[Path] = []
    try:
        made.append(throwaway_dir(layout.config_parent))
        made.append(throwaway_dir(layout.data_parent))
        yield ServerFiles(config_dir=made[0], data_dir=made[1])
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=SANDBOXED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require_backend(name)
    return name


def write_server_config(files: ServerFiles, backend: str, **risk: Any) -> Path:
    document = echo_config(
        level="full",
        risk={**EVERYTHING_ALLOWED, "sandbox_backend": backend, **risk},
        providers={"openai": {"spare": {"model": "gpt-4.1", "api_key": PROVIDER_KEY}}},
    )
    document["workspace_dir"] = str(files.data_dir)
    return write_config(files.config_dir, tomli_w.dumps(document))


async def test_a_sandboxed_command_cannot_pair_read_the_servers_files_or_administer(
    tmp_path: Path, backend: str, server_files: ServerFiles
) -> None:
    config_dir = write_server_config(server_files, backend)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "w.py").write_text(ATTACK_SCRIPT)
    with trio.fail_after(120):
        async with run_gateway(config_dir) as gateway:
            startup_code = gateway.pairing_code
            assert startup_code is not None
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, workspace)
                targets = {
                    "port": gateway.port,
                    "config_dir": str(config_dir),
                    "store": str(server_files.store),
                }
                (workspace / "targets.json").write_text(json.dumps(targets))
                output = await run_shell(client, session_id, "python3 w.py")
            assert server_files.store.exists()  # the store really is there to be read
            assert output.startswith("{"), output
            report = json.loads(output.splitlines()[-1])
            # The operator's own command still works, and the code is still unused.
            printed = await trio.run_process(
                [
                    str(console_script("zeroclaw")),
                    "gateway",
                    "get-paircode",
                    "--port",
                    str(gateway.port),
                ],
                env=child_env(config_dir),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            paired = await gateway.http("POST", "/pair", headers={"X-Pairing-Code": startup_code})
    assert report["pair_code"] is None, report
    assert report["admin_secret"] is None, report
    assert report["config_toml"] is None, report
    assert report["store"] is None, report
    assert report["config_listing"] in (None, []), report  # refused, or an empty cover
    assert report["pair"] == 403, report
    assert report["admin_paircode"] == 403, report
    assert report["admin_new_code"] == 403, report
    assert PROVIDER_KEY not in output
    assert printed.stdout.decode().strip() == startup_code, printed.stderr
    assert paired.status_code == 200, paired.text


PROBE_SCRIPT: Final = r"""
import json
with open("paths.json") as handle:
    paths = json.load(handle)
readable = {}
for path in paths:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        readable[path] = True
    except OSError:
        readable[path] = False
print(json.dumps(readable))
"""


async def run_tool(
    client: RpcPipeClient, session_id: str, name: str, arguments: dict[str, Any]
) -> JsonDict:
    """One ``/tool`` turn (any permission request allowed once); the call's final update."""
    before = len(client.updates(session_id))
    response = await client.prompt(session_id, f"/tool {name} {json.dumps(arguments)}")
    assert "result" in response, response
    [done] = [
        update
        for update in client.updates(session_id)[before:]
        if update["sessionUpdate"] == "tool_call_update"
        and update.get("status") in ("completed", "failed")
    ]
    return done


async def test_the_shell_and_the_file_tools_reach_exactly_the_same_files(
    tmp_path: Path, backend: str
) -> None:
    workspace, extra, outside = (tmp_path / name for name in ("ws", "extra", "outside"))
    files = {
        "in the workspace": workspace / "a.txt",
        "in a forbidden directory of the workspace": workspace / "private" / "key.txt",
        "in a root inside that directory": workspace / "private" / "open" / "c.txt",
        "in an extra root": extra / "b.txt",
        "outside every root": outside / "d.txt",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("content\n")
    (workspace / "probe.py").write_text(PROBE_SCRIPT)
    (workspace / "paths.json").write_text(json.dumps([str(p) for p in files.values()]))
    document = echo_config(
        risk={
            "allowed_commands": ["*"],
            "block_high_risk_commands": False,
            "require_approval_for_medium_risk": False,
            "forbidden_paths": [*DEFAULT_FORBIDDEN_PATHS, "private"],
            "sandbox_backend": backend,
        }
    )
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(120):
        async with spawn_acp(config_dir) as client:
            client.on_request = allow_once
            roots = [str(extra), str(workspace / "private" / "open")]
            session_id = await open_session(client, workspace, additionalDirectories=roots)
            probe = await run_tool(client, session_id, "shell", {"command": "python3 probe.py"})
            by_file_tool = {
                name: (await run_tool(client, session_id, "file_read", {"path": str(path)}))[
                    "status"
                ]
                == "completed"
                for name, path in files.items()
            }
    by_shell = json.loads(probe["rawOutput"].splitlines()[-1])
    by_command = {name: by_shell[str(path)] for name, path in files.items()}
    assert by_command == by_file_tool
    assert by_file_tool == {
        "in the workspace": True,
        "in a forbidden directory of the workspace": False,
        "in a root inside that directory": True,
        "in an extra root": True,
        "outside every root": False,
    }
