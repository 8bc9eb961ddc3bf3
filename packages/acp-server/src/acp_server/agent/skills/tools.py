"""The tools skills bring: ``read_skill`` (compact mode) and each skill's ``[[tools]]``.

``read_skill {name}`` returns a skill's manifest file as written (``SKILL.md`` with its
front matter, or ``SKILL.toml``); names compare case-insensitively. It reads only the
agent's own skills, so it has no side effects; like ZeroClaw's implementation it is not auto-approved.

A ``shell`` or ``script`` tool of a skill is registered as ``<skill>__<tool>``. Its
``command`` is a shell command line in which ``{{arg}}`` becomes that argument's value and
``{{skill_dir}}`` the skill's directory, each quoted for where it stands (unquoted, in
single or in double quotes: ``skills/templates.py``) so that the shell reads the value back
as literal text; a tool whose template puts a placeholder where no quoting is sound is
not registered (a warning names it). The approval shows the composed command line. The
command line is then judged and run exactly as the ``shell`` tool's would be: the same
approval rules (``ToolRules.command_of``: allowlist, risk classes, jail, always-ask), the
same OS sandbox, environment and output cap; ``timeout_secs`` replaces the runtime
profile's ``shell_timeout_secs`` when given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final

import msgspec
import trio
from msgspec import Meta
from msgspec.structs import replace

from acp_core.tools import tool_kind
from acp_server.agent.skills.loader import LoadedSkills
from acp_server.agent.skills.manifest import RUNNABLE_TOOL_KINDS, Skill, SkillTool
from acp_server.agent.skills.prompt_section import composed_tool_name
from acp_server.agent.skills.templates import fill, unquotable_placeholders
from acp_server.agent.tools._titles import target_title
from acp_server.agent.tools.arguments import (
    SchemaOf,
    ToolArguments,
    arguments_schema,
    parse_arguments,
)
from acp_server.agent.tools.base import (
    RefusedCall,
    Tool,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.security import ToolRules

logger = logging.getLogger(__name__)

READ_SKILL_TOOL: Final = "read_skill"


class ReadSkillArguments(ToolArguments):
    name: Annotated[str, Meta(min_length=1, description="The skill's <name>.")]


class ReadSkillTool:
    definition: Final = ToolDefinition(
        name=READ_SKILL_TOOL,
        kind=tool_kind(READ_SKILL_TOOL),
        title=target_title("Read skill", "name"),
        arguments=ReadSkillArguments,
    )
    name = READ_SKILL_TOOL
    description = (
        "Read the full instructions of one of the skills listed under Available Skills "
        "(its SKILL.md or SKILL.toml as written)."
    )
    side_effects = False
    parameters = SchemaOf(ReadSkillArguments)

    def __init__(self, skills: Callable[[], LoadedSkills]) -> None:
        self._skills = skills

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        wanted = parse_arguments(ReadSkillArguments, arguments).name
        loaded = self._skills()
        skill = loaded.find(wanted)
        if skill is None:
            names = ", ".join(sorted(skill.name for skill in loaded.skills)) or "none"
            raise ToolError(f"Unknown skill '{wanted}'. Available skills: {names}")
        try:
            text = await trio.to_thread.run_sync(skill.location.read_text, "utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolError(
                f"Failed to read skill '{skill.name}' from {skill.location}: {exc}"
            ) from None
        return ToolOutput(text)


def skill_tool_arguments(tool: SkillTool) -> type[ToolArguments]:
    """The Struct of a skill tool's arguments: each of its ``args`` a required string,
    described by the manifest (by its name when the manifest gives no description)."""
    fields = [
        (f"argument_{index}", Annotated[str, Meta(description=description or name)])
        for index, (name, description) in enumerate(tool.args)
    ]
    struct = msgspec.defstruct(
        f"SkillToolArguments_{tool.name}",
        fields,
        bases=(ToolArguments,),
        # Manifest names need not be Python identifiers (``file-name``).
        rename={f"argument_{index}": name for index, (name, _) in enumerate(tool.args)},
        forbid_unknown_fields=True,
        kw_only=True,
    )
    assert issubclass(struct, ToolArguments)
    return struct


class SkillShellTool:
    """One ``shell``/``script`` entry of a skill's ``[[tools]]``."""

    side_effects = True

    def __init__(self, skill: Skill, tool: SkillTool) -> None:
        self.skill = skill
        self.tool = tool
        self.name = composed_tool_name(skill.name, tool.name)
        self.description = f"{tool.description} (skill {skill.name})"
        self.arguments = skill_tool_arguments(tool)
        self.definition = ToolDefinition(
            name=self.name,
            kind=tool_kind(self.name),
            rules=ToolRules(command_of=self.command),
            arguments=self.arguments,
        )

    @property
    def parameters(self) -> dict[str, Any]:
        return arguments_schema(self.arguments)

    def command(self, arguments: Mapping[str, Any]) -> str | None:
        """The command line for ``arguments``; None when one is missing or not a string."""
        values: dict[str, str] = {"skill_dir": str(self.skill.directory)}
        for name, _ in self.tool.args:
            value = arguments.get(name)
            if not isinstance(value, str):
                return None
            values[name] = value
        try:
            return fill(self.tool.command, values)
        except ValueError:  # skill_tools registers no such tool; refused all the same
            return None

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        parse_arguments(self.arguments, arguments)
        command = self.command(arguments)
        if command is None:  # a template skill_tools would not register
            wanted = ", ".join(name for name, _ in self.tool.args)
            raise RefusedCall(f"{self.name} needs string arguments: {wanted}")
        if self.tool.timeout_secs is not None:
            ctx = replace(ctx, shell_timeout_secs=float(self.tool.timeout_secs))
        # The shell tool's module loads with the first command run, as the built-in
        # tools' do (agent/tools/builtin_set.py), not with the skills' slash commands.
        from acp_server.agent.tools.shell import ShellTool

        return await ShellTool().run({"command": command}, ctx)


def skill_tools(loaded: LoadedSkills, *, compact: bool) -> dict[str, Tool]:
    """The tools ``loaded`` adds to a session, by name: ``read_skill`` in compact mode,
    then every runnable ``[[tools]]`` entry (the first of two that compose one name)."""
    tools: dict[str, Tool] = {}
    if compact and loaded.skills:
        tools[READ_SKILL_TOOL] = ReadSkillTool(lambda: loaded)
    for skill in loaded.skills:
        for entry in skill.tools:
            if entry.kind not in RUNNABLE_TOOL_KINDS:
                continue
            unquotable = unquotable_placeholders(entry.command)
            if unquotable:
                logger.warning(
                    "skill %s: tool %s is not registered: {{%s}} stands after %s, where "
                    "its value cannot be quoted; put it outside those (it is quoted for you)",
                    skill.name,
                    entry.name,
                    unquotable[0].name,
                    unquotable[0].context.value,
                )
                continue
            tool = SkillShellTool(skill, entry)
            tools.setdefault(tool.name, tool)
    return tools
