"""How one shell command is started under its session's sandbox: the wrapped argv, the
environment, and what the forked child applies to itself before exec (``ChildSetup``:
resource limits, the Landlock ruleset, a seccomp filter). The process supervisor
(``supervisor.py``) starts it.

Every backend sees the same file-system shape: the system read-only, the session's roots
(its workspace and ACP ``additionalDirectories``) read-write (read-only for ``readonly``
profiles) exactly as the file tools' jail grants them (``PathJail.grants``,
security/grants.py: forbidden paths inside a root are left out), and a per-session temporary
directory that ``TMPDIR`` and ``HOME`` point at. Nothing else is writable, and the server's
private paths (config and data directories, TLS key, its user's home) are not readable,
wherever they are: Landlock grants the system directories around them, bubblewrap covers
them with an empty tmpfs.
"""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from acp_server.config.values import (
    DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES,
    DEFAULT_SHELL_CPU_LIMIT_SECS,
    DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES,
    RiskProfileConfig,
    RuntimeProfileConfig,
)
from acp_server.errors import ZeroclawError
from acp_server.patterns import LazyPattern
from acp_server.security.grants import SessionGrants, session_grants
from acp_server.security.sandbox import bubblewrap, landlock, seccomp
from acp_server.security.sandbox.posture import SandboxPosture, firejail_argv

if TYPE_CHECKING:
    # The supervisor's module (a standalone program, its ChildSetup and the ctypes calls a
    # child makes before exec) loads with the first command planned, not at session/new.
    from acp_server.security.sandbox.supervisor import ChildSetup

SYSTEM_READ_DIRS: Final = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
)  # fmt: skip
"""Readable (and executable) under Landlock; everything else is not granted."""
DEVICE_FILES: Final = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
)  # fmt: skip


class ResourceLimits(msgspec.Struct, frozen=True):
    """setrlimit values for every shell command (soft and hard; never above the
    server's own hard limit, which cannot be raised without CAP_SYS_RESOURCE)."""

    cpu_secs: int = DEFAULT_SHELL_CPU_LIMIT_SECS
    file_size_bytes: int = DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES
    address_space_bytes: int = DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES

    @classmethod
    def of_profile(cls, profile: RuntimeProfileConfig) -> ResourceLimits:
        """The limits a runtime profile sets (``[runtime_profiles.<alias>] shell_*_limit_*``)."""
        return cls(
            cpu_secs=profile.shell_cpu_limit_secs,
            file_size_bytes=profile.shell_file_size_limit_bytes,
            address_space_bytes=profile.shell_address_space_limit_bytes,
        )

    def pairs(self) -> tuple[tuple[int, int], ...]:
        wanted = (
            (resource.RLIMIT_CPU, self.cpu_secs),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
            (resource.RLIMIT_AS, self.address_space_bytes),
        )
        pairs = []
        for which, value in wanted:
            _soft, hard = resource.getrlimit(which)
            pairs.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        return tuple(pairs)


class SpawnPlan(msgspec.Struct):
    argv: list[str]
    env: dict[str, str]
    setup: ChildSetup
    """What the child applies to itself before exec (limits, Landlock, seccomp)."""
    ruleset_fd: int | None = None
    """The Landlock ruleset ``setup`` restricts with; ``spawned`` closes it."""

    @property
    def preexec_fn(self) -> Callable[[], None]:
        """``setup`` as a ``preexec_fn``, for starting the plan without the supervisor."""
        from acp_server.security.sandbox.supervisor import apply_child_setup

        return partial(apply_child_setup, self.setup, self.ruleset_fd)


class SandboxRefused(ZeroclawError):
    """The profile requires a sandbox this machine cannot provide."""


_SESSION_NAME: Final = LazyPattern(r"[^A-Za-z0-9_.-]")


@cache
def _temp_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"zeroclaw-shell-{os.getpid()}-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _session_temp_path(session_id: str) -> Path:
    return _temp_root() / (_SESSION_NAME.sub("_", session_id) or "session")


def session_temp_dir(session_id: str) -> Path:
    """The session's own temporary directory (created on first use, removed when the
    session leaves memory, ``discard_session_temp_dir``, and at exit)."""
    path = _session_temp_path(session_id)
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def discard_session_temp_dir(session_id: str) -> threading.Thread | None:
    """Remove the session's temporary directory, if it has one, on a short-lived thread
    (a command may have left a large tree there; the event loop never walks it). Returns
    the thread doing it (tests join it), or None when there was nothing to remove."""
    if _temp_root.cache_info().currsize == 0:
        return None  # no session of this process ever had one
    path = _session_temp_path(session_id)
    if not path.exists():
        return None
    thread = threading.Thread(
        target=shutil.rmtree,
        args=(path,),
        kwargs={"ignore_errors": True},
        name="zeroclaw-session-temp-cleanup",
        daemon=True,
    )
    thread.start()
    return thread


def shell_program() -> str:
    """The shell every command line runs in (``<shell> -c <command>``): the shell tool's
    commands and a skill's tools, and the one a session names in its prompt."""
    return shutil.which("bash") or shutil.which("sh") or "/bin/sh"


def program_dirs(env: Mapping[str, str]) -> tuple[Path, ...]:
    """Directories of the command's PATH and the server's Python installation, so that
    ``python3`` and tools installed outside the system directories still run."""
    dirs = [Path(entry) for entry in env.get("PATH", "").split(os.pathsep)]
    dirs = [path for path in dirs if path.is_absolute()]  # "" and "." mean the cwd: no
    dirs.append(Path(sys.base_prefix))
    home = Path.home()
    resolved: list[Path] = []
    for path in dirs:
        # A virtual environment's interpreter reads pyvenv.cfg beside its bin directory.
        for candidate in (path, path.resolve(), path.parent / "pyvenv.cfg"):
            # "/" or the home directory itself on PATH would grant everything beneath.
            too_wide = candidate == Path("/") or home.is_relative_to(candidate)
            if not too_wide and candidate not in resolved and candidate.exists():
                resolved.append(candidate)
    return tuple(resolved)


def _refusing_unix_sockets(setup: ChildSetup, posture: SandboxPosture) -> ChildSetup:
    """``setup`` with the seccomp filter that refuses Unix sockets, when that is what keeps
    this posture's commands from the host's abstract sockets (``posture.abstract_sockets``)."""
    program = seccomp.unix_socket_filter()
    if posture.abstract_sockets != "seccomp" or program is None:
        return setup
    return replace(setup, seccomp_filter=program)


def plan_spawn(
    command_argv: Sequence[str],
    *,
    posture: SandboxPosture,
    profile: RiskProfileConfig,
    workspace: Path,
    session_id: str,
    env: Mapping[str, str],
    limits: ResourceLimits | None = None,
    grants: SessionGrants | None = None,
) -> SpawnPlan:
    """How to start ``command_argv`` under ``posture``; ``SandboxRefused`` when the
    profile requires a sandbox that is not available. ``grants`` (the session jail's:
    ``PathJail.grants``) says what the command may reach; without it, the ``workspace``
    alone under ``profile``. Blocking (a few system calls): run it on a worker thread."""
    limits = limits or ResourceLimits()
    if posture.refuses:
        raise SandboxRefused(
            f"the risk profile requires an OS sandbox ({posture.requested}) and none is "
            f"available: {posture.reason}"
        )
    from acp_server.security.sandbox.supervisor import ChildSetup

    child_env = dict(env)
    rlimits = ChildSetup(rlimits=limits.pairs())
    if posture.active == "none":
        return SpawnPlan(list(command_argv), child_env, rlimits)
    temp_dir = session_temp_dir(session_id)
    # The user's home is not readable in the sandbox (keys, tokens, shell history); the
    # session's temp dir stands in, so tools that read ~/.gitconfig and the like still run.
    child_env["TMPDIR"] = child_env["HOME"] = str(temp_dir)
    programs = program_dirs(child_env)
    grants = grants or session_grants(profile, workspace)
    extra_roots = grants.roots[1:]
    if posture.active == "landlock":
        rules = landlock.LandlockRules(
            read_only=landlock.existing([Path(p) for p in SYSTEM_READ_DIRS] + list(programs)),
            read_write=(temp_dir,),
            devices=landlock.existing(Path(p) for p in DEVICE_FILES),
            network=posture.network,
            roots=grants.roots,
            roots_writable=posture.writable_workspace,
            hidden=grants.private,
            denied=grants.denied,
        )
        abi = int(posture.detail.removeprefix("ABI "))
        ruleset_fd = landlock.build_ruleset(rules, abi)  # scopes abstract sockets (ABI >= 6)
        setup = _refusing_unix_sockets(replace(rlimits, landlock=True), posture)
        return SpawnPlan(list(command_argv), child_env, setup, ruleset_fd)
    if posture.active == "bubblewrap":
        program = posture.detail
        prefix = bubblewrap.bwrap_argv(
            program,
            workspace=workspace,
            extra_roots=extra_roots,
            writable_workspace=posture.writable_workspace,
            temp_dir=temp_dir,
            extra_read_only=programs,
            network=posture.network,
            hidden=grants.private,
            denied=grants.denied,
        )
        # With the network allowed bubblewrap shares the host's network namespace, and
        # with it the host's abstract Unix sockets (D-Bus, X11, IDE helpers).
        if posture.abstract_sockets == "landlock":
            setup = replace(rlimits, landlock=True)
            return SpawnPlan(
                [*prefix, *command_argv], child_env, setup, landlock.build_scope_ruleset()
            )
        return SpawnPlan(
            [*prefix, *command_argv], child_env, _refusing_unix_sockets(rlimits, posture)
        )
    # firejail (set-user-ID: no_new_privs would stop it, so no Landlock scope either)
    prefix = firejail_argv(posture.detail, profile.firejail_args, network=posture.network)
    return SpawnPlan([*prefix, *command_argv], child_env, rlimits)


@contextmanager
def spawned(plan: SpawnPlan) -> Iterator[SpawnPlan]:
    """Closes the plan's descriptors (the Landlock ruleset) once the child is started."""
    try:
        yield plan
    finally:
        if plan.ruleset_fd is not None:
            os.close(plan.ruleset_fd)
