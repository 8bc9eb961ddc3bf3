"""Which configured agent serves a session: pure functions over a config snapshot.

``session/new`` follows the ZeroClaw ACP documentation's five steps: explicit ``agentAlias`` → the connection's
default (gateway ``?agent=``) → ``[acp].default_agent`` → the sole configured agent →
error. Blank or whitespace-only values are absent at every step, and whichever step picks
an alias, it must name a configured, dispatchable agent (else -32602 naming the alias).

Restoring (``session/load`` / ``session/resume``) never consults ``?agent=``: the stored
owner if still dispatchable → ``default_agent`` if dispatchable → the sole dispatchable
agent. Where ZeroClaw's implementation falls back to a literal ``"default"`` alias (which then fails
agent construction with an internal error), we raise -32602 saying why: the operator can
act on that, and no session is bound to an agent that does not exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeAlias

import msgspec

from acp_core.errors import InvalidParamsError


class AgentInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One ``[agents.<alias>]`` entry. ``dispatchable`` = enabled and fully configured."""

    alias: str
    dispatchable: bool = True
    enabled: bool = True

    @property
    def usable(self) -> bool:
        return self.enabled and self.dispatchable


AgentSnapshot: TypeAlias = Mapping[str, bool] | Iterable[AgentInfo]
"""alias → dispatchable, or ``AgentInfo`` entries; order is the configuration's order."""


def _usable_by_alias(agents: AgentSnapshot) -> dict[str, bool]:
    if isinstance(agents, Mapping):
        return {alias: bool(ok) for alias, ok in agents.items()}
    return {agent.alias: agent.usable for agent in agents}


def _present(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def no_alias_error() -> InvalidParamsError:
    return InvalidParamsError(
        "session/new requires `agentAlias` (alias of a configured [agents.<alias>] entry)"
    )


def unknown_agent_error(alias: str) -> InvalidParamsError:
    return InvalidParamsError(f"Unknown agent `{alias}` — no [agents.{alias}] entry configured")


def disabled_agent_error(alias: str) -> InvalidParamsError:
    return InvalidParamsError(f"Agent `{alias}` is not enabled for dispatch")


def _checked(alias: str, usable: Mapping[str, bool]) -> str:
    if alias not in usable:
        raise unknown_agent_error(alias)
    if not usable[alias]:
        raise disabled_agent_error(alias)
    return alias


def resolve_session_alias(
    *,
    explicit: str | None,
    connection_default: str | None,
    config_default: str | None,
    agents: AgentSnapshot,
) -> str:
    """The agent alias for ``session/new`` (the ZeroClaw ACP documentation: the five-step precedence).

    Raises:
        InvalidParamsError: no alias resolvable, or the chosen alias is unknown or not
            enabled for dispatch. A chosen-but-bad alias never falls through to the next step.
    """
    usable = _usable_by_alias(agents)
    for candidate in (explicit, connection_default, config_default):
        alias = _present(candidate)
        if alias is not None:
            return _checked(alias, usable)
    if len(usable) == 1:
        return _checked(next(iter(usable)), usable)
    raise no_alias_error()


def default_session_alias(
    *, connection_default: str | None, config_default: str | None, agents: AgentSnapshot
) -> str | None:
    """The agent a ``session/new`` without ``agentAlias`` would get, None when it would be
    refused: the agent ``initialize`` describes (its ``promptCapabilities``)."""
    try:
        return resolve_session_alias(
            explicit=None,
            connection_default=connection_default,
            config_default=config_default,
            agents=agents,
        )
    except InvalidParamsError:
        return None


def resolve_restore_alias(
    *,
    stored: str | None,
    config_default: str | None,
    agents: AgentSnapshot,
) -> str:
    """The agent alias that serves a restored session (the ZeroClaw ACP documentation: "reuses the stored owner
    alias only if that agent is still dispatchable", then default_agent → sole agent,
    skipping disabled aliases).

    Raises:
        InvalidParamsError: no dispatchable agent can take the session.
    """
    usable = _usable_by_alias(agents)
    for candidate in (stored, config_default):
        alias = _present(candidate)
        if alias is not None and usable.get(alias, False):
            return alias
    dispatchable = [alias for alias, ok in usable.items() if ok]
    if len(dispatchable) == 1:
        return dispatchable[0]
    owner = _present(stored) or "(none recorded)"
    reason = (
        "no agent is enabled for dispatch"
        if not dispatchable
        else "several agents are enabled and [acp].default_agent names none of them"
    )
    raise InvalidParamsError(
        f"Cannot restore session: its agent `{owner}` is not available for dispatch and {reason}; "
        "set [acp].default_agent to an enabled agent"
    )
