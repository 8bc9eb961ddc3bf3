"""Which OS sandbox a risk profile gets: each backend's availability on this machine, the
choice for ``sandbox_enabled`` / ``sandbox_backend``, and how that posture is reported.

``sandbox_enabled`` unset is best effort: ``auto`` tries landlock, then bubblewrap, and
falls back to running unconfined with a warning. ``true``, or a backend named explicitly,
makes the sandbox required: when it cannot be had the shell tool refuses to run commands
(it never silently runs them unconfined). ``false`` or backend ``none`` turns it off.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Callable
from functools import cache, partial
from typing import Final, Literal

import msgspec
from msgspec.structs import replace

from acp_core.jsonrpc import JsonValue
from acp_server.config.values import (
    DEFAULT_AGENT_ALIAS,
    DEFAULT_PROFILE_ALIAS,
    Config,
    RiskProfileConfig,
)
from acp_server.security.sandbox import bubblewrap, landlock, seccomp

logger = logging.getLogger(__name__)

Backend = Literal["landlock", "bubblewrap", "firejail", "none"]
BACKENDS: Final[tuple[Backend, ...]] = ("landlock", "bubblewrap", "firejail", "none")
AUTO_ORDER: Final[tuple[Backend, ...]] = ("landlock", "bubblewrap")
_FIREJAIL_PROBE_TIMEOUT_SECS: Final = 10.0

AbstractSockets = Literal["landlock", "network-namespace", "seccomp", "reachable"]
"""How a command is kept from the host's abstract Unix sockets (D-Bus, X11, IDE helpers),
which have no file to protect and belong to a network namespace."""
ABSTRACT_SOCKETS_SAID: Final[dict[AbstractSockets, str]] = {
    "landlock": "out of reach (Landlock scope)",
    "network-namespace": "out of reach (a network namespace of its own)",
    "seccomp": "out of reach (Unix sockets refused by seccomp: Landlock ABI < 6)",
    "reachable": "reachable (no confinement)",
}


class BackendStatus(msgspec.Struct, frozen=True):
    name: Backend
    available: bool
    detail: str
    """``ABI 7`` or the program's path when available; the reason when not."""


def landlock_status() -> BackendStatus:
    abi = landlock.abi_version()
    if abi <= 0:
        return BackendStatus("landlock", False, "the kernel has no Landlock (or it is disabled)")
    return BackendStatus("landlock", True, f"ABI {abi}")


def bubblewrap_status() -> BackendStatus:
    """Measured the way commands run: under the scope-only Landlock ruleset where the kernel
    has scopes (``no_new_privs`` with it, which a set-user-ID bwrap does not survive)."""
    program = bubblewrap.bwrap_program()
    if landlock.abi_version() < landlock.SCOPE_ABI:
        problem = bubblewrap.probe(program)
    else:
        # Loaded here, not at import: session/new needs the posture, only a probe or a
        # command needs what a child applies to itself (supervisor.py, stdlib only).
        from acp_server.security.sandbox.supervisor import ChildSetup, apply_child_setup

        ruleset_fd = landlock.build_scope_ruleset()
        try:
            scoped = partial(apply_child_setup, ChildSetup(landlock=True), ruleset_fd)
            problem = bubblewrap.probe(program, preexec_fn=scoped)
        finally:
            os.close(ruleset_fd)
    if problem is not None or program is None:
        return BackendStatus("bubblewrap", False, problem or "bwrap not found on PATH")
    return BackendStatus("bubblewrap", True, program)


def firejail_argv(program: str, extra: tuple[str, ...], *, network: bool) -> list[str]:
    argv = [program, "--quiet", "--noprofile", "--caps.drop=all", "--nonewprivs", "--noroot"]
    if not network:
        argv.append("--net=none")
    return [*argv, *extra, "--"]


def firejail_status() -> BackendStatus:
    program = shutil.which("firejail")
    if program is None:
        return BackendStatus("firejail", False, "firejail not found on PATH")
    try:
        completed = subprocess.run(
            [*firejail_argv(program, (), network=True), "/bin/sh", "-c", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_FIREJAIL_PROBE_TIMEOUT_SECS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return BackendStatus("firejail", False, f"firejail failed to run: {exc}")
    if completed.returncode != 0:
        lines = completed.stderr.decode(errors="replace").strip().splitlines()
        return BackendStatus("firejail", False, "firejail failed: " + (lines[-1] if lines else ""))
    return BackendStatus("firejail", True, program)


class BackendProbe:
    """Each backend's availability, measured once per process (a real run for the
    programs, the system call for Landlock)."""

    def __init__(self, probes: dict[Backend, Callable[[], BackendStatus]] | None = None) -> None:
        self._probes: dict[Backend, Callable[[], BackendStatus]] = probes or {
            "landlock": landlock_status,
            "bubblewrap": bubblewrap_status,
            "firejail": firejail_status,
            "none": lambda: BackendStatus("none", True, "no OS confinement"),
        }
        self._known: dict[Backend, BackendStatus] = {}

    @classmethod
    def known(cls, statuses: dict[Backend, BackendStatus]) -> BackendProbe:
        """A probe that reports ``statuses`` without measuring (simulated machines)."""
        probe = cls()
        probe._known = dict(statuses)
        return probe

    def status(self, name: Backend) -> BackendStatus:
        known = self._known.get(name)
        if known is None:
            known = self._known[name] = self._probes[name]()
        return known

    def all(self) -> tuple[BackendStatus, ...]:
        return tuple(self.status(name) for name in BACKENDS)


@cache
def system_probe() -> BackendProbe:
    return BackendProbe()


class SandboxPosture(msgspec.Struct, frozen=True):
    """What a risk profile's shell commands run under."""

    requested: str
    """``off``, ``auto`` or the backend the profile names."""
    required: bool
    active: Backend
    detail: str  # e.g. "ABI 7" for landlock
    network: bool
    writable_workspace: bool
    reason: str | None = None
    """Why the active backend is not the requested one (fallback or refusal)."""
    abstract_sockets: AbstractSockets = "reachable"

    @property
    def hides_private_paths(self) -> bool:
        """Whether shell commands are kept from the server's private paths (its config and
        data directories, TLS key, its user's home): Landlock and bubblewrap do; firejail,
        as configured here, and no sandbox do not."""
        return self.active in ("landlock", "bubblewrap")

    @property
    def refuses(self) -> bool:
        """Required but unavailable: the shell tool refuses every command."""
        return self.required and self.active == "none"

    def describe(self) -> str:
        """One line, e.g. ``landlock ABI 7 (workspace rw, system ro, network allowed)``."""
        if self.refuses:
            return f"{self.requested} required but unavailable: {self.reason}; shell refused"
        if self.active == "none":
            why = "off" if self.requested == "off" else f"unavailable: {self.reason}"
            return f"none (shell commands run unconfined; sandbox {why})"
        name = f"landlock {self.detail}" if self.active == "landlock" else self.active
        workspace = "rw" if self.writable_workspace else "ro"
        network = "allowed" if self.network else "denied"
        return f"{name} (workspace {workspace}, system ro, network {network})"

    def meta(self) -> dict[str, JsonValue]:
        """``_meta.zeroclaw.sandbox`` in ``initialize`` and ``session/new`` results."""
        body: dict[str, JsonValue] = {
            "requested": self.requested,
            "required": self.required,
            "active": self.active,
            "network": "allow" if self.network else "deny",
            "description": self.describe(),
        }
        if self.active == "landlock":
            body["landlockAbi"] = self.detail.removeprefix("ABI ")
        if self.reason is not None:
            body["reason"] = self.reason
        body["abstractUnixSockets"] = self.abstract_sockets
        return body


def abstract_socket_confinement(
    active: Backend, network: bool, landlock_abi: int
) -> AbstractSockets:
    """What keeps a command of ``active`` from the host's abstract Unix sockets: Landlock's
    scope where the kernel has it (bubblewrap runs under a scope-only ruleset), else a
    network namespace of its own (bubblewrap and firejail with the network denied), else
    a seccomp filter refusing Unix sockets. ``none`` confines nothing, by definition;
    firejail is set-user-ID, which ``no_new_privs`` (needed by both) would break."""
    if active == "none":
        return "reachable"
    if active != "firejail" and landlock_abi >= landlock.SCOPE_ABI:
        return "landlock"
    if active != "landlock" and not network:
        return "network-namespace"
    if active == "firejail" or seccomp.unix_socket_filter() is None:
        return "reachable"
    return "seccomp"


def resolve_posture(
    profile: RiskProfileConfig, probe: BackendProbe | None = None
) -> SandboxPosture:
    """The posture ``profile`` gets on this machine (see the module docstring)."""
    probe = probe or system_probe()
    network = profile.sandbox_network != "deny"
    writable = profile.level != "readonly"

    landlock_now = probe.status("landlock")
    abi = int(landlock_now.detail.removeprefix("ABI ")) if landlock_now.available else 0

    def posture(requested: str, required: bool, status: BackendStatus) -> SandboxPosture:
        return SandboxPosture(
            requested=requested,
            required=required,
            active=status.name,
            detail=status.detail,
            network=network,
            writable_workspace=writable,
            abstract_sockets=abstract_socket_confinement(status.name, network, abi),
        )

    off = BackendStatus("none", True, "no OS confinement")
    if profile.sandbox_enabled is False or profile.sandbox_backend == "none":
        return posture("off", False, off)
    if profile.sandbox_backend != "auto":
        status = probe.status(profile.sandbox_backend)
        if status.available:
            return posture(profile.sandbox_backend, True, status)
        refused = posture(profile.sandbox_backend, True, off)
        return replace(refused, reason=f"{status.name}: {status.detail}")
    reasons: list[str] = []
    for name in AUTO_ORDER:
        status = probe.status(name)
        if status.available:
            return posture("auto", profile.sandbox_enabled is True, status)
        reasons.append(f"{name}: {status.detail}")
    fallback = posture("auto", profile.sandbox_enabled is True, off)
    return replace(fallback, reason="; ".join(reasons))


def agent_posture(
    config: Config, alias: str | None, probe: BackendProbe | None = None
) -> SandboxPosture:
    """The posture of ``alias``'s risk profile (the configured default agent when None)."""
    alias = alias or config.acp.default_agent or DEFAULT_AGENT_ALIAS
    agent = config.agents.get(alias)
    name = agent.risk_profile if agent is not None else DEFAULT_PROFILE_ALIAS
    return resolve_posture(config.risk_profiles.get(name, RiskProfileConfig()), probe)


def log_startup_posture(config: Config, default_agent: str | None) -> SandboxPosture:
    """One line for the default agent's posture (``sandbox: landlock ABI 7 (...)``), and
    one warning per risk profile whose best-effort sandbox fell back to none."""
    posture = agent_posture(config, default_agent)
    logger.info("sandbox: %s", posture.describe())
    for name in sorted(config.risk_profiles):
        other = resolve_posture(config.risk_profiles[name])
        if other.active == "none" and other.requested != "off" and not other.required:
            logger.warning(
                "risk profile %s: no OS sandbox available (%s); shell commands run unconfined",
                name,
                other.reason,
            )
        elif other.refuses:
            logger.warning("risk profile %s: sandbox %s", name, other.describe())
    return posture
