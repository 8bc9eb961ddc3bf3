"""What the operating system says about other processes, read from ``/proc`` (Linux).

Used for messages a person acts on, never for a decision: "the file is locked by pid 123
(zeroclaw acp)" tells an operator which window to close. Every process's open files are
listed under ``/proc/<pid>/fd``; a process of another user, or a system without ``/proc``,
shows nothing, and the answer is then an empty list rather than an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

MAX_NAMED_HOLDERS: Final = 3
MAX_COMMAND_CHARS: Final = 120
_PROC: Final = Path("/proc")


def _command_line(pid: int) -> str:
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    words = raw.rstrip(b"\0").split(b"\0")
    text = " ".join(word.decode("utf-8", "replace") for word in words) or "?"
    return text if len(text) <= MAX_COMMAND_CHARS else text[: MAX_COMMAND_CHARS - 3] + "..."


def _has_open(pid_dir: Path, targets: set[str]) -> bool:
    try:
        descriptors = list((pid_dir / "fd").iterdir())
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            if os.readlink(descriptor) in targets:
                return True
        except OSError:
            continue
    return False


def processes_holding(files: Iterable[str]) -> list[str]:
    """``"pid 123 (command line)"`` for each other process with one of ``files`` (absolute,
    resolved paths) open, at most ``MAX_NAMED_HOLDERS``; empty when it cannot be known."""
    targets = set(files)
    own = os.getpid()
    holders: list[str] = []
    try:
        entries = list(_PROC.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        if _has_open(entry, targets):
            holders.append(f"pid {entry.name} ({_command_line(int(entry.name))})")
            if len(holders) >= MAX_NAMED_HOLDERS:
                break
    return holders
