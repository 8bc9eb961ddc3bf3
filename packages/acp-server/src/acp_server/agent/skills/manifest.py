"""What one skill says about itself: ``SKILL.md`` (YAML front matter + body) or ``SKILL.toml``.

``SKILL.md``: when the file (newlines normalised) starts with a ``---`` line and a later
``---`` line closes it, the lines between are YAML, read with ``yaml.safe_load``. The
fields are ZeroClaw's: ``name`` (default: the directory name),
``description`` (default: the body's first line that is not a heading, else
``No description``), ``version`` (default ``0.1.0``), ``author``, ``tags`` (a list, or a
comma-separated string) and ``always``; ``argument-hint`` (or ``argument_hint``) is the
hint an editor shows after the skill's slash command. Other keys are ignored. Front
matter that is not valid YAML, or not a mapping, is an error naming the line.

``SKILL.toml``: a ``[skill]`` table (``name`` and ``description`` required; ``version``,
``author``, ``tags``, ``prompts``, ``always``, ``argument_hint``), root ``prompts``
appended to ``[skill] prompts``, and ``[[tools]]`` (``name``, ``description``, ``kind``,
``command``, ``args`` mapping each argument to its description, ``timeout_secs``).
``shell`` and ``script`` tools need a non-empty ``command``.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from acp_server.errors import ZeroclawError

DEFAULT_SKILL_VERSION: Final = "0.1.0"
NO_DESCRIPTION: Final = "No description"
RUNNABLE_TOOL_KINDS: Final = ("shell", "script")
"""``[[tools]]`` kinds registered as tools; the others are only listed in the prompt."""


class SkillManifestError(ZeroclawError):
    """A skill's manifest cannot be used; ``str()`` says where and why."""


class SkillTool(msgspec.Struct, frozen=True):
    name: str
    description: str
    kind: str
    command: str
    args: tuple[tuple[str, str], ...] = ()
    """Each argument's name and description; every one is a required string."""
    timeout_secs: int | None = None


class Skill(msgspec.Struct, frozen=True):
    name: str
    description: str
    location: Path
    """The manifest file (``SKILL.md`` or ``SKILL.toml``)."""
    directory: Path
    version: str = DEFAULT_SKILL_VERSION
    author: str | None = None
    tags: tuple[str, ...] = ()
    always: bool = False
    prompts: tuple[str, ...] = ()
    """The skill's instructions (a ``SKILL.md``: its whole body)."""
    tools: tuple[SkillTool, ...] = ()
    argument_hint: str | None = None

    @property
    def instructions(self) -> str:
        return "\n\n".join(prompt.strip() for prompt in self.prompts if prompt.strip())


def split_front_matter(text: str) -> tuple[str | None, str]:
    """``(front matter or None, body)`` of a ``SKILL.md`` (``\\r\\n`` read as ``\\n``)."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return None, text
    rest = text[4:]
    if rest.startswith("---\n") or rest == "---":
        return "", rest[4:]
    end = rest.find("\n---\n")
    if end >= 0:
        return rest[:end], rest[end + 5 :]
    if rest.endswith("\n---"):
        return rest[:-4], ""
    return None, text


def parse_skill_markdown(text: str, directory: Path, location: Path) -> Skill:
    front, body = split_front_matter(text)
    meta: Mapping[str, Any] = {}
    if front is not None and front.strip():
        import yaml  # only when a skill has front matter, not at start-up

        try:
            loaded = yaml.safe_load(front)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise SkillManifestError(
                f"{location}: the front matter is not valid YAML{where}: {problem}"
            ) from None
        if loaded is not None and not isinstance(loaded, dict):
            raise SkillManifestError(
                f"{location}: the front matter must be a YAML mapping of keys to values"
            )
        meta = loaded or {}
    description = _text(meta.get("description")) or _first_body_line(body) or NO_DESCRIPTION
    hint = _text(meta.get("argument-hint")) or _text(meta.get("argument_hint"))
    return Skill(
        name=_text(meta.get("name")) or directory.name,
        description=description,
        location=location,
        directory=directory,
        prompts=(body,) if body.strip() else (),
        argument_hint=hint or None,
        **_shared_fields(meta),
    )


def parse_skill_toml(text: str, directory: Path, location: Path) -> Skill:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SkillManifestError(f"{location}: invalid TOML: {exc}") from None
    table = document.get("skill")
    if not isinstance(table, dict):
        raise SkillManifestError(f"{location}: a [skill] table is required")
    name = _text(table.get("name"))
    description = _text(table.get("description"))
    if not name or not description:
        raise SkillManifestError(f"{location}: [skill] needs a name and a description")
    prompts = [*_strings(table.get("prompts"), location, "skill.prompts")]
    prompts += _strings(document.get("prompts"), location, "prompts")
    raw_tools = document.get("tools", [])
    if not isinstance(raw_tools, list):
        raise SkillManifestError(f"{location}: tools must be an array of tables ([[tools]])")
    hint = _text(table.get("argument_hint"))
    return Skill(
        name=name,
        description=description,
        location=location,
        directory=directory,
        prompts=tuple(prompts),
        tools=tuple(_tool(item, index, location) for index, item in enumerate(raw_tools)),
        argument_hint=hint or None,
        **_shared_fields(table),
    )


def _shared_fields(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``version``, ``author``, ``tags`` and ``always``, read alike from both formats."""
    return {
        "version": _text(meta.get("version")) or DEFAULT_SKILL_VERSION,
        "author": _text(meta.get("author")) or None,
        "tags": _tags(meta.get("tags")),
        "always": _flag(meta.get("always")),
    }


def _tool(item: object, index: int, location: Path) -> SkillTool:
    where = f"{location}: tools[{index}]"
    if not isinstance(item, dict):
        raise SkillManifestError(f"{where} must be a table")
    name = _text(item.get("name"))
    if not name:
        raise SkillManifestError(f"{where} needs a name")
    kind = _text(item.get("kind")) or "shell"
    command = item.get("command", "")
    if not isinstance(command, str):
        raise SkillManifestError(f"{where} ({name}): command must be a string")
    if kind in RUNNABLE_TOOL_KINDS and not command.strip():
        raise SkillManifestError(f"{where} ({name}): a {kind} tool needs a command")
    raw_args = item.get("args", {})
    if not isinstance(raw_args, dict):
        raise SkillManifestError(f"{where} ({name}): args must be a table of descriptions")
    timeout = item.get("timeout_secs")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)):
        raise SkillManifestError(f"{where} ({name}): timeout_secs must be an integer")
    return SkillTool(
        name=name,
        description=_text(item.get("description")) or name,
        kind=kind,
        command=command,
        args=tuple((str(key), _text(value)) for key, value in raw_args.items()),
        timeout_secs=max(1, timeout) if timeout is not None else None,
    )


def _text(value: object) -> str:
    """A scalar as trimmed text; anything else (absent, a list, a mapping) is empty."""
    if value is None or isinstance(value, (list, dict)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def _tags(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        items: list[object] = list(value.split(","))
    elif isinstance(value, list):
        items = value
    else:
        return ()
    return tuple(tag for tag in (_text(item) for item in items) if tag)


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() == "true"


def _strings(value: object, location: Path, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SkillManifestError(f"{location}: {key} must be an array of strings")
    return list(value)


def _first_body_line(body: str) -> str:
    for line in body.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped
    return ""
