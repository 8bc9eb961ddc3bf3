"""A session's skill commands as ACP's ``available_commands_update``: each command's ``name``
(without the ``/``), its ``description``, and ``input.hint`` when the skill declares an
``argument-hint`` (acp_server/agent/skills/commands.py decides which commands there are)."""

from __future__ import annotations

from collections.abc import Sequence

from acp_core import schema
from acp_server.agent.skills.commands import SkillCommand, skill_commands
from acp_server.agent.skills.loader import LoadedSkills


def available_command(command: SkillCommand) -> schema.AvailableCommand:
    return schema.AvailableCommand(
        name=command.name,
        description=command.description,
        input=schema.AvailableCommandInput(hint=command.hint) if command.hint else None,
    )


def available_commands(skills: LoadedSkills) -> list[schema.AvailableCommand]:
    """The slash commands of ``skills`` as ACP lists them, in the skills' order."""
    return [available_command(command) for command in skill_commands(skills)]


def commands_update(commands: Sequence[SkillCommand]) -> schema.AvailableCommandsUpdate:
    return schema.AvailableCommandsUpdate(
        available_commands=[available_command(command) for command in commands]
    )
