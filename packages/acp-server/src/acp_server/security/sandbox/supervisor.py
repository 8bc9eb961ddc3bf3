"""The process supervisor: the one process that starts every shell command of a server and
sees to it that nothing a command started outlives the command.

It runs as a small interpreter of its own (``python -I -S supervisor.py FD``; this module
uses the standard library only, so it starts in milliseconds and imports nothing of the
server), one per server process, started with the first shell command
(``acp_server.security.sandbox.processes`` is the server's side).

Why it exists, and why it is a separate process:

* It is a child subreaper (``PR_SET_CHILD_SUBREAPER``, Linux ``prctl(2)``): a process whose
  parent exits is re-parented to its nearest subreaper ancestor instead of to init. Each
  command's top process is made a subreaper too, so while a command runs, whatever it
  started (also under ``setsid``, double-forked, or ``nohup``) stays in its subtree; when
  the top process exits, what is left comes here. Every child of the supervisor that is
  not a running command's top process is therefore, by construction, the leftover of a
  command that ended: it is killed and reaped when that command is stopped.
* Its only children are commands, so it reaps with ``waitpid(-1)``; the server's other
  children (MCP servers, availability probes) are never mistaken for leftovers.
* It outlives the server: when the server exits, even SIGKILLed, the control socket ends
  and the supervisor stops every command, kills every leftover, and exits.
* It is single-threaded. A parent-death signal (``PR_SET_PDEATHSIG``, bubblewrap's
  ``--die-with-parent``) fires when the *thread* that forked the child ends; the server
  starts processes from worker threads that retire after idling, this thread does not.

Protocol (``SOCK_SEQPACKET``, one JSON object per message). On the control socket the
server sends ``{"op": "spawn", "argv", "env", "cwd", "setup"}`` with descriptors: a fresh
command socket, the command's stdout, and the Landlock ruleset when ``setup`` says so. On
the command socket the supervisor answers ``{"event": "started", "pid"}`` or
``{"event": "failed", "error"}``, later ``{"event": "exited", "returncode"}`` and, once a
``{"op": "stop", "grace"}`` has been handled and nothing of the command is left,
``{"event": "done"}``. A command socket that ends stops its command at once.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

MAX_MESSAGE_BYTES: Final = 384 * 1024
"""Largest request: a command line (one argument is at most 128 KiB on Linux, the
kernel's ``MAX_ARG_STRLEN``), its environment and a bubblewrap command line."""
MAX_STOP_MESSAGE_BYTES: Final = 1024
"""Largest message the server sends about a running command (a stop and its grace)."""
MAX_DESCRIPTORS: Final = 3
"""Descriptors one spawn request carries: command socket, stdout, Landlock ruleset."""
STOP_POLL_SECS: Final = 0.02
"""While a command is being stopped: how often its remaining processes are looked for."""
UNKILLABLE_LIMIT_SECS: Final = 10.0
"""How long past the kill grace SIGKILL is repeated for processes that do not die (stuck in
uninterruptible sleep, e.g. on a dead network file system) before the stop is reported
done anyway (naming them on stderr), or, once the server is gone, the supervisor exits."""

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_SECCOMP: Final = 22
_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_SET_NO_NEW_PRIVS: Final = 38
_SECCOMP_MODE_FILTER: Final = 2
_SYS_LANDLOCK_RESTRICT_SELF: Final = 446  # every architecture with the unified table
_EXEC_FAILED: Final = 127


# --- what a command's child process does before exec (also the server's preexec_fn) ---


@dataclass(frozen=True, slots=True)
class ChildSetup:
    """What a command's process applies to itself before exec: resource limits, then the
    Landlock ruleset (passed as a descriptor), then a seccomp filter. Plain data, so the
    server can hand it to the supervisor."""

    rlimits: tuple[tuple[int, int], ...] = ()
    landlock: bool = False
    """Restrict with the Landlock ruleset sent along (``landlock_restrict_self``)."""
    seccomp_filter: bytes = b""
    """A classic BPF program (an array of ``struct sock_filter``), installed last."""

    def to_json(self) -> dict[str, Any]:
        return {
            "rlimits": [list(pair) for pair in self.rlimits],
            "landlock": self.landlock,
            "seccomp_filter": self.seccomp_filter.hex(),
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> ChildSetup:
        return cls(
            rlimits=tuple((int(which), int(value)) for which, value in body["rlimits"]),
            landlock=bool(body["landlock"]),
            seccomp_filter=bytes.fromhex(body["seccomp_filter"]),
        )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _prctl(option: int, *args: object) -> None:
    """``prctl(option, args...)``, every argument widened to the ``unsigned long`` the
    kernel reads (ctypes would pass a small int as a 32-bit ``int`` to the variadic call)."""
    libc = ctypes.CDLL(None, use_errno=True)
    wide = [arg if not isinstance(arg, int) else ctypes.c_ulong(arg) for arg in args]
    wide += [ctypes.c_ulong(0)] * (4 - len(wide))
    if libc.prctl(ctypes.c_int(option), *wide) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def apply_child_setup(setup: ChildSetup, ruleset_fd: int | None) -> None:
    """Apply ``setup`` to the calling process (a forked child, before exec); raises when
    any of it fails, so the command never runs less confined than planned.

    ``no_new_privs`` comes first whenever a Landlock ruleset or a seccomp filter is
    applied: both require it (without CAP_SYS_ADMIN), and it keeps a set-user-ID program
    from shedding them."""
    for which, value in setup.rlimits:
        resource.setrlimit(which, (value, value))
    if setup.landlock or setup.seccomp_filter:
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if setup.landlock:
        if ruleset_fd is None:
            raise OSError(0, "landlock_restrict_self: no ruleset was passed")
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset_fd, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"landlock_restrict_self: {os.strerror(errno)}")
    if setup.seccomp_filter:
        program = ctypes.create_string_buffer(setup.seccomp_filter, len(setup.seccomp_filter))
        fprog = _SockFprog(len(setup.seccomp_filter) // 8, ctypes.addressof(program))
        _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog))


# --- the process tree, as /proc shows it -----------------------------------------------------


def _process_table() -> dict[int, int]:
    """pid -> parent pid of every live process (zombies are left out: they run nothing and
    cannot be signalled; their parent reaps them)."""
    table: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            parsed = _stat(int(name))
            if parsed is not None and parsed[1] not in ("Z", "X"):
                table[int(name)] = parsed[0]
    return table


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            line = stat_file.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
    fields = line.rpartition(b")")[2].split()
    return (int(fields[1]), fields[0].decode()) if len(fields) >= 2 else None


def _descendants(roots: Iterable[int], table: dict[int, int]) -> list[tuple[int, int]]:
    """(pid, parent pid) of every process below ``roots``, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, parent in table.items():
        children.setdefault(parent, []).append(pid)
    found: list[tuple[int, int]] = []
    queue = list(roots)
    while queue:
        parent = queue.pop(0)
        for pid in children.get(parent, ()):
            found.append((pid, parent))
            queue.append(pid)
    return found


def _signal_descendant(pid: int, parent: int, signum: int) -> None:
    """Signal ``pid`` only if it is still the process seen as ``parent``'s child: the pidfd
    pins it, so a pid reused meanwhile by an unrelated process is never signalled (a
    re-parented child is found again by the next look)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfds (before Linux 5.3): the pid, checked just before, must do
        stat = _stat(pid)
        if stat is not None and stat[0] == parent:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        return
    try:
        stat = _stat(pid)
        if stat is not None and stat[0] == parent:
            signal.pidfd_send_signal(pidfd, signum)
    except (ProcessLookupError, PermissionError):
        pass  # gone meanwhile; or set-user-ID (only possible without a sandbox)
    finally:
        os.close(pidfd)


def _signal_trees(roots: Sequence[int], signum: int) -> None:
    """Signal ``roots`` (the supervisor's own children: their pids cannot be reused before
    it reaps them) and everything below them."""
    if not roots:
        return
    for pid in roots:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    try:
        table = _process_table()
    except OSError:  # no /proc: each process group is the best that can be done
        for pid in roots:
            try:
                os.killpg(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
        return
    for pid, parent in _descendants(roots, table):
        _signal_descendant(pid, parent, signum)


def _direct_children() -> list[int]:
    own = os.getpid()
    try:
        with open(f"/proc/self/task/{own}/children") as children_file:
            return [int(word) for word in children_file.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN
        return [pid for pid, parent in _process_table().items() if parent == own]


# --- the supervisor process -------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def _become_command(
    argv: list[str], env: dict[str, str], cwd: str, setup: ChildSetup, stdout_fd: int,
    ruleset_fd: int | None, supervisor_pid: int,
) -> None:  # fmt: skip
    """In the forked child: become the command's top process, then exec it."""
    os.setsid()  # its own session and process group, away from the supervisor's signals
    # If the supervisor dies the command dies with it (its leftovers are then beyond reach).
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != supervisor_pid:
        os._exit(_EXEC_FAILED)  # the supervisor died before the line above
    # Preserved across exec: what the command starts and abandons stays below it.
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP,
                   signal.SIGPIPE, signal.SIGXFSZ):  # fmt: skip
        signal.signal(signum, signal.SIG_DFL)  # Python ignores SIGPIPE; commands expect it
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stdout_fd, 2)
    os.chdir(cwd)
    apply_child_setup(setup, ruleset_fd)
    os.execvpe(argv[0], argv, env)


def _fork_exec(
    argv: list[str], env: dict[str, str], cwd: str, setup: ChildSetup, stdout_fd: int,
    ruleset_fd: int | None,
) -> int:  # fmt: skip
    """Start a command; its pid, or OSError with why it could not start (reported by the
    child through a close-on-exec pipe, as ``subprocess`` does)."""
    supervisor_pid = os.getpid()
    error_read, error_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; it execs or exits
        try:
            os.close(error_read)
            _become_command(argv, env, cwd, setup, stdout_fd, ruleset_fd, supervisor_pid)
        except BaseException as exc:
            os.write(error_write, _describe(exc).encode(errors="replace")[:4096])
        os._exit(_EXEC_FAILED)
    os.close(error_write)
    with os.fdopen(error_read, "rb") as error_pipe:
        reason = error_pipe.read()
    if reason:
        os.waitpid(pid, 0)
        raise OSError(0, reason.decode(errors="replace"))
    return pid


@dataclass(eq=False)
class _Command:
    sock: socket.socket
    pid: int
    returncode: int | None = None
    """Set when the top process has exited (and been reaped)."""
    stop_grace: float | None = None
    """Set when the server asked to stop it: seconds between SIGTERM and SIGKILL."""
    kill_at: float = 0.0
    terminated: bool = False
    connected: bool = True


@dataclass(eq=False)
class _Supervisor:
    control: socket.socket
    shutdown_grace: float
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    commands: list[_Command] = field(default_factory=list)
    tops: dict[int, _Command] = field(default_factory=dict)
    shutdown_at: float | None = None
    signalled_to_exit: bool = False

    def serve(self) -> None:
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        signal.signal(signal.SIGTERM, self._on_terminate)
        for ignored in (signal.SIGINT, signal.SIGHUP):  # the server decides when to end
            signal.signal(ignored, signal.SIG_IGN)
        self.selector.register(wake_read, selectors.EVENT_READ, lambda: os.read(wake_read, 512))
        self.selector.register(self.control, selectors.EVENT_READ, self._on_control)
        while True:
            busy = self.shutdown_at is not None or any(
                command.stop_grace is not None for command in self.commands
            )
            for key, _events in self.selector.select(STOP_POLL_SECS if busy else None):
                callback: Callable[[], object] = key.data
                callback()
            if self.signalled_to_exit and self.shutdown_at is None:
                self._shut_down()
            self._reap()
            self._advance(time.monotonic())
            if self.shutdown_at is not None and self._finished_shutting_down():
                return

    def _on_terminate(self, signum: int, frame: object) -> None:
        self.signalled_to_exit = True

    def _on_control(self) -> None:
        try:
            data, ancillary, flags, _address = self.control.recvmsg(
                MAX_MESSAGE_BYTES,
                socket.CMSG_SPACE(MAX_DESCRIPTORS * 4),
                socket.MSG_CMSG_CLOEXEC,
            )
        except OSError:
            data, ancillary, flags = b"", [], 0
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data and not fds:
            self._shut_down()  # the server is gone
            return
        truncated = flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
        self._spawn(data, list(fds), "the spawn request was truncated" if truncated else None)

    def _spawn(self, data: bytes, fds: list[int], problem: str | None) -> None:
        if len(fds) < 2:
            for fd in fds:
                os.close(fd)
            return  # no command socket to answer on: the server's side will see it end
        command_sock = socket.socket(fileno=fds[0])
        stdout_fd, extra = fds[1], fds[2:]
        try:
            if problem is not None:
                raise OSError(0, problem)
            request = json.loads(data)
            setup = ChildSetup.from_json(request["setup"])
            ruleset_fd = extra[0] if setup.landlock and extra else None
            pid = _fork_exec(
                [str(word) for word in request["argv"]],
                {str(key): str(value) for key, value in request["env"].items()},
                str(request["cwd"]),
                setup,
                stdout_fd,
                ruleset_fd,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _send(command_sock, {"event": "failed", "error": _describe(exc)})
            command_sock.close()
            return
        finally:
            for fd in (stdout_fd, *extra):
                os.close(fd)
        command = _Command(command_sock, pid)
        self.tops[pid] = command
        self.commands.append(command)
        self.selector.register(command_sock, selectors.EVENT_READ, lambda: self._on_stop(command))
        _send(command_sock, {"event": "started", "pid": pid})

    def _on_stop(self, command: _Command) -> None:
        try:
            data = command.sock.recv(MAX_STOP_MESSAGE_BYTES)
        except OSError:
            data = b""
        if not data:  # the server's side went away: stop it without a grace period
            self.selector.unregister(command.sock)
            command.connected = False
            grace = 0.0
        else:
            try:
                grace = max(0.0, float(json.loads(data).get("grace", 0.0)))
            except (ValueError, TypeError, AttributeError):
                grace = 0.0
        if command.stop_grace is None:
            command.stop_grace = grace

    def _shut_down(self) -> None:
        self.shutdown_at = time.monotonic()
        if self.control.fileno() >= 0:
            self.selector.unregister(self.control)
            self.control.close()
        for command in self.commands:
            if command.stop_grace is None:
                command.stop_grace = self.shutdown_grace

    def _finished_shutting_down(self) -> bool:
        assert self.shutdown_at is not None
        if not self.commands and not self._leftovers():
            return True
        if time.monotonic() > self.shutdown_at + self.shutdown_grace + UNKILLABLE_LIMIT_SECS:
            _warn(f"processes that would not die are left: {self._leftovers()}; exiting")
            return True
        return False

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            command = self.tops.pop(pid, None)
            if command is not None:
                command.returncode = os.waitstatus_to_exitcode(status)
                _send(command.sock, {"event": "exited", "returncode": command.returncode})

    def _leftovers(self) -> list[int]:
        """The supervisor's children that are not a running command's top process: what
        ended commands left behind (see the module docstring)."""
        return [pid for pid in _direct_children() if pid not in self.tops]

    def _advance(self, now: float) -> None:
        """Move every stop along: SIGTERM to the command's tree and to every leftover,
        SIGKILL once the grace is over (again each round, for what forks meanwhile), and
        ``done`` once the top process is reaped and no leftover remains. Leftovers no
        ended command may still claim (its output draining) are killed at once."""
        stopping = [command for command in self.commands if command.stop_grace is not None]
        leftovers = self._leftovers()
        # A top process that exited is a zombie by the time its children show up here
        # (the kernel re-parents them and marks it in one step): reaping now tells its
        # leftovers, which may still be draining output, from strays.
        self._reap()
        if not stopping:
            draining = any(c.returncode is not None for c in self.commands)
            if leftovers and not draining:
                _signal_trees(leftovers, signal.SIGKILL)
            return
        for command in stopping:
            running = [command.pid] if command.returncode is None else []
            if not command.terminated:
                command.terminated = True
                command.kill_at = now + (command.stop_grace or 0.0)
                _signal_trees(running + leftovers, signal.SIGTERM)
            elif now >= command.kill_at:
                _signal_trees(running + leftovers, signal.SIGKILL)
            if command.returncode is not None and not leftovers:
                self._finish(command)
            elif now >= command.kill_at + UNKILLABLE_LIMIT_SECS:
                _warn(f"processes that would not die are left: {running + leftovers}")
                self._finish(command)

    def _finish(self, command: _Command) -> None:
        self.commands.remove(command)
        if command.connected:
            _send(command.sock, {"event": "done"})
            self.selector.unregister(command.sock)
        command.sock.close()


def _warn(message: str) -> None:
    # stderr is the server's log (stdout, the protocol stream in stdio mode, is /dev/null).
    sys.stderr.write(f"zeroclaw: WARNING: supervisor: {message}\n")


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the server's side is gone; the command is stopped when its socket ends


def main(argv: Sequence[str]) -> None:
    """``supervisor.py CONTROL_FD KILL_GRACE_SECS``."""
    control = socket.socket(fileno=int(argv[1]))
    # Passed in inheritable; a command holding it could ask for unconfined commands.
    control.set_inheritable(False)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    os.chdir("/")  # hold no directory of the server's busy
    _Supervisor(control, shutdown_grace=float(argv[2])).serve()


if __name__ == "__main__":
    main(sys.argv)
