"""The agent's personality: markdown files in its agent workspace, never the session cwd.

``SOUL.md``, ``IDENTITY.md``, ``USER.md``, ``AGENTS.md``, ``TOOLS.md``, ``HEARTBEAT.md`` and
``BOOTSTRAP.md`` are read in that order every time a system prompt is built, each trimmed
(empty after trimming = absent) and cut at ``MAX_PERSONA_FILE_CHARS`` characters with a
visible notice. ``MEMORY.md`` is never read: ACP sessions have no memory (the ZeroClaw ACP documentation, "Memory").

``seed_persona_files`` writes short default templates for the files that are missing or
blank; a file with content, edited by an admin or not, is never overwritten.
``BOOTSTRAP.md`` is never seeded: it is read only when someone puts it there.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Final

import msgspec

logger = logging.getLogger(__name__)

PERSONA_FILES: Final = (
    "SOUL.md",
    "IDENTITY.md",
    "USER.md",
    "AGENTS.md",
    "TOOLS.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
)
MAX_PERSONA_FILE_CHARS: Final = 20_000
PERSONA_TRUNCATION_NOTICE: Final = (
    "[... truncated at {limit} chars — use `file_read` for the full file]"
)

# {agent} is the agent's alias. No template names a memory tool: ACP sessions have none.
PERSONA_TEMPLATES: Final = {
    "SOUL.md": (
        "# SOUL.md: who you are\n\n"
        "You are **{agent}**, a coding agent working inside the user's editor.\n\n"
        "- Be genuinely helpful: read the code before you change it, and finish what you start.\n"
        "- Have opinions and say them plainly; say so when you are unsure.\n"
        "- Be resourceful before asking: look at the files, run the tests.\n"
        "- Keep answers short and say what you changed.\n"
    ),
    "IDENTITY.md": (
        "# IDENTITY.md\n\n- **Name:** {agent}\n- **Role:** coding agent over the Agent Client "
        "Protocol\n- **Vibe:** calm, precise, direct\n"
    ),
    "USER.md": (
        "# USER.md: about the user\n\n"
        "- **Name:** (not set)\n- **Timezone:** UTC\n- **Preferences:** (edit this file)\n"
    ),
    "AGENTS.md": (
        "# AGENTS.md: how you work\n\n"
        "- SOUL.md and USER.md above say who you are and whom you help.\n"
        "- Nothing is remembered between sessions: what matters is in the files.\n"
        "- Prefer reversible actions; ask before deleting or overwriting work you did not make.\n"
        "- Inspect, change, verify: run the project's tests after a change when you can.\n"
    ),
    "TOOLS.md": (
        "# TOOLS.md: notes about this environment\n\n"
        "Built-in tools: `shell`, `file_read`, `file_write`, `file_edit`, `glob_search`, "
        "`content_search`. Add notes about this machine and its tools here.\n"
    ),
    "HEARTBEAT.md": (
        "# HEARTBEAT.md\n\n<!-- Periodic checks to run, one per line. Empty by default. -->\n"
    ),
}


class PersonaFile(msgspec.Struct, frozen=True):
    name: str
    text: str
    truncated: bool = False


def read_persona_files(agent_workspace: Path) -> list[PersonaFile]:
    """The persona files present in ``agent_workspace``, in prompt order (blocking)."""
    found: list[PersonaFile] = []
    for name in PERSONA_FILES:
        try:
            raw = (agent_workspace / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        text = raw.strip()
        if not text:
            continue
        if len(text) > MAX_PERSONA_FILE_CHARS:
            found.append(PersonaFile(name, text[:MAX_PERSONA_FILE_CHARS], truncated=True))
        else:
            found.append(PersonaFile(name, text))
    return found


def seed_persona_files(agent_workspace: Path, alias: str) -> list[str]:
    """Write the default template of every missing or blank persona file (blocking);
    returns the names written. Problems are logged, never raised: a session still opens."""
    written: list[str] = []
    try:
        agent_workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        logger.warning("agent workspace %s cannot be created: %s", agent_workspace, exc)
        return written
    for name, template in PERSONA_TEMPLATES.items():
        path = agent_workspace / name
        try:
            if path.exists() and path.read_text(encoding="utf-8", errors="replace").strip():
                continue
            path.write_text(template.replace("{agent}", alias), encoding="utf-8")
        except OSError as exc:
            logger.warning("persona file %s cannot be seeded: %s", path, exc)
            continue
        written.append(name)
    return written


def render_persona(files: list[PersonaFile], aieos: str = "") -> str:
    """The personality part of ``## Project Context``: the AIEOS identity text when there
    is one, else a sentence introducing the files; then the files (empty: neither)."""
    if not files and not aieos:
        return ""
    parts = [aieos or "The following workspace files define your identity, behavior, and context."]
    for file in files:
        parts.append(f"### {file.name}\n\n{file.text}")
        if file.truncated:
            parts.append(PERSONA_TRUNCATION_NOTICE.format(limit=MAX_PERSONA_FILE_CHARS))
    return "\n\n".join(parts)
