"""The per-session security policy: path jail, command risk, approval decisions.

The session cwd is the jail for every file and shell tool (seed, Security). Owned by the
tools work; this module is the contract the agent runtime calls.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_server.config import RiskProfileConfig


class PolicyViolation(Exception):
    """A tool call was refused by policy; ``str()`` is the model-facing reason."""


class CommandRisk(enum.Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Approval(enum.Enum):
    ALLOW = "allow"  # run without asking
    ASK = "ask"  # send session/request_permission first
    DENY = "deny"  # refuse; PolicyDecision.reason says why


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    approval: Approval
    reason: str = ""


class SecurityPolicy:
    """Policy for one session.

    Args:
        profile: the agent's risk profile.
        workspace: the session's canonical cwd (the jail).
    """

    def __init__(self, profile: RiskProfileConfig, workspace: Path) -> None:
        self.profile = profile
        self.workspace = workspace

    def decide(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        side_effects: bool,
        session_allowed: frozenset[str] = frozenset(),
    ) -> PolicyDecision:
        """Whether a tool call may run, must be approved first, or is refused."""
        raise NotImplementedError

    def resolve_path(self, path: str, *, for_write: bool = False) -> Path:
        """Resolve a tool's path argument inside the jail, or raise ``PolicyViolation``."""
        raise NotImplementedError

    def classify_command(self, command: str) -> CommandRisk:
        raise NotImplementedError
