"""The server's side of the process supervisor (``supervisor.py``, which says why it
exists): start a shell command through it, wait for the command's exit, and stop the
command with everything it started.

One supervisor serves the whole server process. It is started with the first command
(``command_supervisor().start(...)``), from a worker thread, and ends when the server
does: its control socket closes with the server, however the server ends (on a normal
exit the server also waits for it, ``CommandSupervisor.close``). A supervisor that died is
started again by the next command.
"""

from __future__ import annotations

import array
import atexit
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import trio

from acp_server.errors import ZeroclawError
from acp_server.security.sandbox import supervisor
from acp_server.security.sandbox.supervisor import MAX_MESSAGE_BYTES, ChildSetup

SHUTDOWN_GRACE_SECS: Final = 2.0
"""When the server is gone: time between SIGTERM and SIGKILL for what still runs."""
MAX_EVENT_BYTES: Final = 4096
"""Largest message the supervisor sends about a command (a reason it could not start)."""
_SEND_LOCK: trio.lowlevel.RunVar[trio.Lock] = trio.lowlevel.RunVar("zeroclaw_supervisor_send")


class SupervisorError(ZeroclawError):
    """A command could not be started or followed (the reason is the kernel's, e.g. a
    missing program or a refused Landlock ruleset, or the supervisor's)."""


class RunningCommand:
    """One command the supervisor started: its exit, and the stop that cleans up after it."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self._sock = sock
        self.pid = 0
        self.returncode: int | None = None
        """Set once the command's top process has exited (negative: killed by a signal)."""

    async def _event(self) -> dict[str, Any]:
        data = await self._sock.recv(MAX_EVENT_BYTES)
        if not data:
            raise SupervisorError("the process supervisor exited")
        event: dict[str, Any] = json.loads(data)
        return event

    async def _started(self) -> None:
        event = await self._event()
        if event.get("event") != "started":
            raise SupervisorError(str(event.get("error", "the command did not start")))
        self.pid = int(event["pid"])

    async def wait(self) -> int:
        """The top process's exit code, once it has exited (what it started may still run
        until ``stop``)."""
        if self.returncode is None:
            event = await self._event()
            self.returncode = int(event["returncode"])
        return self.returncode

    async def stop(self, grace_secs: float) -> None:
        """SIGTERM the command and everything it started (also what left its session or
        process group), SIGKILL what is left after ``grace_secs``, and return once nothing
        of it remains. Cleanup: call it shielded from cancellation."""
        try:
            await self._sock.send(json.dumps({"op": "stop", "grace": grace_secs}).encode())
            while (event := await self._event()).get("event") != "done":
                if event.get("event") == "exited":
                    self.returncode = int(event["returncode"])
        except (SupervisorError, OSError):
            pass  # the supervisor is gone: its exit stopped the command, or its death did
        finally:
            self._sock.close()


class CommandSupervisor:
    """The process-wide client of the supervisor process."""

    def __init__(self, shutdown_grace_secs: float = SHUTDOWN_GRACE_SECS) -> None:
        self._shutdown_grace_secs = shutdown_grace_secs
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._owner_pid = 0

    @property
    def pid(self) -> int | None:
        """The supervisor process's pid while it runs."""
        process = self._process
        return process.pid if process is not None and self._running_control() else None

    def _running_control(self) -> socket.socket | None:
        alive = self._process is not None and self._process.poll() is None
        return self._control if alive and self._owner_pid == os.getpid() else None

    def _connect(self) -> socket.socket:
        """The control socket, starting the supervisor first when it is not running."""
        with self._lock:
            control = self._running_control()
            if control is not None:
                return control
            if self._control is not None:
                self._control.close()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            # Room for the largest request in one message (the kernel doubles the value).
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE_BYTES)
            with theirs:
                self._process = subprocess.Popen(
                    [
                        sys.executable, "-I", "-S", str(Path(supervisor.__file__)),
                        str(theirs.fileno()), str(self._shutdown_grace_secs),
                    ],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,  # a terminal's Ctrl-C is the server's to handle
                    cwd="/",
                )  # fmt: skip
            ours.setblocking(False)
            if self._owner_pid == 0:
                atexit.register(self.close)
            self._control, self._owner_pid = ours, os.getpid()
            return ours

    def close(self) -> None:
        """Close the control socket and wait until the supervisor has stopped what still
        runs and exited (at most the grace it was given, plus a second), so that a server
        exiting normally leaves neither a command nor the supervisor behind. Runs at exit."""
        with self._lock:
            process, control = self._process, self._control
            self._process = self._control = None
        if control is not None:
            control.close()
        if process is None or self._owner_pid != os.getpid():
            return  # never started, or a forked copy of the server: not its child
        try:
            process.wait(timeout=self._shutdown_grace_secs + 1.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    async def _send(self, payload: bytes, fds: Sequence[int]) -> None:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        try:
            lock = _SEND_LOCK.get()
        except LookupError:
            lock = trio.Lock()
            _SEND_LOCK.set(lock)
        async with lock:
            for attempt in range(2):
                control = self._running_control()
                if control is None:  # not started yet, or died: starting it forks the server
                    control = await trio.to_thread.run_sync(self._connect)
                try:
                    while True:
                        try:
                            control.sendmsg([payload], ancillary)
                            return
                        except BlockingIOError:
                            await trio.lowlevel.wait_writable(control)
                except (BrokenPipeError, ConnectionError) as exc:
                    if attempt:  # a fresh supervisor that cannot take a request
                        raise SupervisorError(
                            f"the process supervisor is unreachable: {exc}"
                        ) from exc
                    # It died since the last command: the next attempt starts a new one.

    async def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        setup: ChildSetup,
        stdout_fd: int,
        ruleset_fd: int | None = None,
    ) -> RunningCommand:
        """Start ``argv`` with stdin from /dev/null and stdout and stderr to ``stdout_fd``
        (the caller keeps and closes its own copy), in its own session, confined by
        ``setup`` (and the Landlock ruleset ``ruleset_fd``). Raises ``SupervisorError``
        with the reason when it cannot start."""
        request = {"op": "spawn", "argv": list(argv), "env": dict(env), "cwd": str(cwd)}
        payload = json.dumps({**request, "setup": setup.to_json()}).encode()
        if len(payload) > MAX_MESSAGE_BYTES:
            raise SupervisorError(
                f"the command line and its environment exceed {MAX_MESSAGE_BYTES} bytes"
            )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        command = RunningCommand(trio.socket.from_stdlib_socket(ours))
        try:
            with theirs:
                fds = [theirs.fileno(), stdout_fd]
                await self._send(payload, fds if ruleset_fd is None else [*fds, ruleset_fd])
            await command._started()
        except BaseException:
            ours.close()
            raise
        return command


_SUPERVISOR: Final = CommandSupervisor()


def command_supervisor() -> CommandSupervisor:
    """This process's supervisor client."""
    return _SUPERVISOR
