"""The path jail: every path a file or shell tool touches stays inside the session cwd.

The ZeroClaw ACP documentation, "Security": the session cwd is the jail. ``PathJail.resolve_path`` canonicalizes a
tool's path argument (``~`` expanded, ``..`` collapsed, symbolic links followed) and refuses
it with ``PolicyViolation`` when it leaves the workspace (while jailed: the ``full`` level
lifts ``workspace_only``) or touches one of ``forbidden_paths`` or the server's private paths
(always). The directories a client names in ACP ``additionalDirectories`` are further roots
of the same jail (``extra_roots``): a path inside any root is inside; relative paths stay
relative to the cwd. What the roots grant is computed by security/grants.py, which the shell's
OS sandbox uses too (``PathJail.grants``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from acp_server.config import RiskProfileConfig
from acp_server.errors import ZeroclawError
from acp_server.security.grants import SessionGrants, is_within, session_grants

__all__ = ["PathJail", "PolicyViolation", "deliver_path_denial", "is_within"]


class PolicyViolation(ZeroclawError):
    """A tool call was refused by policy; ``str()`` is the model-facing reason."""


def deliver_path_denial(path: str) -> str | None:
    """deliver_file refuses any ``..`` component outright, even one that stays inside
    (as ZeroClaw's implementation does): a delivered path is spelled plainly or not at all."""
    if "\x00" in path:
        return "Path contains a NUL byte"
    if ".." in PurePosixPath(path).parts:
        return f"Path not allowed by security policy: {path}"
    return None


class PathJail:
    """The jail of one session.

    Args:
        profile: the agent's risk profile (``workspace_only``, ``level``, ``forbidden_paths``).
        workspace: the session's cwd (the jail); canonicalized here.
        extra_roots: further directories of the jail (already canonical, as
            ``canonical_roots`` makes them).
    """

    def __init__(
        self, profile: RiskProfileConfig, workspace: Path, extra_roots: Sequence[Path] = ()
    ) -> None:
        self.profile = profile
        self.workspace = workspace.resolve()
        self.extra_roots: tuple[Path, ...] = ()
        self.roots: tuple[Path, ...] = (self.workspace,)
        self.grants: SessionGrants
        """What the roots grant; the shell's OS sandbox confines commands to exactly this."""
        # add_roots computes them, once for the jail and its first roots: each computation
        # resolves every forbidden and private path (a realpath each).
        self.add_roots(extra_roots)

    def add_roots(self, extra_roots: Sequence[Path]) -> None:
        """Make ``extra_roots`` (canonical directories) part of the jail too."""
        for root in extra_roots:
            if root not in self.roots:
                self.extra_roots += (root,)
                self.roots += (root,)
        self.grants = session_grants(self.profile, self.workspace, self.extra_roots)

    def is_inside(self, path: Path) -> bool:
        """``path`` (absolute, normalized) is inside one of the jail's roots."""
        return any(is_within(path, root) for root in self.roots)

    @property
    def jailed(self) -> bool:
        """Whether paths must stay inside the workspace (``full`` lifts ``workspace_only``)."""
        return self.profile.workspace_only and self.profile.level != "full"

    @property
    def read_only(self) -> bool:
        return self.profile.level == "readonly"

    def resolve_path(self, path: str, *, for_write: bool = False) -> Path:
        """Resolve a tool's path argument inside the jail, or raise ``PolicyViolation``.

        Relative paths are relative to the workspace; ``~`` is expanded. Both the lexical
        form (``..`` collapsed) and the real path (symbolic links followed, a missing tail
        kept) must stay inside the workspace while jailed, and neither may touch a
        forbidden path. Returns the real path: callers use it, never the raw argument.
        """
        if "\x00" in path:
            raise PolicyViolation(f"Path contains a NUL byte: {path!r}")
        try:
            os.fsencode(path)  # a lone surrogate that no file name holds (\udcXX ones do)
        except UnicodeEncodeError as exc:
            raise PolicyViolation(
                f"Path is not text: {path.encode('utf-8', 'backslashreplace').decode()} holds "
                f"the unpaired surrogate \\u{ord(path[exc.start]):04x} at position {exc.start}"
            ) from None
        if not path.strip():
            raise PolicyViolation("Path is empty")
        if for_write and self.read_only:
            raise PolicyViolation(f"Path is read-only under this risk profile: {path}")
        candidate = Path(os.path.expanduser(path))
        if not candidate.is_absolute():
            candidate = self.workspace / candidate
        lexical = Path(os.path.normpath(candidate))
        if self.jailed and not self.is_inside(lexical):
            raise PolicyViolation(f"Path escapes workspace directory: {path}")
        try:
            resolved = candidate.resolve(strict=False)
        except (RuntimeError, OSError) as exc:  # symlink loop, unreadable component
            raise PolicyViolation(f"Path cannot be resolved: {path} ({exc})") from None
        if self.jailed and not self.is_inside(resolved):
            raise PolicyViolation(
                f"Path escapes workspace directory: {path} "
                f"(a symbolic link resolves it to {resolved})"
            )
        self._check_forbidden(path, lexical)
        if resolved != lexical:
            self._check_forbidden(path, resolved)
        return resolved

    def is_allowed_path(self, path: Path) -> bool:
        """Whether an already-absolute path (e.g. found by a directory walk) may be read."""
        try:
            self.resolve_path(str(path))
        except PolicyViolation:
            return False
        return True

    def allows_walked(self, path: Path) -> bool:
        """Whether a path reached by a walk that follows no link (so its own real path,
        security/beneath.py) may be used: inside the jail while jailed, and not forbidden.
        No file-system call: this runs for every entry of a search."""
        if self.jailed and not self.is_inside(path):
            return False
        try:
            self._check_forbidden(str(path), path)
        except PolicyViolation:
            return False
        return True

    def first_escaping_link(self, max_entries: int) -> tuple[Path | None, bool]:
        """The first symbolic link in the workspace whose target leaves the jail or is
        forbidden, found by a walk that never follows links; and whether the walk saw the
        whole tree (it stops after ``max_entries`` directory entries)."""
        seen = 0
        for directory, subdirectories, files in os.walk(self.workspace):
            for name in (*subdirectories, *files):
                seen += 1
                if seen > max_entries:
                    return None, False
                entry = Path(directory, name)
                if entry.is_symlink() and not self.is_allowed_path(entry):
                    return entry, True
        return None, True

    def _check_forbidden(self, shown: str, path: Path) -> None:
        reason = self.grants.forbidden_reason(path)
        if reason is not None:
            raise PolicyViolation(f"Path is forbidden by security policy: {shown} ({reason})")
