"""Skills configuration: the ``[skills]`` table and ``[agents.<alias>] skill_bundles`` /
``skills_mode`` (``docs/agents.md``, "Skills").

``[skills]`` holds what applies to every agent: ``allow_scripts`` (default false: a
skill containing a script file is skipped), ``skills_mode`` (``full``, the default, or
``compact``) and ``max_full_chars`` (the size of the skills block beyond which ``full``
falls back to ``compact``). An agent may set its own ``skills_mode``, and names the bundles
it uses, each a directory ``<workspace_dir>/shared/skills/<bundle>/`` with one skill per
subdirectory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from msgspec.structs import replace

from acp_server.config.values import (
    DEFAULT_MAX_FULL_SKILLS_CHARS,
    AgentConfig,
    SkillsConfig,
    SkillsMode,
)

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

SKILLS_MODES: Final = ("full", "compact")
SKILLS_TABLE_KEYS: Final = frozenset({"allow_scripts", "skills_mode", "max_full_chars"})
AGENT_SKILL_KEYS: Final = frozenset({"skill_bundles", "skills_mode"})
"""The keys of ``[agents.<alias>]`` this module reads."""


def agent_table_keys(field_names: frozenset[str]) -> frozenset[str]:
    """The keys ``[agents.<alias>]`` accepts, from ``AgentConfig``'s field names: the fields
    the parser fills from elsewhere are not keys; the skill keys are."""
    return (field_names - {"alias", "project_instructions", "skills"}) | AGENT_SKILL_KEYS


def skill_sources(
    agent_workspace: Path, workspace_dir: Path, bundles: tuple[str, ...]
) -> tuple[Path, ...]:
    """Where an agent's skills are looked up, earlier winning name clashes."""
    shared = workspace_dir / "shared" / "skills"
    return (agent_workspace / "skills", *(shared / bundle for bundle in bundles))


def parse_skills_table(parser: ConfigParser, doc: Mapping[str, Any]) -> SkillsConfig:
    """The ``[skills]`` table as the defaults every agent starts from (no sources yet)."""
    table = parser.table(doc, "skills", "skills")
    parser.warn_unknown(table, SKILLS_TABLE_KEYS, "skills")
    mode = _mode(parser, table, "skills.skills_mode", "full")
    return SkillsConfig(
        mode=mode,
        allow_scripts=parser.get(table, "allow_scripts", "skills.allow_scripts", bool, False),
        max_full_chars=parser.get(
            table,
            "max_full_chars",
            "skills.max_full_chars",
            int,
            DEFAULT_MAX_FULL_SKILLS_CHARS,
            lambda value: None if value > 0 else "must be positive",
        ),
    )


def agent_skills(
    parser: ConfigParser,
    agent: AgentConfig,
    defaults: SkillsConfig,
    workspace_dir: Path,
    body: Mapping[str, Any],
) -> AgentConfig:
    """``agent`` with its skills: the sources in lookup order and the effective mode."""
    prefix = f"agents.{agent.alias}"
    bundles = parser.strings(body, "skill_bundles", f"{prefix}.skill_bundles", ())
    for bundle in bundles:
        if not bundle.strip() or bundle in (".", "..") or "/" in bundle or "\\" in bundle:
            raise parser.error(
                f"{prefix}.skill_bundles",
                f"{bundle!r} is not a bundle name (a directory under shared/skills/)",
            )
    mode = _mode(parser, body, f"{prefix}.skills_mode", defaults.mode)
    workspace = agent.workspace
    sources = skill_sources(workspace, workspace_dir, bundles) if workspace is not None else ()
    return replace(agent, skills=replace(defaults, sources=sources, mode=mode))


def _mode(
    parser: ConfigParser, table: Mapping[str, Any], dotted: str, default: SkillsMode
) -> SkillsMode:
    key = dotted.rpartition(".")[2]
    chosen = parser.get(table, key, dotted, str, default)
    if chosen not in SKILLS_MODES:
        raise parser.error(dotted, f"must be full or compact; got {chosen!r}")
    return "compact" if chosen == "compact" else "full"
