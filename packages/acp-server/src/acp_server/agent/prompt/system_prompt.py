"""The system prompt of an ACP session, rebuilt before every turn.

Sections, in ZeroClaw's order (its ``SystemPromptBuilder``), each separated by
a blank line and skipped when empty:

1. ``## CRITICAL CONTEXT: CURRENT DATE``: local date and UTC offset (no time of day);
2. ``## Project Context``: the agent's personality files (``agent/prompt/identity.py``), then
   ``## Project Instructions``: ``AGENTS.md`` (and the other ``[acp] project_instructions``
   names) from the session cwd and its parents, then ``## Agent Instructions``: the
   agent's own ``system_prompt`` string (``{workspace}`` replaced by the session cwd);
3. ``## CRITICAL: Tool Honesty`` when the session has tools;
4. ``## Safety`` with ``### Active Security Policy``: level, jail, command rules, the
   runtime profile's ``max_actions_per_hour`` (when set), OS sandbox posture;
5. ``## Shell`` when the shell tool is registered;
6. ``## Available Skills`` when the agent has skills (``agent/skills/prompt_section.py``);
7. ``## Workspace``: ``Working directory: `<session cwd>```;
8. ``## Runtime``: OS, shell and model.

``read_prompt_files`` reads the files (blocking: callers on the event loop run it in a
worker thread); ``file_signature`` over the ``prompt_file_candidates`` a session resolved
once is only ``stat`` calls, so a session can tell whether anything changed since its last
read without leaving the event loop.
"""

from __future__ import annotations

import logging
import os
import platform
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final

import msgspec

from acp_server.agent.prompt.aieos import AieosError, parse_aieos, render_aieos
from acp_server.agent.prompt.identity import (
    PERSONA_FILES,
    PersonaFile,
    read_persona_files,
    render_persona,
)
from acp_server.agent.skills.loader import LoadedSkills, load_skills
from acp_server.agent.skills.prompt_section import render_skills_section
from acp_server.config import AgentConfig, SkillsMode
from acp_server.security import PolicyViolation, SecurityPolicy
from acp_server.security.sandbox.posture import resolve_posture

logger = logging.getLogger(__name__)

MAX_PROJECT_INSTRUCTION_BYTES: Final = 32 * 1024
PROJECT_TRUNCATION_NOTICE: Final = (
    "[... project instructions truncated at {limit} bytes; farther directories were cut]"
)
_LEVEL_NAMES: Final = {"readonly": "ReadOnly", "supervised": "Supervised", "full": "Full"}


class ProjectFile(msgspec.Struct, frozen=True):
    path: Path
    text: str


class PromptInputs(msgspec.Struct, frozen=True):
    """Everything the system prompt depends on besides the files it reads."""

    agent: AgentConfig
    cwd: Path
    policy: SecurityPolicy
    tool_names: Sequence[str]
    model: str
    shell: str
    max_actions_per_hour: int | None = None
    """The runtime profile's action budget per session (None: no limit, nothing said)."""


class PromptFiles(msgspec.Struct, frozen=True):
    """What the files said at one reading."""

    persona: list[PersonaFile]
    project: list[ProjectFile]
    project_truncated: bool
    aieos: str = ""
    skills: LoadedSkills = msgspec.field(default_factory=LoadedSkills)
    skills_section: str = ""
    skills_mode: SkillsMode = "full"
    """The mode ``skills_section`` was rendered in (``full`` may have fallen back)."""


def read_prompt_files(inputs: PromptInputs) -> PromptFiles:
    """Read the persona, project instruction and skill files (blocking)."""
    workspace = inputs.agent.workspace
    persona = read_persona_files(workspace) if workspace is not None else []
    project, truncated = read_project_instructions(
        inputs.cwd, inputs.policy, inputs.agent.project_instructions
    )
    skills = load_skills(inputs.agent.skills)
    section, mode = render_skills_section(skills.skills, inputs.agent.skills, inputs.cwd)
    aieos = read_aieos(inputs.agent)
    return PromptFiles(persona, project, truncated, aieos, skills, section, mode)


def read_aieos(agent: AgentConfig) -> str:
    """The agent's AIEOS identity as prompt text (blocking); empty when not configured.
    A document that cannot be read or parsed is a warning, and the files stand alone."""
    identity = agent.identity
    if not identity.aieos_configured:
        return ""
    source = str(identity.aieos_path) if identity.aieos_path else "aieos_inline"
    try:
        if identity.aieos_path is not None:
            raw = identity.aieos_path.read_text(encoding="utf-8")
        else:
            raw = identity.aieos_inline or ""
        return render_aieos(parse_aieos(raw))
    except (OSError, UnicodeDecodeError, AieosError) as exc:
        logger.warning("agent %s: AIEOS identity %s ignored: %s", agent.alias, source, exc)
        return ""


def prompt_file_candidates(inputs: PromptInputs) -> tuple[Path, ...]:
    """Every file the prompt may read, resolved through the session's jail (refused ones
    left out). They depend only on the session's configuration: a session takes them
    once and ``file_signature`` stats them before each turn."""
    candidates: list[Path] = []
    if inputs.agent.identity.aieos_path is not None:
        candidates.append(inputs.agent.identity.aieos_path)
    if inputs.agent.workspace is not None:
        candidates.extend(inputs.agent.workspace / name for name in PERSONA_FILES)
    for directory in project_directories(inputs.cwd, inputs.policy):
        for name in inputs.agent.project_instructions:
            try:
                candidates.append(inputs.policy.resolve_path(str(directory / name)))
            except PolicyViolation:
                continue
    return tuple(candidates)


def file_signature(paths: Iterable[str | Path]) -> tuple[object, ...]:
    """Size, modification time and inode of each file (``None`` for an absent one): equal
    signatures mean nothing needs reading again."""
    signature: list[object] = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            signature.append((path, None))
            continue
        signature.append((path, stat.st_size, stat.st_mtime_ns, stat.st_ino))
    return tuple(signature)


def project_directories(cwd: Path, policy: SecurityPolicy) -> list[Path]:
    """The session cwd and its parents up to the jail's root, farthest first (so the
    nearest comes last). A jailed session's root is its cwd; an unjailed one goes to ``/``."""
    chain = [cwd]
    if not policy.jailed:
        chain.extend(cwd.parents)
    return list(reversed(chain))


def read_project_instructions(
    cwd: Path, policy: SecurityPolicy, names: Iterable[str]
) -> tuple[list[ProjectFile], bool]:
    """The project instruction files, farthest directory first, and whether the total
    was cut at ``MAX_PROJECT_INSTRUCTION_BYTES``; in one directory, in ``names`` order.
    The budget is spent nearest directory first, so
    the instructions closest to the cwd always survive. Every path goes through the
    session's jail, as ``file_read`` does: a refused or unreadable file is absent."""
    names = tuple(names)
    found: list[ProjectFile] = []
    budget = MAX_PROJECT_INSTRUCTION_BYTES
    truncated = False
    for directory in reversed(project_directories(cwd, policy)):
        in_directory: list[ProjectFile] = []
        for name in names:
            if budget <= 0:
                truncated = True
                break
            try:
                path = policy.resolve_path(str(directory / name))
                with path.open("rb") as handle:
                    data = handle.read(budget + 1)
            except (PolicyViolation, OSError):
                continue
            if len(data) > budget:
                data = data[:budget]
                truncated = True
            text = data.decode("utf-8", errors="ignore").strip()
            if text:
                budget -= len(data)
                in_directory.append(ProjectFile(directory / name, text))
        found[:0] = in_directory
    return found, truncated


def render_project_instructions(files: list[ProjectFile], truncated: bool) -> str:
    if not files:
        return ""
    parts = [
        "## Project Instructions",
        "Instructions from the project's files, farthest directory first; "
        "where they disagree, the later (nearer) file wins.",
    ]
    if truncated:
        parts.append(PROJECT_TRUNCATION_NOTICE.format(limit=MAX_PROJECT_INSTRUCTION_BYTES))
    parts.extend(f"### {file.path}\n\n{file.text}" for file in files)
    return "\n\n".join(parts)


def date_section(now: datetime) -> str:
    offset = now.strftime("%z") or "+0000"
    return (
        "## CRITICAL CONTEXT: CURRENT DATE\n\n"
        "The following is the absolute truth about the current date. Use it for any "
        "reasoning about relative time.\n\n"
        f"Date: {now.strftime('%Y-%m-%d')}\nUTC offset: {offset[:3]}:{offset[3:5]}"
    )


TOOL_HONESTY: Final = (
    "## CRITICAL: Tool Honesty\n\n"
    '- Never invent tool results. When a tool returns nothing, say "No results found."\n'
    "- When a tool fails, report the error; never make up data in its place.\n"
    "- When you are unsure whether a call worked, ask the user."
)

_LEVEL_GUIDANCE: Final = {
    "supervised": "Some actions need the user's approval: request it when the policy asks "
    "for it, do not refuse preemptively, and use the tools confidently.",
    "readonly": "This session is read-only: writes will be rejected. Use the read tools freely.",
    "full": "Act directly; refuse only when the runtime actually rejects an action.",
}


def safety_section(policy: SecurityPolicy, max_actions_per_hour: int | None = None) -> str:
    profile = policy.profile
    lines = ["## Safety", "", "- Do not exfiltrate private data."]
    if profile.level != "full":
        lines.append("- Do not run destructive commands without asking.")
        lines.append("- Do not bypass oversight or approval mechanisms.")
    lines.append("- Prefer `trash` over `rm`: recoverable beats gone forever.")
    lines += ["", _LEVEL_GUIDANCE[profile.level], "", "### Active Security Policy", ""]
    lines.append(f"- **Autonomy level**: {_LEVEL_NAMES[profile.level]}")
    if policy.jailed:
        lines.append(
            f"- **Workspace boundary**: file operations are restricted to `{policy.workspace}`."
        )
    if profile.allowed_commands:
        shown = ", ".join(f"`{command}`" for command in profile.allowed_commands)
        lines.append(f"- **Allowed shell commands**: {shown}. You may execute these freely.")
    if profile.forbidden_paths:
        shown = ", ".join(f"`{path}`" for path in profile.forbidden_paths)
        lines.append(f"- **Forbidden paths**: {shown}. Avoid accessing these paths.")
    if profile.block_high_risk_commands:
        lines.append(
            "- **High-risk commands** (rm, kill, reboot, ...) are blocked; do not try them."
        )
    if profile.require_approval_for_medium_risk:
        lines.append("- **Medium-risk commands** require user approval before execution.")
    if max_actions_per_hour is not None:
        # Worded as ZeroClaw's SecurityPolicy::prompt_summary; the budget is per
        # session (agent/limits/actions.py), which is what "per chat" means here.
        lines.append(
            f"- **Rate limit**: max {max_actions_per_hour} actions per hour per chat "
            "(each conversation has its own independent budget)."
        )
    lines.append(f"- **OS sandbox** for shell commands: {resolve_posture(profile).describe()}")
    return "\n".join(lines)


def build_system_prompt(
    inputs: PromptInputs, files: PromptFiles, now: datetime | None = None
) -> str:
    """The whole system prompt from what ``read_prompt_files`` returned."""
    agent = inputs.agent
    moment = now if now is not None else datetime.now().astimezone()
    sections = [date_section(moment)]
    persona = render_persona(files.persona, files.aieos)
    sections.append(f"## Project Context\n\n{persona}" if persona else "")
    sections.append(render_project_instructions(files.project, files.project_truncated))
    if agent.system_prompt and agent.system_prompt.strip():
        own = agent.system_prompt.replace("{workspace}", str(inputs.cwd)).strip()
        sections.append(f"## Agent Instructions\n\n{own}")
    if inputs.tool_names:
        sections.append(TOOL_HONESTY)
    sections.append(safety_section(inputs.policy, inputs.max_actions_per_hour))
    if "shell" in inputs.tool_names:
        sections.append(f"## Shell\n\nCommands run through `{Path(inputs.shell).name}`.")
    sections.append(files.skills_section)
    sections.append(f"## Workspace\n\nWorking directory: `{inputs.cwd}`")
    runtime = f"OS: {platform.system().lower()} | Shell: {Path(inputs.shell).name}"
    sections.append(f"## Runtime\n\n{runtime} | Model: {inputs.model}")
    return "\n\n".join(section.rstrip() for section in sections if section.strip())
