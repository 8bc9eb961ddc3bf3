"""The shell tool's OS sandbox on the real kernel, through a real ``zeroclaw acp``.

Each case runs under every backend this machine has (landlock, bubblewrap) with a ``full``
risk profile whose word-level policy lets every command through (``allowed_commands =
["*"]``, no high-risk blocking), so whatever is refused is refused by the kernel. A backend
the machine lacks skips with the reason; with ``ZEROCLAW_REQUIRE_SANDBOX_TESTS=1`` (set by
``.ci/run``) that skip is a failure instead.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import uuid
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from acp_server.agent.tools.shell import ShellTool
from acp_server.config import (
    DEFAULT_SHELL_CPU_LIMIT_SECS,
    DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES,
    RiskProfileConfig,
)
from acp_server.security.sandbox import (
    BACKENDS,
    BackendProbe,
    BackendStatus,
    plan_spawn,
    resolve_posture,
    spawned,
    system_probe,
)
from acp_server.security.sandbox import posture as posture_module
from tests.e2e.helpers import RpcPipeClient, child_env, console_script, open_session, spawn_acp
from tests.helpers import JsonDict, echo_config, write_config
from tests.server.tool_context import make_context

pytestmark = pytest.mark.e2e

REQUIRE_ENV: Final = "ZEROCLAW_REQUIRE_SANDBOX_TESTS"
SANDBOXED_BACKENDS: Final = ("landlock", "bubblewrap")
EVERYTHING_ALLOWED: Final = {
    "allowed_commands": ["*"],
    "block_high_risk_commands": False,
    "forbidden_paths": [],
}


def require_backend(name: str) -> None:
    """Skip (fail under ``ZEROCLAW_REQUIRE_SANDBOX_TESTS=1``) when ``name`` is unavailable."""
    status = system_probe().status(name)  # type: ignore[arg-type]  # a backend name
    if status.available:
        return
    message = f"sandbox backend {name} unavailable here: {status.detail}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1 requires it)")
    pytest.skip(message)


@pytest.fixture(params=SANDBOXED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    require_backend(name)
    return name


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace, writable by the server's user."""
    path = tmp_path / "outside"
    path.mkdir()
    return path.resolve()


def sandbox_config(tmp_path: Path, backend: str, **risk: Any) -> Path:
    document = echo_config(
        level="full", risk={**EVERYTHING_ALLOWED, "sandbox_backend": backend, **risk}
    )
    return write_config(tmp_path / "cfg", document)


async def run_shell(client: RpcPipeClient, session_id: str, command: str) -> str:
    """One ``/tool shell`` turn; the tool's output as the model saw it."""
    before = len(client.updates(session_id))
    directive = json.dumps({"command": command})
    response = await client.prompt(session_id, f"/tool shell {directive}")
    assert "result" in response, response
    outputs = [
        update["rawOutput"]
        for update in client.updates(session_id)[before:]
        if update["sessionUpdate"] == "tool_call_update" and "rawOutput" in update
    ]
    assert outputs, client.updates(session_id)[before:]
    output: str = outputs[-1]
    return output


async def test_writes_and_reads_are_confined_to_the_workspace(
    tmp_path: Path, backend: str, workspace: Path, outside: Path
) -> None:
    secret = outside / "secret.txt"
    secret.write_text("SECRET-OUTSIDE\n")
    system_target = Path("/var/tmp") / f"zeroclaw-sandbox-test-{uuid.uuid4().hex}"
    (workspace / "link").symlink_to(outside)
    attempts = {
        "plain": f"echo pwned > {outside}/plain.txt",
        "system dir": f"echo pwned > {system_target}",
        "remount": f"mount -o remount,bind,rw / && echo pwned > {system_target}",
        "backslash-newline": f"echo pwned > {outside}/bs\\\nnl.txt",
        "tilde-plus": f"cd {outside} && echo pwned > ~+/tilde.txt",
        "workspace symlink": "echo pwned > link/symlink.txt",
        "python3 -c": f"python3 -c \"open('{outside}/python.txt', 'w').write('x')\"",
        "git -c": f"git -c alias.plant='!echo pwned > {outside}/git-c.txt' plant",
        "GIT_CONFIG_*": (
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.plant "
            f"GIT_CONFIG_VALUE_0='!echo pwned > {outside}/git-env.txt' git plant"
        ),
    }
    with trio.fail_after(90):
        async with spawn_acp(sandbox_config(tmp_path, backend)) as client:
            session_id = await open_session(client, workspace)
            inside = await run_shell(
                client, session_id, "echo inside > made.txt && mkdir sub && cat made.txt"
            )
            temp = await run_shell(
                client, session_id, 'echo scratch > "$TMPDIR/t" && cat "$TMPDIR/t" && echo $TMPDIR'
            )
            read_outside = await run_shell(client, session_id, f"cat {secret}")
            signal_server = await run_shell(client, session_id, f"kill -0 {client.process.pid}")
            refused = {
                name: await run_shell(client, session_id, cmd) for name, cmd in attempts.items()
            }
    assert inside == "inside"
    assert (workspace / "made.txt").read_text() == "inside\n"
    assert (workspace / "sub").is_dir()
    scratch, temp_dir = temp.splitlines()
    assert scratch == "scratch"
    assert not Path(temp_dir).is_relative_to(workspace)
    assert read_outside.startswith("Error: Command exited with code 1.")
    assert "SECRET" not in read_outside
    assert signal_server.startswith("Error: Command exited with code 1."), signal_server
    for name, output in refused.items():
        assert output.startswith("Error: Command exited"), (name, output)
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert not system_target.exists()


async def test_the_sessions_extra_roots_are_readable_and_writable_in_the_sandbox(
    tmp_path: Path, backend: str, workspace: Path, outside: Path
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "shared.txt").write_text("from the extra root\n")
    with trio.fail_after(90):
        async with spawn_acp(sandbox_config(tmp_path, backend)) as client:
            session_id = await open_session(client, workspace, additionalDirectories=[str(extra)])
            read = await run_shell(client, session_id, f"cat {extra}/shared.txt")
            written = await run_shell(
                client, session_id, f"echo made > {extra}/made.txt && cat {extra}/made.txt"
            )
            refused = await run_shell(client, session_id, f"echo pwned > {outside}/plain.txt")
    assert read == "from the extra root"
    assert written == "made"
    assert (extra / "made.txt").read_text() == "made\n"
    assert refused.startswith("Error: Command exited"), refused
    assert os.listdir(outside) == []


def _connection_attempt(port: int) -> str:
    script = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno); sys.exit(3)\n"
        "print('connected')\n"
    )
    return f"python3 -c {shlex.quote(script)}"


def _pending_connections(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            accepted, _ = listener.accept()
        except BlockingIOError:
            return count
        accepted.close()
        count += 1


async def test_network_deny_blocks_tcp_to_a_local_server(
    tmp_path: Path, backend: str, workspace: Path
) -> None:
    document = echo_config(
        level="full",
        risk={**EVERYTHING_ALLOWED, "sandbox_backend": backend},
        extra_agents={
            "offline": {
                "model_provider": "echo.default",
                "risk_profile": "offline",
                "runtime_profile": "default",
            }
        },
    )
    document["risk_profiles"]["offline"] = {
        "level": "full",
        **EVERYTHING_ALLOWED,
        "sandbox_backend": backend,
        "sandbox_network": "deny",
    }
    config_dir = write_config(tmp_path / "cfg", document)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        with trio.fail_after(60):
            async with spawn_acp(config_dir) as client:
                await client.call("initialize", {"protocolVersion": 1})
                denied_new = await client.call(
                    "session/new", {"cwd": str(workspace), "agentAlias": "offline"}
                )
                denied = denied_new["result"]["sessionId"]
                denied_output = await run_shell(client, denied, _connection_attempt(port))
                seen_while_denied = _pending_connections(listener)
                allowed = (
                    await client.call("session/new", {"cwd": str(workspace), "agentAlias": "echo"})
                )["result"]["sessionId"]
                allowed_output = await run_shell(client, allowed, _connection_attempt(port))
                seen_while_allowed = _pending_connections(listener)
    assert denied_new["result"]["_meta"]["zeroclaw"]["sandbox"]["network"] == "deny"
    assert denied_output.startswith("Error: Command exited with code 3."), denied_output
    assert denied_output.splitlines()[-1].startswith("refused "), denied_output
    assert seen_while_denied == 0
    # The same command with the network allowed does connect: the test can fail.
    assert allowed_output == "connected"
    assert seen_while_allowed == 1


async def test_posture_is_reported_at_start_up_and_in_results(
    tmp_path: Path, backend: str, workspace: Path
) -> None:
    config_dir = sandbox_config(tmp_path, backend)
    with trio.fail_after(30):
        startup = await trio.run_process(
            [str(console_script("zeroclaw")), "acp"],
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            env=child_env(config_dir),
            check=False,
        )
    assert startup.returncode == 0
    lines = [line for line in startup.stderr.decode().splitlines() if "sandbox:" in line]
    assert len(lines) == 1, startup.stderr
    assert f"sandbox: {backend}" in lines[0]
    assert "(workspace rw, system ro, network allowed)" in lines[0]
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            init = await client.call("initialize", {"protocolVersion": 1})
            new = await client.call("session/new", {"cwd": str(workspace)})
    for result in (init["result"], new["result"]):
        sandbox: JsonDict = result["_meta"]["zeroclaw"]["sandbox"]
        assert sandbox["requested"] == backend
        assert sandbox["active"] == backend
        assert sandbox["required"] is True
        assert "reason" not in sandbox


def _path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with the programs the server needs but no ``bwrap``."""
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    for program in ("bash", "sh", "echo", "cat", "touch"):
        for directory in ("/usr/bin", "/bin"):
            candidate = Path(directory) / program
            if candidate.exists():
                (bin_dir / program).symlink_to(candidate)
                break
    return str(bin_dir)


async def test_required_backend_unavailable_refuses_the_command(
    tmp_path: Path, workspace: Path
) -> None:
    config_dir = sandbox_config(tmp_path, "bubblewrap")
    env = {"PATH": _path_without_bwrap(tmp_path)}
    with trio.fail_after(30):
        async with spawn_acp(config_dir, env=env) as client:
            session_id = await open_session(client, workspace)
            output = await run_shell(client, session_id, "touch ran.txt")
            new = await client.call("session/new", {"cwd": str(workspace)})
    assert output.startswith("Error: Sandbox error: the risk profile requires an OS sandbox")
    assert "bwrap not found on PATH" in output
    assert not (workspace / "ran.txt").exists()
    sandbox = new["result"]["_meta"]["zeroclaw"]["sandbox"]
    assert sandbox["active"] == "none"
    assert sandbox["required"] is True
    assert "bwrap not found" in sandbox["reason"]


async def test_sandbox_off_runs_unconfined(tmp_path: Path, workspace: Path, outside: Path) -> None:
    config_dir = sandbox_config(tmp_path, "none")
    with trio.fail_after(30):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            output = await run_shell(client, session_id, f"echo written > {outside}/off.txt")
    assert output == "(no output)"
    assert (outside / "off.txt").read_text() == "written\n"


async def test_best_effort_without_any_backend_still_runs_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simulated = BackendProbe.known(
        {name: BackendStatus(name, name == "none", "simulated as missing") for name in BACKENDS}
    )
    monkeypatch.setattr(posture_module, "system_probe", lambda: simulated)
    profile = RiskProfileConfig(level="full", allowed_commands=("*",))
    ctx, _ = make_context(tmp_path, profile=profile)
    with trio.fail_after(10):
        output = await ShellTool().run({"command": "echo ran > made.txt && cat made.txt"}, ctx)
    assert output.text == "ran"


async def test_readonly_profile_gets_a_read_only_workspace_and_the_limits(
    tmp_path: Path, backend: str, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("readable\n")
    profile = RiskProfileConfig(level="readonly", sandbox_backend=backend)  # type: ignore[arg-type]
    posture = resolve_posture(profile)
    plan = plan_spawn(
        ["/bin/bash", "-c", "cat notes.txt; ulimit -t; ulimit -f; echo x > new.txt"],
        posture=posture,
        profile=profile,
        workspace=workspace,
        session_id="readonly-test",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    with spawned(plan):
        completed = await trio.run_process(
            plan.argv,
            cwd=workspace,
            env=plan.env,
            preexec_fn=plan.preexec_fn,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    lines = completed.stdout.decode().splitlines()
    assert lines == [
        "readable",
        str(DEFAULT_SHELL_CPU_LIMIT_SECS),
        str(DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES // 1024),
    ]
    assert completed.returncode != 0
    assert not (workspace / "new.txt").exists()


def test_a_missing_backend_skips_or_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    simulated = BackendProbe.known(
        {name: BackendStatus(name, name == "none", "simulated as missing") for name in BACKENDS}
    )
    monkeypatch.setattr(sys.modules[__name__], "system_probe", lambda: simulated)
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="landlock unavailable here: simulated"):
        require_backend("landlock")
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="ZEROCLAW_REQUIRE_SANDBOX_TESTS=1 requires"):
        require_backend("landlock")


async def test_the_runtime_profile_sets_the_shell_commands_resource_limits(tmp_path: Path) -> None:
    document = echo_config(
        level="full",
        risk={**EVERYTHING_ALLOWED, "allowed_commands": ["ulimit"]},
        runtime={"shell_cpu_limit_secs": 7, "shell_file_size_limit_bytes": 1 << 20},
    )
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            prompt = '/tool shell {"command": "ulimit -t; ulimit -f"}'
            response = await client.prompt(session_id, prompt)
            assert response["result"]["stopReason"] == "end_turn"
            [done] = [
                u
                for u in client.updates(session_id)
                if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
            ]
    assert done["status"] == "completed", done
    assert done["rawOutput"].split()[:2] == ["7", "1024"]
