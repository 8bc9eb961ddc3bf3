"""A session's skills as tools and as slash commands.

Each skill is a command: its name without the ``/``, the skill's description, and a hint
when it declares ``argument-hint`` (the protocol sends them as ACP's
``available_commands_update``: acp_server/protocol/presentation/commands.py). A prompt whose
text starts with ``/<command>`` (alone or followed by whitespace) runs that turn with the
skill's instructions in front of the user's text; any other ``/word`` is ordinary text.
Command names are the skill names with runs of whitespace turned into ``-``, matched
case-insensitively.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec

from acp_server.agent.skills.loader import LoadedSkills, warn_once
from acp_server.agent.skills.manifest import Skill
from acp_server.agent.skills.tools import skill_tools
from acp_server.agent.tools.base import Tool
from acp_server.patterns import LazyPattern

logger = logging.getLogger(__name__)

_COMMAND: Final = LazyPattern(r"/(\S+)(?:\s|$)")
SKILL_PROMPT_TEMPLATE: Final = (
    "[The user invoked the '{name}' skill. Follow its instructions for this request.]\n\n"
    '<skill_instructions name="{name}">\n{instructions}\n</skill_instructions>\n\n{text}'
)


def command_name(skill: Skill) -> str:
    return "-".join(skill.name.split())


class SkillCommand(msgspec.Struct, frozen=True):
    """One slash command: ``/name``, what it does, and what to type after it."""

    name: str
    description: str
    hint: str | None = None


def skill_commands(skills: LoadedSkills) -> list[SkillCommand]:
    """The slash commands of ``skills``, in the skills' order (one per command name)."""
    commands: list[SkillCommand] = []
    seen: set[str] = set()
    for skill in skills.skills:
        name = command_name(skill)
        if not name or name.casefold() in seen:
            continue
        seen.add(name.casefold())
        commands.append(SkillCommand(name, skill.description, skill.argument_hint or None))
    return commands


def expand_skill_command(skills: LoadedSkills, text: str) -> str:
    """``text`` with the invoked skill's instructions in front, or ``text`` unchanged."""
    match = _COMMAND.match(text.lstrip())
    if match is None:
        return text
    wanted = match.group(1).casefold()
    for skill in skills.skills:
        if command_name(skill).casefold() == wanted:
            instructions = skill.instructions or skill.description
            return SKILL_PROMPT_TEMPLATE.format(
                name=skill.name, instructions=instructions, text=text
            )
    return text


@dataclass(eq=False)
class SkillCommands:
    """What a session's current skills add: their tools and their commands."""

    skills: LoadedSkills = field(default_factory=LoadedSkills)
    _tool_names: frozenset[str] = frozenset()
    _sent: list[SkillCommand] | None = None

    def use(
        self, skills: LoadedSkills, tools: Mapping[str, Tool], *, compact: bool
    ) -> dict[str, Tool] | None:
        """Adopt the skills of a new reading (``compact``: the prompt lists them by name
        and ``read_skill`` reads one); the session's new tool set, or None when its tools
        stay as they are. A skill tool never replaces a tool of another origin."""
        self.skills = skills
        added = skill_tools(skills, compact=compact)
        if not added and not self._tool_names:
            return None
        merged = {name: tool for name, tool in tools.items() if name not in self._tool_names}
        kept: set[str] = set()
        for name, tool in added.items():
            if name in merged:
                warn_once(f"skill tool {name} skipped: a tool with that name already exists")
                continue
            merged[name] = tool
            kept.add(name)
        self._tool_names = frozenset(kept)
        return merged

    def changed(self, *, always: bool = False) -> list[SkillCommand] | None:
        """The commands to announce: always (after a session opens), or only when they
        changed since the last list announced; None when there is nothing to announce."""
        commands = skill_commands(self.skills)
        if not always and commands == self._sent:
            return None
        self._sent = commands
        return commands

    def expand(self, text: str) -> str:
        return expand_skill_command(self.skills, text)
