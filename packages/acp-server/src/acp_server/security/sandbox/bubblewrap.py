"""bubblewrap (``bwrap``): the command in fresh mount, pid (and optionally network)
namespaces with a read-only view of the system.

``--cap-drop ALL`` is not optional: run as root, bubblewrap keeps its capabilities inside
the sandbox, and a ``mount -o remount,bind,rw /`` there would make ``/`` writable again.
``--unshare-pid --die-with-parent`` keeps the command's processes inside one pid namespace
that dies with bubblewrap (the process supervisor, ``supervisor.py``, stops what is left of
every command under every backend; bubblewrap's namespace is a second wall).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

from acp_server.security.grants import is_within

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
    hidden: Sequence[Path] = (),
    denied: Sequence[Path] = (),
) -> list[str]:
    """bubblewrap's command line up to and including ``--``; the command follows.

    The mounts, in order (a later one shows over an earlier one): the system read-only,
    ``HIDDEN_DIRS`` and ``hidden`` (the server's private paths) as empty tmpfs (a file is
    covered by ``/dev/null``), the ``extra_read_only`` program directories a tmpfs covered,
    the temp dir, the workspace and ``extra_roots`` (read-write unless not
    ``writable_workspace``), then ``denied`` (paths inside a root neither the sandbox nor the
    file tools grant) covered, and the roots inside a covered path bound again."""
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
    for directory in HIDDEN_DIRS:
        argv += ["--tmpfs", directory]
    covered = [Path(directory) for directory in HIDDEN_DIRS]
    every_private = _outermost(hidden)
    private = [path for path in every_private if not _under(path, covered)]
    argv += _cover(private)
    covered += private
    programs = [path for path in extra_read_only if _under(path, covered)]
    for path in programs:
        # Only what a tmpfs covers needs its own mount; the rest is in the read-only "/".
        argv += ["--ro-bind-try", str(path), str(path)]
    argv += _cover(path for path in every_private if _under(path, programs))
    argv += ["--bind", str(temp_dir), str(temp_dir)]
    roots = (workspace, *extra_roots)
    bind = "--bind" if writable_workspace else "--ro-bind"
    for root in roots:
        argv += [bind, str(root), str(root)]
    inside = _outermost(denied)
    argv += _cover(inside)
    for root in roots:
        if _under(root, inside):
            argv += [bind, str(root), str(root)]
    argv += ["--chdir", str(workspace), "--"]
    return argv


def _under(path: Path, covers: Iterable[Path]) -> bool:
    return any(is_within(path, cover) for cover in covers)


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """The existing ``paths`` not inside another one (covering that one covers them)."""
    present = [path for path in dict.fromkeys(paths) if os.path.lexists(path)]
    return [path for path in present if not any(o != path and is_within(path, o) for o in present)]


def _cover(paths: Iterable[Path]) -> list[str]:
    """Mounts that hide ``paths``: an empty tmpfs over a directory, ``/dev/null`` over a
    file (a symbolic link is left alone: it is not what is resolved through it)."""
    argv: list[str] = []
    for path in paths:
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--tmpfs", str(path)]
        elif os.path.isfile(path) and not os.path.islink(path):
            argv += ["--ro-bind", "/dev/null", str(path)]
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
