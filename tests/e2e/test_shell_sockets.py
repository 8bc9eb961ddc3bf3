"""No sandboxed command reaches the host's abstract Unix sockets, through a real
``zeroclaw acp``.

An abstract socket (the D-Bus session bus, X11, IDE helpers) has no file a file-system rule
could protect; it belongs to a network namespace. The test listens on one in its own
process; a command of a ``full`` profile (the word-level policy lets everything through)
tries to connect. Under landlock and bubblewrap, with the network allowed and denied, the
kernel refuses and the listener sees nobody. Without a sandbox the command connects: that
is what ``none`` means, and it is what shows that the test can fail.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import trio

from acp_server.agent.tools.shell import run_shell_command
from acp_server.config import RiskProfileConfig
from acp_server.security.sandbox import (
    BackendProbe,
    BackendStatus,
    plan_spawn,
    resolve_posture,
    seccomp,
    spawned,
    system_probe,
)
from acp_server.security.sandbox.posture import BACKENDS, Backend
from tests.e2e.helpers import open_session, spawn_acp
from tests.e2e.test_shell_sandbox import EVERYTHING_ALLOWED, require_backend, run_shell
from tests.e2e.test_shell_sandbox import _pending_connections as accepted
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

REFUSED_EXIT: Final = 3


@pytest.fixture
def abstract_listener() -> Iterator[tuple[bytes, socket.socket]]:
    """A listening abstract Unix socket of the test process: (its address, the socket)."""
    address = f"\0zeroclaw-test-{os.getpid()}-{uuid.uuid4().hex}".encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(address)
        listener.listen(8)
        listener.setblocking(False)
        yield address, listener


def connection_attempt(address: bytes) -> str:
    """A command line: connect to ``address``; prints ``connected`` or ``refused <errno>``
    (exit 3)."""
    script = (
        "import socket, sys\n"
        "try:\n"
        "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        f"    s.connect({address!r})\n"
        "except OSError as exc:\n"
        f"    print('refused', exc.errno); sys.exit({REFUSED_EXIT})\n"
        "print('connected')\n"
    )
    return f"python3 -c {shlex.quote(script)}"


@pytest.mark.parametrize("network", ["allow", "deny"])
@pytest.mark.parametrize("backend", ["landlock", "bubblewrap", "none"])
async def test_a_command_cannot_reach_a_host_abstract_socket(
    tmp_path: Path, backend: str, network: str, abstract_listener: tuple[bytes, socket.socket]
) -> None:
    if backend != "none":
        require_backend(backend)
    address, listener = abstract_listener
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    risk = {**EVERYTHING_ALLOWED, "sandbox_backend": backend, "sandbox_network": network}
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full", risk=risk))
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            output = await run_shell(client, session_id, connection_attempt(address))
            new = await client.call("session/new", {"cwd": str(workspace)})
    seen = accepted(listener)
    reported = new["result"]["_meta"]["zeroclaw"]["sandbox"]["abstractUnixSockets"]
    if backend == "none":
        assert (output, seen, reported) == ("connected", 1, "reachable")
        return
    assert output.startswith(f"Error: Command exited with code {REFUSED_EXIT}."), output
    assert output.splitlines()[-1].startswith("refused "), output
    assert seen == 0
    assert reported != "reachable"


def without_landlock_scopes(active: Backend) -> BackendProbe:
    """This machine, except that Landlock is ABI 5 (no scopes) or, for bubblewrap, absent:
    the kernel of a distribution older than Linux 6.12."""
    statuses = {name: BackendStatus(name, name == "none", "not in this test") for name in BACKENDS}
    statuses["landlock"] = BackendStatus("landlock", active == "landlock", "ABI 5")
    if active == "bubblewrap":
        statuses["bubblewrap"] = system_probe().status("bubblewrap")
    return BackendProbe.known(statuses)


@pytest.mark.parametrize("backend", ["landlock", "bubblewrap"])
async def test_without_landlock_scopes_unix_sockets_are_refused(
    tmp_path: Path, backend: Backend, abstract_listener: tuple[bytes, socket.socket]
) -> None:
    """The seccomp fallback, on the real kernel: ``socket(AF_UNIX)`` fails, so no abstract
    socket can be reached; ``socketpair`` still works."""
    require_backend(backend)
    if seccomp.unix_socket_filter() is None:
        pytest.skip("no seccomp filter for this architecture")
    address, listener = abstract_listener
    profile = RiskProfileConfig(level="full", sandbox_backend=backend)
    posture = resolve_posture(profile, without_landlock_scopes(backend))
    assert posture.abstract_sockets == "seccomp"
    script = (
        "import json, socket\n"
        "pair = socket.socketpair(); pair[0].send(b'x'); paired = pair[1].recv(1) == b'x'\n"
        "try:\n"
        "    socket.socket(socket.AF_UNIX).connect(" + repr(address) + ")\n"
        "    unix = 'connected'\n"
        "except OSError as exc:\n"
        "    unix = exc.errno\n"
        "print(json.dumps({'paired': paired, 'unix': unix}))\n"
    )
    plan = plan_spawn(
        ["python3", "-c", script],
        posture=posture,
        profile=profile,
        workspace=tmp_path,
        session_id="seccomp-fallback",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    with trio.fail_after(30), spawned(plan):
        result = await run_shell_command(
            script, cwd=tmp_path, timeout_secs=20, env=plan.env, sandbox=plan
        )
    printed = result.output.decode()
    assert result.returncode == 0, printed
    assert json.loads(printed) == {"paired": True, "unix": errno.EACCES}
    assert accepted(listener) == 0
