"""A session's skills as tools and as ACP slash commands.

Each skill is a command (``available_commands_update``: ``name`` without the ``/``, the
skill's description, ``input.hint`` when it declares ``argument-hint``). A prompt whose
text starts with ``/<command>`` (alone or followed by whitespace) runs that turn with the
skill's instructions in front of the user's text; any other ``/word`` is ordinary text.
Command names are the skill names with runs of whitespace turned into ``-``, matched
case-insensitively.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from acp_core import schema
from acp_server.agent.skills import LoadedSkills, warn_once
from acp_server.agent.skills_manifest import Skill
from acp_server.agent.skills_tools import skill_tools
from acp_server.agent.tools.base import Tool
from acp_server.patterns import LazyPattern

if TYPE_CHECKING:
    from acp_server.agent.system_prompt import PromptFiles

logger = logging.getLogger(__name__)

_COMMAND: Final = LazyPattern(r"/(\S+)(?:\s|$)")
SKILL_PROMPT_TEMPLATE: Final = (
    "[The user invoked the '{name}' skill. Follow its instructions for this request.]\n\n"
    '<skill_instructions name="{name}">\n{instructions}\n</skill_instructions>\n\n{text}'
)


def command_name(skill: Skill) -> str:
    return "-".join(skill.name.split())


def available_commands(skills: LoadedSkills) -> list[schema.AvailableCommand]:
    """The slash commands of ``skills``, in the skills' order (one per command name)."""
    commands: list[schema.AvailableCommand] = []
    seen: set[str] = set()
    for skill in skills.skills:
        name = command_name(skill)
        if not name or name.casefold() in seen:
            continue
        seen.add(name.casefold())
        hint = skill.argument_hint
        commands.append(
            schema.AvailableCommand(
                name=name,
                description=skill.description,
                input=schema.AvailableCommandInput(hint=hint) if hint else None,
            )
        )
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
    _sent: list[schema.AvailableCommand] | None = None

    def use(self, files: PromptFiles, tools: Mapping[str, Tool]) -> dict[str, Tool] | None:
        """Adopt the skills of a new reading; the session's new tool set, or None when
        its tools stay as they are. A skill tool never replaces a tool of another origin."""
        self.skills = files.skills
        added = skill_tools(files.skills, compact=files.skills_mode == "compact")
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

    def update(self, *, always: bool = False) -> schema.AvailableCommandsUpdate | None:
        """The ``available_commands_update`` to send: always (after a session opens), or
        only when the commands changed since the last one sent."""
        commands = available_commands(self.skills)
        if not always and commands == self._sent:
            return None
        self._sent = commands
        return schema.AvailableCommandsUpdate(available_commands=commands)

    def expand(self, text: str) -> str:
        return expand_skill_command(self.skills, text)
