"""The ``## Available Skills`` section of the system prompt, as ZeroClaw renders it.

A short introduction for the mode, then an ``<available_skills>`` block: one ``<skill>``
per skill with ``<name>``, ``<description>``, ``<location>`` and, in ``full`` mode (or for
a skill marked ``always``), its ``<instructions>``; ``<callable_tools>`` lists the
skill's tools registered as ``<skill>__<tool>``, ``<tools>`` the others (not callable).
Text is XML-escaped; two spaces of indent per level.

``full`` inlines every body; when that block would pass ``max_full_chars`` the section
falls back to ``compact`` with a warning. ``compact`` gives names, descriptions and
locations (relative to the session cwd when inside it) and the model calls ``read_skill``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from acp_server.agent.skills.loader import warn_once
from acp_server.agent.skills.manifest import RUNNABLE_TOOL_KINDS, Skill
from acp_server.config import SkillsConfig, SkillsMode

SKILLS_HEADING: Final = "## Available Skills"
FULL_INTRO: Final = (
    "The skills below carry their instructions and tools. When one applies, follow its "
    "instructions directly; do not read the skill files at runtime unless the user asks."
)
COMPACT_INTRO: Final = (
    "Only a summary of each skill is below. When one applies, call `read_skill` with its "
    "`<name>` to get its full instructions. Skills marked always carry their instructions "
    "here already. `<location>` is for reference."
)
CALLABLE_HINT: Final = (
    "These are registered tools: call them directly by name instead of through the shell."
)
_XML_ESCAPES: Final = (
    ("&", "&amp;"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ('"', "&quot;"),
    ("'", "&apos;"),
)
"""XML 1.0's predefined entities, ``&`` first (xml.sax.saxutils would load urllib.request)."""
MAX_TOOL_NAME_CHARS: Final = 64
_FNV_OFFSET: Final = 0xCBF29CE484222325
_FNV_PRIME: Final = 0x100000001B3


def xml_text(value: str) -> str:
    for character, entity in _XML_ESCAPES:
        value = value.replace(character, entity)
    return value


def composed_tool_name(skill: str, tool: str) -> str:
    """``<skill>__<tool>``, kept to ``MAX_TOOL_NAME_CHARS`` of ``[A-Za-z0-9_-]``: other
    characters become ``_``; a longer name is cut and ends with a hash of the full one."""
    raw = f"{skill}__{tool}"
    clean = "".join(c if (c.isascii() and c.isalnum()) or c in "_-" else "_" for c in raw)
    if clean == raw and len(raw) <= MAX_TOOL_NAME_CHARS:
        return raw
    if len(clean) <= MAX_TOOL_NAME_CHARS:
        return clean
    digest = _FNV_OFFSET
    for byte in raw.encode("utf-8"):
        digest = ((digest ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{clean[:47]}_{digest:016x}"


def render_skills_section(
    skills: Sequence[Skill], config: SkillsConfig, cwd: Path
) -> tuple[str, SkillsMode]:
    """The section (empty without skills) and the mode it was rendered in."""
    if not skills:
        return "", config.mode
    if config.mode == "full":
        text = _render(skills, "full", cwd)
        if len(text) <= config.max_full_chars:
            return text, "full"
        warn_once(
            f"skills: the full skills block ({len(text)} characters) exceeds "
            f"[skills] max_full_chars ({config.max_full_chars}); using compact mode"
        )
    return _render(skills, "compact", cwd), "compact"


def _render(skills: Sequence[Skill], mode: SkillsMode, cwd: Path) -> str:
    lines = [SKILLS_HEADING, "", FULL_INTRO if mode == "full" else COMPACT_INTRO, ""]
    lines.append("<available_skills>")
    for skill in skills:
        lines.append("  <skill>")
        lines.append(f"    <name>{xml_text(skill.name)}</name>")
        lines.append(f"    <description>{xml_text(skill.description)}</description>")
        location = skill.location if mode == "full" else _shown_location(skill.location, cwd)
        lines.append(f"    <location>{xml_text(location.as_posix())}</location>")
        prompts = [prompt for prompt in skill.prompts if prompt.strip()]
        if prompts and (mode == "full" or skill.always):
            lines.append("    <instructions>")
            lines.extend(
                f"      <instruction>{xml_text(prompt.strip())}</instruction>" for prompt in prompts
            )
            lines.append("    </instructions>")
        callable_tools = [tool for tool in skill.tools if tool.kind in RUNNABLE_TOOL_KINDS]
        other_tools = [tool for tool in skill.tools if tool.kind not in RUNNABLE_TOOL_KINDS]
        if callable_tools:
            lines.append(f'    <callable_tools hint="{xml_text(CALLABLE_HINT)}">')
            for tool in callable_tools:
                lines.append("      <tool>")
                name = composed_tool_name(skill.name, tool.name)
                lines.append(f"        <name>{xml_text(name)}</name>")
                lines.append(f"        <description>{xml_text(tool.description)}</description>")
                lines.append("      </tool>")
            lines.append("    </callable_tools>")
        if other_tools:
            lines.append("    <tools>")
            for tool in other_tools:
                lines.append("      <tool>")
                lines.append(f"        <name>{xml_text(tool.name)}</name>")
                lines.append(f"        <description>{xml_text(tool.description)}</description>")
                lines.append(f"        <kind>{xml_text(tool.kind)}</kind>")
                lines.append("      </tool>")
            lines.append("    </tools>")
        lines.append("  </skill>")
    lines.append("</available_skills>")
    return "\n".join(lines)


def _shown_location(location: Path, cwd: Path) -> Path:
    try:
        return location.relative_to(cwd)
    except ValueError:
        return location
