"""What a client may choose for an agent's sessions: ``[agents.<alias>] model_providers``,
the providers its ``model`` config option offers besides ``model_provider``
(``docs/acp.md``, "Config options")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from acp_server.config.values import AgentConfig, ProviderConfig

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser


def agent_model_choices(
    parser: ConfigParser,
    agent: AgentConfig,
    providers: Mapping[str, ProviderConfig],
    body: Mapping[str, Any],
) -> AgentConfig:
    """``agent`` with its ``model_providers``: each a configured ``<type>.<alias>`` ref,
    listed once, after ``model_provider`` (which is always the first choice)."""
    key = f"agents.{agent.alias}.model_providers"
    refs = parser.strings(body, "model_providers", key, ())
    chosen: dict[str, None] = {agent.model_provider: None} if agent.model_provider else {}
    for index, raw in enumerate(refs):
        ref = raw.strip()
        if ref not in providers:
            available = ", ".join(sorted(providers)) or "none configured"
            raise parser.error(
                f"{key}[{index}]", f"`{raw}` does not exist (available: {available})"
            )
        chosen.setdefault(ref, None)
    return replace(agent, model_providers=tuple(chosen))
