"""bubblewrap (``bwrap``): the command in fresh mount, pid (and optionally network)
namespaces with a read-only view of the system.

``--cap-drop ALL`` is not optional: run as root, bubblewrap keeps its capabilities inside
the sandbox, and a ``mount -o remount,bind,rw /`` there would make ``/`` writable again.
``--unshare-pid --die-with-parent`` keeps the command's processes inside one pid namespace
that dies with bubblewrap (the process supervisor, ``supervisor.py``, stops what is left of
every command under every backend; bubblewrap's namespace is a second wall).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

HIDDEN_DIRS: Final = ("/tmp", "/run", "/root", "/home")
"""Mounted as empty tmpfs: other users' files, the server's sockets and temp files."""
_PROBE_TIMEOUT_SECS: Final = 10.0


def bwrap_program() -> str | None:
    return shutil.which("bwrap")


def bwrap_argv(
    program: str,
    *,
    workspace: Path,
    writable_workspace: bool,
    temp_dir: Path,
    extra_read_only: Sequence[Path],
    network: bool,
    extra_roots: Sequence[Path] = (),
) -> list[str]:
    """bubblewrap's command line up to and including ``--``; the command follows. The
    workspace and ``extra_roots`` are bound read-write (read-only unless
    ``writable_workspace``), after the tmpfs mounts so that one under them shows."""
    argv = [
        program,
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    if not network:
        argv.append("--unshare-net")
    for hidden in HIDDEN_DIRS:
        argv += ["--tmpfs", hidden]
    for path in extra_read_only:
        # Only what a tmpfs hides needs its own mount; the rest is in the read-only "/".
        if any(path.is_relative_to(hidden) for hidden in HIDDEN_DIRS):
            argv += ["--ro-bind-try", str(path), str(path)]
    argv += ["--bind", str(temp_dir), str(temp_dir)]
    for root in (workspace, *extra_roots):
        argv += ["--bind" if writable_workspace else "--ro-bind", str(root), str(root)]
    argv += ["--chdir", str(workspace), "--"]
    return argv


def probe(program: str | None, preexec_fn: Callable[[], None] | None = None) -> str | None:
    """None when bubblewrap really runs a command with our options (and under
    ``preexec_fn``, the set-up its commands get), else the reason.

    A real run, not ``--version``: a bwrap binary without the user namespaces or
    privileges it needs is installed but unusable."""
    if program is None:
        return "bwrap not found on PATH"
    with tempfile.TemporaryDirectory(prefix="zeroclaw-bwrap-probe-") as scratch:
        workspace = Path(scratch)
        argv = bwrap_argv(
            program,
            workspace=workspace,
            writable_workspace=True,
            temp_dir=workspace,
            extra_read_only=(),
            network=False,
        )
        try:
            completed = subprocess.run(
                [*argv, "/bin/sh", "-c", "true"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                preexec_fn=preexec_fn,
                timeout=_PROBE_TIMEOUT_SECS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bwrap failed to run: {exc}"
    if completed.returncode != 0:
        detail = completed.stderr.decode(errors="replace").strip().splitlines()
        return "bwrap failed: " + (detail[-1] if detail else f"exit {completed.returncode}")
    return None
