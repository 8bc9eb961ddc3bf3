"""An agent's files: ``[agents.<alias>.workspace] path``, ``[agents.<alias>.identity]``
(the AIEOS keys), and ``[acp] project_instructions`` (``docs/agents.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from msgspec.structs import replace

from acp_server.config.values import AcpConfig, AgentConfig, Config, IdentityConfig

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

IDENTITY_FORMATS: Final = ("openclaw", "aieos")


def parse_identity(
    parser: ConfigParser, body: Mapping[str, Any], prefix: str, agent_workspace: Path
) -> IdentityConfig:
    key = f"{prefix}.identity"
    table = parser.table(body, "identity", key)
    parser.warn_unknown(table, frozenset({"format", "aieos_path", "aieos_inline"}), key)
    chosen = parser.get(table, "format", f"{key}.format", str, "openclaw")
    if chosen not in IDENTITY_FORMATS:
        raise parser.error(f"{key}.format", f"must be openclaw or aieos; got {chosen!r}")
    raw_path = parser.get(table, "aieos_path", f"{key}.aieos_path", str, "").strip()
    inline = parser.get(table, "aieos_inline", f"{key}.aieos_inline", str, "").strip()
    path = Path(raw_path).expanduser() if raw_path else None
    return IdentityConfig(
        format="aieos" if chosen == "aieos" else "openclaw",
        aieos_path=(agent_workspace / path) if path is not None else None,
        aieos_inline=inline or None,
    )


def agent_files(
    parser: ConfigParser,
    agent: AgentConfig,
    acp: AcpConfig,
    workspace_dir: Path,
    body: Mapping[str, Any],
) -> AgentConfig:
    """``agent`` with its agent workspace, identity and project instruction names."""
    prefix = f"agents.{agent.alias}"
    table = parser.table(body, "workspace", f"{prefix}.workspace")
    parser.warn_unknown(table, frozenset({"path"}), f"{prefix}.workspace")
    raw = parser.get(table, "path", f"{prefix}.workspace.path", str, "").strip()
    default = Config.default_agent_workspace(workspace_dir, agent.alias)
    workspace = parser.resolve_path(raw) if raw else default
    return replace(
        agent,
        workspace=workspace,
        project_instructions=acp.project_instructions,
        identity=parse_identity(parser, body, prefix, workspace),
    )
