"""No process a shell command started outlives it, through a real ``zeroclaw acp``.

A command starts three detached sleepers: one under ``setsid`` (its own session, out of
the command's process group), one double-forked (its parent exits, so it is re-parented),
and one under ``nohup`` (it ignores SIGHUP). Whatever ends the command — its normal end,
``session/cancel``, the timeout, ``session/close``, the server's graceful exit (SIGTERM)
or the server being SIGKILLed — none of them may be left, under every backend (landlock,
bubblewrap, and none: the guarantee does not depend on the sandbox). A backend the machine
lacks skips, or fails under ``ZEROCLAW_REQUIRE_SANDBOX_TESTS=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psutil
import pytest
import trio

from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.shell import ShellTool, run_shell_command
from acp_server.config import RiskProfileConfig
from acp_server.security.sandbox.processes import command_supervisor
from acp_server.security.sandbox.supervisor import MAX_MESSAGE_BYTES
from tests.e2e.helpers import RpcPipeClient, open_session, spawn_acp
from tests.e2e.test_shell_sandbox import EVERYTHING_ALLOWED, require_backend
from tests.helpers import echo_config, poll_until, write_config
from tests.server.tool_context import make_context, pids_in, process_gone

pytestmark = pytest.mark.e2e

ALL_BACKENDS: Final = ("landlock", "bubblewrap", "none")
DETACHED_KINDS: Final = ("setsid", "nohup", "double-fork")
SHELL_TIMEOUT_SECS: Final = 2
ANYTHING_GOES: Final = RiskProfileConfig(
    level="full", allowed_commands=("*",), block_high_risk_commands=False
)
LONGER_THAN_A_WORKER_THREAD_IDLES_SECS: Final = 12
"""trio ends a worker thread after 10 s without work; a command must outlive that."""

# Started as `bash detach.sh MARKER end|wait` in the workspace: three detached sleepers
# tagged MARKER-<kind> on their command lines, each touching MARKER-<kind>.started once
# it runs; the script waits for all three, says so, and then ends or waits.
DETACH_SCRIPT: Final = """\
marker=$1
sleeper='import pathlib, sys, time; pathlib.Path(sys.argv[1] + ".started").touch(); time.sleep(300)'
setsid python3 -c "$sleeper" "$marker-setsid" &
nohup python3 -c "$sleeper" "$marker-nohup" >/dev/null 2>&1 &
python3 -c 'import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp(sys.executable, [sys.executable, "-c", sys.argv[1], sys.argv[2]])
    os._exit(0)
os.wait()' "$sleeper" "$marker-double-fork"
for kind in setsid nohup double-fork; do
    until [ -e "$marker-$kind.started" ]; do sleep 0.02; done
done
echo started
if [ "$2" = wait ]; then sleep 300; fi
"""


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name != "none":
        require_backend(name)
    return name


def marker_processes(marker: str) -> list[psutil.Process]:
    """Live processes with ``marker`` in an argument (zombies have no command line)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in process.info.get("cmdline") or []):
            found.append(process)
    return found


@pytest.fixture
def marker(request: pytest.FixtureRequest) -> Iterator[str]:
    """A tag unique to the test; whatever carries it is killed afterwards, so a failing
    run (a process that was left) does not leave it on the machine."""
    tag = f"zc-detach-{os.getpid()}-{request.node.name}".replace("[", "-").replace("]", "")
    yield tag
    for process in marker_processes(tag):
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def detached_kinds_running(marker: str) -> set[str]:
    kinds = set()
    for process in marker_processes(marker):
        for kind in DETACHED_KINDS:
            if f"{marker}-{kind}" in (process.info.get("cmdline") or []):
                kinds.add(kind)
    return kinds


def config_for(tmp_path: Path, backend: str, timeout_secs: int = SHELL_TIMEOUT_SECS) -> Path:
    document = echo_config(
        level="full",
        risk={**EVERYTHING_ALLOWED, "sandbox_backend": backend},
        runtime={"shell_timeout_secs": timeout_secs},
    )
    return write_config(tmp_path / "cfg", document)


def shell_prompt(command: str) -> str:
    return "/tool shell " + json.dumps({"command": command})


async def start_detaching_command(
    client: RpcPipeClient, session_id: str, workspace: Path, marker: str, then: str
) -> int:
    """Send the prompt whose command detaches three sleepers; returns the request id once
    all three run (``then``: ``end`` or ``wait`` after starting them)."""
    (workspace / "detach.sh").write_text(DETACH_SCRIPT)
    request_id: int = await client.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": shell_prompt(f"bash detach.sh {marker} {then}")},
    )
    await poll_until(lambda: detached_kinds_running(marker) == set(DETACHED_KINDS), within=20)
    return request_id


def tool_outputs(client: RpcPipeClient, session_id: str) -> list[str]:
    return [
        str(update["rawOutput"])
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "tool_call_update" and "rawOutput" in update
    ]


@pytest.mark.parametrize("ending", ["end", "cancel", "timeout", "close"])
async def test_no_detached_process_outlives_its_command(
    tmp_path: Path, backend: str, marker: str, ending: str
) -> None:
    workspace = (tmp_path / "workspace").resolve()
    workspace.mkdir()
    with trio.fail_after(60):
        async with spawn_acp(config_for(tmp_path, backend)) as client:
            session_id = await open_session(client, workspace)
            then = "end" if ending == "end" else "wait"
            request_id = await start_detaching_command(client, session_id, workspace, marker, then)
            if ending == "cancel":
                await client.notify("session/cancel", {"sessionId": session_id})
            elif ending == "close":
                await client.call("session/close", {"sessionId": session_id})
            response = await client.wait_response(request_id)
            # Asked while the server still runs: the command's end cleaned up, not the exit.
            await poll_until(lambda: not marker_processes(marker), within=10)
    stop_reason = response["result"]["stopReason"]
    assert stop_reason == ("cancelled" if ending in ("cancel", "close") else "end_turn")
    outputs = tool_outputs(client, session_id)
    if ending == "end":
        assert outputs[-1] == "started"
    if ending == "timeout":
        assert f"Command timed out after {SHELL_TIMEOUT_SECS} s" in outputs[-1]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
async def test_no_detached_process_outlives_the_server(
    tmp_path: Path, backend: str, marker: str, how: str
) -> None:
    """SIGTERM is the graceful exit (the turn is cancelled and answered); SIGKILL gives the
    server no chance at all, and still nothing it started is left."""
    workspace = (tmp_path / "workspace").resolve()
    workspace.mkdir()
    with trio.fail_after(60):
        async with spawn_acp(config_for(tmp_path, backend)) as client:
            session_id = await open_session(client, workspace)
            request_id = await start_detaching_command(
                client, session_id, workspace, marker, "wait"
            )
            if how == "sigterm":
                client.process.send_signal(signal.SIGTERM)
                response = await client.wait_response(request_id)
                assert response["result"]["stopReason"] == "cancelled"
            else:
                client.process.kill()
            await client.process.wait()
        await poll_until(lambda: not marker_processes(marker), within=10)
    assert client.process.returncode == (0 if how == "sigterm" else -signal.SIGKILL)


# bubblewrap has its own parent-death signal (--die-with-parent); none shows ours alone.
@pytest.mark.parametrize("backend", ["bubblewrap", "none"], indirect=True)
async def test_a_long_command_is_not_killed_for_outliving_a_worker_thread(
    tmp_path: Path, backend: str
) -> None:
    """A command runs until it ends, however long the server stays idle meanwhile (a
    parent-death signal bound to the thread that started the command would kill it when
    that thread retires)."""
    workspace = (tmp_path / "workspace").resolve()
    workspace.mkdir()
    wait = LONGER_THAN_A_WORKER_THREAD_IDLES_SECS
    with trio.fail_after(wait + 30):
        async with spawn_acp(config_for(tmp_path, backend, timeout_secs=wait * 2)) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(
                session_id, shell_prompt(f"sleep {wait} && echo finished")
            )
    assert response["result"]["stopReason"] == "end_turn"
    assert tool_outputs(client, session_id)[-1] == "finished"


FORKING_SCRIPT: Final = """\
import os, sys, time
detach = sys.argv[2] == "end"
for _ in range(200 if detach else 100000):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    if detach:
        os.wait()
    else:
        time.sleep(0.002)
print("spawned")
"""


@pytest.mark.parametrize("ending", ["end", "timeout"])
async def test_nothing_is_left_when_the_call_returns(
    tmp_path: Path, marker: str, ending: str
) -> None:
    """However many processes a command scattered (here: 200 double-forked ones before it
    exits, or one every few milliseconds until the timeout), none is left by the time the
    tool call returns: no waiting, no polling."""
    (tmp_path / "scatter.py").write_text(FORKING_SCRIPT)
    ctx, _ = make_context(tmp_path, ANYTHING_GOES, shell_timeout_secs=2)
    with trio.fail_after(30):
        result = await ShellTool().run({"command": f"python3 scatter.py {marker} {ending}"}, ctx)
    assert marker_processes(marker) == []
    if ending == "end":
        assert result.text == "spawned"
    else:
        assert result.text.startswith("Error: Command timed out after 2 s")


async def test_a_killed_supervisor_takes_its_command_along_and_is_replaced(
    tmp_path: Path,
) -> None:
    ctx, _ = make_context(tmp_path, ANYTHING_GOES, shell_timeout_secs=60)
    supervisor = command_supervisor()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def kill_the_supervisor_once_started() -> None:
                await poll_until(lambda: bool(pids_in(tmp_path / "pid")))
                pid = supervisor.pid
                assert pid is not None
                os.kill(pid, signal.SIGKILL)

            nursery.start_soon(kill_the_supervisor_once_started)
            with pytest.raises(ToolError, match="Command lost: the process supervisor exited"):
                await ShellTool().run({"command": "echo $$ > pid; exec sleep 300"}, ctx)
        [top] = pids_in(tmp_path / "pid")
        await poll_until(lambda: process_gone(top))  # its parent-death signal
        again = await ShellTool().run({"command": "echo again"}, ctx)
    assert again.text == "again"


async def test_a_server_exiting_normally_waits_for_the_supervisor_and_its_commands(
    tmp_path: Path,
) -> None:
    """What the server runs at a normal exit (``CommandSupervisor.close``): the supervisor
    stops the running command and exits before the server does, and the next command starts
    a new one."""
    ctx, _ = make_context(tmp_path, ANYTHING_GOES, shell_timeout_secs=60)
    supervisor = command_supervisor()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def close_once_started() -> None:
                await poll_until(lambda: bool(pids_in(tmp_path / "pid")))
                pid = supervisor.pid
                assert pid is not None
                await trio.to_thread.run_sync(supervisor.close)
                assert not psutil.pid_exists(pid)  # exited and reaped before close returned
                [top] = pids_in(tmp_path / "pid")
                assert process_gone(top)

            nursery.start_soon(close_once_started)
            # Stopped by the supervisor on its way out (SIGTERM), or lost with it.
            with contextlib.suppress(ToolError):
                await ShellTool().run({"command": "echo $$ > pid; exec sleep 300"}, ctx)
        again = await ShellTool().run({"command": "echo again"}, ctx)
    assert again.text == "again"


async def test_a_command_too_large_to_hand_over_is_refused_with_the_limit(tmp_path: Path) -> None:
    huge = {"PATH": os.defpath, "FILLER": "x" * MAX_MESSAGE_BYTES}
    with trio.fail_after(10), pytest.raises(ToolError, match=f"exceed {MAX_MESSAGE_BYTES} bytes"):
        await run_shell_command("true", cwd=tmp_path, timeout_secs=5, env=huge)


async def test_a_command_holds_no_descriptor_but_its_standard_streams(tmp_path: Path) -> None:
    """Nothing of the server's or the supervisor's is inherited: with the supervisor's
    control socket a command could have unconfined commands started for it."""
    profile = RiskProfileConfig(
        level="full", allowed_commands=("*",), block_high_risk_commands=False,
        sandbox_enabled=False,
    )  # fmt: skip
    ctx, _ = make_context(tmp_path, profile)
    listing = "python3 -c 'import os; print(sorted(os.listdir(\"/proc/self/fd\")))'"
    with trio.fail_after(10):
        result = await ShellTool().run({"command": listing}, ctx)
    assert result.text == "['0', '1', '2', '3']"  # 3: the directory being listed
