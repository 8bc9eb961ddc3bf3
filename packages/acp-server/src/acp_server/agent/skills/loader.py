"""An agent's skills: directories of instructions (and optional tools) the model is told about.

Lookup (``SkillsConfig.sources``, in order): ``<agent workspace>/skills/<name>/``, then
``<workspace_dir>/shared/skills/<bundle>/<name>/`` for each of the agent's
``skill_bundles``. Within a source the skill directories are read in sorted order; a
skill whose name an earlier one already took is left out. Each directory holds
``SKILL.toml`` (authoritative when present) or ``SKILL.md``.

Before a skill is read its whole tree is audited (``audit_skill``): a symlink, a script
file (a shell/PowerShell/batch suffix, or a shebang naming a shell) unless
``allow_scripts``, or any file over ``MAX_SKILL_FILE_BYTES`` drops the skill, with one
warning naming the file and the reason. The front matter of ``SKILL.md`` is YAML
(``agent/skills/manifest.py``).

``load_skills`` is blocking (run it in a worker thread); it also returns every path it
looked at (``LoadedSkills.watched``), so a session can ``stat`` them before each turn and
load again only when something changed: a manifest edited, a file or a skill added or
removed.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import msgspec

from acp_server.agent.skills.manifest import (
    Skill,
    SkillManifestError,
    parse_skill_markdown,
    parse_skill_toml,
)
from acp_server.config import SkillsConfig

logger = logging.getLogger(__name__)

MAX_SKILL_FILE_BYTES: Final = 512 * 1024
MAX_SKILL_ENTRIES: Final = 1000
"""The most files and directories one skill's tree may hold."""
SCRIPT_SUFFIXES: Final = frozenset(
    {".sh", ".bash", ".zsh", ".ksh", ".fish", ".ps1", ".bat", ".cmd"}
)
SHEBANG_SHELLS: Final = frozenset({"sh", "bash", "zsh", "ksh", "fish", "pwsh", "powershell"})
MARKDOWN_MANIFEST: Final = "SKILL.md"
TOML_MANIFEST: Final = "SKILL.toml"

_warned: set[str] = set()


def warn_once(message: str) -> None:
    """Log ``message`` as a warning the first time this process sees it: skills are read
    again by every session and after every change, a problem is worth one line."""
    if message in _warned:
        return
    _warned.add(message)
    logger.warning("%s", message)


class LoadedSkills(msgspec.Struct, frozen=True):
    skills: tuple[Skill, ...] = ()
    watched: tuple[Path, ...] = ()
    """The sources, every directory in them and each skill's manifest file: when none of
    them changed (size, modification time, inode), loading again gives the same skills
    (an edit to another file of a skill, in place, is seen once one of these changes)."""
    problems: tuple[str, ...] = msgspec.field(default=())

    def find(self, name: str) -> Skill | None:
        """The skill called ``name``, compared case-insensitively."""
        wanted = name.casefold()
        for skill in self.skills:
            if skill.name.casefold() == wanted:
                return skill
        return None


def load_skills(config: SkillsConfig) -> LoadedSkills:
    """Every usable skill of ``config``'s sources, in lookup order (blocking)."""
    skills: list[Skill] = []
    taken: dict[str, Path] = {}
    watched: list[Path] = []
    problems: list[str] = []
    for source in config.sources:
        watched.append(source)
        for directory in _skill_directories(source):
            watched.append(directory)
            skill, problem = _load_one(directory, config.allow_scripts, watched)
            if problem is not None:
                problems.append(problem)
                warn_once(problem)
                continue
            assert skill is not None
            earlier = taken.get(skill.name.casefold())
            if earlier is not None:
                # Earlier sources win, as in ZeroClaw's implementation, which drops the later quietly.
                logger.debug("skill %s (%s) shadowed by %s", skill.name, directory, earlier)
                continue
            taken[skill.name.casefold()] = skill.location
            skills.append(skill)
    return LoadedSkills(tuple(skills), tuple(watched), tuple(problems))


def _skill_directories(source: Path) -> list[Path]:
    """The subdirectories of ``source`` (not following symlinks), sorted by name."""
    try:
        entries = list(os.scandir(source))
    except OSError:
        return []
    found: list[Path] = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False) or entry.is_symlink():
                found.append(Path(entry.path))
        except OSError:
            continue
    return sorted(found, key=lambda path: path.name)


def _load_one(
    directory: Path, allow_scripts: bool, watched: list[Path]
) -> tuple[Skill | None, str | None]:
    """The skill in ``directory``, or the one-line reason it is skipped."""
    toml_path = directory / TOML_MANIFEST
    manifest = toml_path if toml_path.is_file() else directory / MARKDOWN_MANIFEST
    if manifest.is_file():
        watched.append(manifest)  # a manifest created later changes the directory's time
    finding = audit_skill(directory, allow_scripts=allow_scripts, watched=watched)
    if finding is not None:
        return None, f"skill {directory} skipped: {finding}"
    if not manifest.is_file():
        return None, f"skill {directory} skipped: it has no {MARKDOWN_MANIFEST} or {TOML_MANIFEST}"
    try:
        if manifest is toml_path:
            return parse_skill_toml(manifest.read_text(encoding="utf-8"), directory, manifest), None
        text = manifest.read_text(encoding="utf-8", errors="replace")
        return parse_skill_markdown(text, directory, manifest), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"skill {directory} skipped: cannot be read: {exc}"
    except SkillManifestError as exc:
        return None, f"skill {directory} skipped: {exc}"


def audit_skill(directory: Path, *, allow_scripts: bool, watched: list[Path]) -> str | None:
    """The first problem that disqualifies the skill in ``directory`` ("<file>: <reason>"),
    or None. The subdirectories walked, and the file found at fault, are appended to
    ``watched``: a file added, removed or renamed anywhere in the skill changes one of
    their modification times."""
    count = 0
    for path, mode in _walk(directory):
        if stat.S_ISDIR(mode) and path != directory:
            watched.append(path)
        count += 1
        if count > MAX_SKILL_ENTRIES:
            return f"{directory}: more than {MAX_SKILL_ENTRIES} files and directories"
        if stat.S_ISLNK(mode):
            watched.append(path)
            return f"{path}: symlinks are not allowed in a skill"
        if not stat.S_ISREG(mode):
            continue
        size = _size(path)
        if size > MAX_SKILL_FILE_BYTES:
            watched.append(path)
            return f"{path}: file over {MAX_SKILL_FILE_BYTES // 1024} KiB ({size} bytes)"
        if not allow_scripts and is_script_file(path):
            watched.append(path)
            return f"{path}: script files are not allowed (set [skills] allow_scripts = true)"
    return None


def _walk(root: Path) -> Iterator[tuple[Path, int]]:
    """Every entry under ``root`` (``root`` itself first) with its ``lstat`` mode, sorted,
    never following a symlink."""
    try:
        yield root, os.lstat(root).st_mode
    except OSError:
        return
    if not stat.S_ISDIR(os.lstat(root).st_mode):
        return
    pending = [root]
    while pending:
        current = pending.pop()
        try:
            names = sorted(os.listdir(current))
        except OSError:
            continue
        for name in names:
            path = current / name
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            yield path, mode
            if stat.S_ISDIR(mode):
                pending.append(path)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def is_script_file(path: Path) -> bool:
    """A shell, PowerShell or batch script: by suffix, or by a shebang naming a shell."""
    if path.suffix.lower() in SCRIPT_SUFFIXES:
        return True
    try:
        with path.open("rb") as handle:
            head = handle.read(128)
    except OSError:
        return False
    return shebang_names_shell(head)


def shebang_names_shell(head: bytes) -> bool:
    """Whether the first line ``#!...`` runs a shell (``#!/bin/sh``, ``#!/usr/bin/env bash``)."""
    if not head.startswith(b"#!"):
        return False
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace")
    words = line.split()
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    if program == "env":
        rest = [word for word in words[1:] if not word.startswith("-")]
        if not rest:
            return False
        program = rest[0].rsplit("/", 1)[-1]
    return program.lower() in SHEBANG_SHELLS
