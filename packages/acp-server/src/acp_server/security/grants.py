"""What a session is granted, computed in one place for the file tools' path jail
(security/paths.py) and the shell's OS sandbox (security/sandbox/spawn.py), so the two
grant exactly the same set.

A session's **roots** are its cwd and its extra roots (ACP ``additionalDirectories``):
readable and writable (read-only under a ``readonly`` profile) by the file tools and by
shell commands alike. Inside a root, the **denied** paths are the ones a ``forbidden_paths``
entry (or a private path) names below it; neither the jail nor the sandbox reaches them,
except through another root nested inside. A forbidden path that *contains* a root does not
deny that root's contents: the client chose that directory.

The server's **private paths** (its config directory, data directory, TLS key and the
server user's home: ``RiskProfileConfig.private_paths``) are never reached from outside a
root: the jail refuses them at every risk level and the sandbox hides them under every
backend. A client may not name a root that would grant them (``root_refusal``).

Decisions over canonical paths; the only file system calls resolve the real spelling of
a configured path (``os.path.realpath``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from acp_server.config import RiskProfileConfig


def is_within(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or below it; both absolute and normalized (string compare:
    this runs for every file of a directory walk, ``Path.parents`` is far slower)."""
    text, prefix = str(path), str(root)
    return text == prefix or text.startswith(prefix.rstrip("/") + "/")


class ForbiddenEntry(msgspec.Struct, frozen=True):
    """One path no tool may touch: ``shown`` says why in messages (``forbidden_paths has
    ~/.ssh``, ``the config directory /srv/zeroclaw is the server's own``)."""

    shown: str
    path: Path


def _spellings(path: Path) -> tuple[Path, ...]:
    """The lexical form and the real one (a directory may be reached through a link:
    macOS's /tmp is /private/tmp)."""
    real = Path(os.path.realpath(path))
    return (path,) if real == path else (path, real)


def forbidden_entries(profile: RiskProfileConfig, workspace: Path) -> tuple[ForbiddenEntry, ...]:
    """The profile's ``forbidden_paths`` (``~`` expanded; a relative entry is taken from the
    workspace) and its private paths, each in both spellings."""
    expanded: dict[Path, str] = {}
    for entry in profile.forbidden_paths:
        if not entry.strip():
            continue
        raw = Path(os.path.normpath(os.path.expanduser(entry)))
        if not raw.is_absolute():
            raw = Path(os.path.normpath(workspace / raw))
        for path in _spellings(raw):
            expanded.setdefault(path, f"forbidden_paths has {entry}")
    for private in profile.private_paths:
        for path in _spellings(Path(os.path.normpath(private.path))):
            expanded.setdefault(path, f"{private.label} {private.path} is the server's own")
    return tuple(ForbiddenEntry(shown, path) for path, shown in expanded.items())


class SessionGrants(msgspec.Struct, frozen=True):
    """The paths one session's tools may reach (see the module docstring)."""

    roots: tuple[Path, ...]
    """The cwd first, then the extra roots; canonical."""
    forbidden: tuple[ForbiddenEntry, ...]
    """Every forbidden and private path, wherever it is."""
    denied: tuple[Path, ...]
    """The forbidden or private paths strictly inside a root: the sandbox carves them out."""
    private: tuple[Path, ...]
    """The private paths (both spellings), hidden from commands wherever they are."""
    writable: bool

    def forbidden_reason(self, path: Path) -> str | None:
        """Why ``path`` (absolute, normalized) is forbidden, or None.

        The defaults forbid /home and /tmp, which contain nearly every project directory. A
        forbidden path that *contains* a root (or is one) therefore does not forbid that
        root's own contents: the client chose that directory. It still forbids everything
        else under it, and forbidden paths inside a root (e.g. ~/.ssh when the cwd is $HOME)
        or elsewhere always apply."""
        for entry in self.forbidden:
            if not is_within(path, entry.path):
                continue
            if any(is_within(root, entry.path) and is_within(path, root) for root in self.roots):
                continue
            return entry.shown
        return None

    def allows(self, path: Path) -> bool:
        """Whether ``path`` (absolute, normalized, real) is granted: inside a root and not
        forbidden there. The sandbox grants exactly these paths (security/sandbox)."""
        inside = any(is_within(path, root) for root in self.roots)
        return inside and self.forbidden_reason(path) is None

    def denied_within(self, root: Path) -> tuple[Path, ...]:
        """The denied paths below ``root``."""
        return tuple(path for path in self.denied if is_within(path, root) and path != root)


def session_grants(
    profile: RiskProfileConfig, workspace: Path, extra_roots: Sequence[Path] = ()
) -> SessionGrants:
    """The grants of a session with these roots (canonical) under ``profile``."""
    roots = (workspace, *(root for root in extra_roots if root != workspace))
    entries = forbidden_entries(profile, workspace)
    denied: list[Path] = []
    for entry in entries:
        inside = any(is_within(entry.path, root) and entry.path != root for root in roots)
        if inside and entry.path not in denied:
            denied.append(entry.path)
    private = tuple(
        path
        for item in profile.private_paths
        for path in _spellings(Path(os.path.normpath(item.path)))
    )
    return SessionGrants(
        roots=roots,
        forbidden=entries,
        denied=tuple(denied),
        private=private,
        writable=profile.level != "readonly",
    )


def root_refusal(root: Path, profile: RiskProfileConfig) -> str | None:
    """Why a root a client names (the cwd or an ``additionalDirectories`` entry; canonical)
    may not be granted, or None. Granting it would grant the whole file system, the
    server's own files, the server user's home, or a forbidden path; the file tools would
    refuse those paths while shell commands could reach them."""
    if root == Path(root.anchor):
        return "it is the file system root"
    for private in profile.private_paths:
        for path in _spellings(Path(os.path.normpath(private.path))):
            if is_within(path, root):
                return f"it contains {private.label} ({private.path})"
    for entry in _absolute_entries(profile.forbidden_paths):
        for path in _spellings(entry[1]):
            if path == root:
                return f"it is a forbidden path (forbidden_paths has {entry[0]})"
            if is_within(path, root):
                return f"it contains a forbidden path (forbidden_paths has {entry[0]})"
    return None


def _absolute_entries(entries: Iterable[str]) -> Iterable[tuple[str, Path]]:
    """The absolute (or ``~``) entries: a relative entry is taken from each workspace, so it
    denies a path inside the root instead of refusing the root."""
    for entry in entries:
        expanded = os.path.expanduser(entry.strip())
        if expanded and os.path.isabs(expanded):
            yield entry, Path(os.path.normpath(expanded))
