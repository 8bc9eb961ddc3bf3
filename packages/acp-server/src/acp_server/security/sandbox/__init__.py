"""The OS sandbox for the shell tool (Linux): Landlock, bubblewrap, firejail, or none.

Unlike the rest of ``acp_server.security`` (pure policy over words and paths), this
package talks to the kernel: ``landlock.py`` (system calls), ``bubblewrap.py`` (the
``bwrap`` command line), ``posture.py`` (availability and the per-profile choice),
``spawn.py`` (how one command is started). The word-level policy still decides deny /
ask / allow first; the sandbox confines what an allowed command can actually reach.
"""

from acp_server.security.sandbox.posture import (
    BACKENDS,
    BackendProbe,
    BackendStatus,
    SandboxPosture,
    agent_posture,
    resolve_posture,
    system_probe,
)
from acp_server.security.sandbox.spawn import (
    ResourceLimits,
    SandboxRefused,
    SpawnPlan,
    discard_session_temp_dir,
    plan_spawn,
    session_temp_dir,
    shell_program,
    spawned,
)

__all__ = [
    "BACKENDS",
    "BackendProbe",
    "BackendStatus",
    "ResourceLimits",
    "SandboxPosture",
    "SandboxRefused",
    "SpawnPlan",
    "agent_posture",
    "discard_session_temp_dir",
    "plan_spawn",
    "resolve_posture",
    "session_temp_dir",
    "shell_program",
    "spawned",
    "system_probe",
]
