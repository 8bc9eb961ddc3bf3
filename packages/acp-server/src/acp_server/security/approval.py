"""Approval decisions: whether a tool call runs, is asked about first, or is refused.

``SecurityPolicy`` is the per-session policy the runtime and the tools hold: it composes the
path jail (``security/paths.py``) and the shell classifier (``security/commands.py``) and
adds ``decide``. The agent runtime asks ``decide`` before running a tool call; tools call
``resolve_path`` for every path they touch and the shell tool re-checks its command with
``assess_command`` (defence in depth: a decision is never trusted across an approval wait).

Approval decisions (``decide``), by risk level (research/zeroclaw.md §7, §8):

======================  ===========  =====================================  ==============
tool call               readonly     supervised                             full
======================  ===========  =====================================  ==============
jail escape, forbidden  DENY         DENY                                   DENY
  path (any tool)                                                           (forbidden only;
                                                                            the jail is
                                                                            lifted)
tool with side effects  DENY         rules below                            ALLOW
tool in ``always_ask``  never asks   ASK, every time                        ALLOW
auto-approved or        ALLOW        ALLOW                                  ALLOW
  allow-always'd                     (tool in ``auto_approve``, in
                                     ``session_allowed``, or one of
                                     ``SELF_APPROVING_TOOLS``)
anything else           ALLOW        ASK                                    ALLOW
shell: program not in   DENY         DENY                                   DENY
  allowed_commands
shell: HIGH risk        DENY         DENY when block_high_risk_commands     same as
                                     (unless the program itself is          supervised,
                                     explicitly in allowed_commands);       but ALLOW
                                     otherwise ASK, every time              instead of ASK
shell: MEDIUM risk      DENY         ASK, every time, when                  ALLOW
                                     require_approval_for_medium_risk;
                                     otherwise as "anything else"
======================  ===========  =====================================  ==============
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from acp_server.config import RiskProfileConfig
from acp_server.security.commands import CommandAssessment, CommandClassifier, CommandRisk
from acp_server.security.paths import PathJail, PolicyViolation, deliver_path_denial


class Approval(enum.Enum):
    ALLOW = "allow"  # run without asking
    ASK = "ask"  # send session/request_permission first
    DENY = "deny"  # refuse; PolicyDecision.reason says why


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    approval: Approval
    reason: str = ""


# Tools whose ``path`` argument names a file or directory the tool touches. The runtime
# learns about a jail escape here, before asking the user to approve something that will
# be refused anyway.
PATH_ARGUMENT_TOOLS: Final = {
    "file_read": False,
    "file_write": True,
    "file_edit": True,
    "deliver_file": False,
    "content_search": False,
}


# Tools that only talk to the user (ask_user's question *is* a permission request; an
# escalation or a plan is just shown). Asking "may I ask you?" first would be noise, so they
# run unless the operator lists them in always_ask.
SELF_APPROVING_TOOLS: Final = frozenset({"ask_user", "escalate_to_human", "todo_write"})


class SecurityPolicy:
    """Policy for one session.

    Args:
        profile: the agent's risk profile.
        workspace: the session's cwd (the jail); canonicalized here.
    """

    def __init__(self, profile: RiskProfileConfig, workspace: Path) -> None:
        self.profile = profile
        self.jail = PathJail(profile, workspace)
        self.workspace = self.jail.workspace
        self.commands = CommandClassifier(profile, self.jail)

    @property
    def jailed(self) -> bool:
        """Whether paths must stay inside the workspace (``full`` lifts ``workspace_only``)."""
        return self.jail.jailed

    @property
    def read_only(self) -> bool:
        return self.jail.read_only

    def resolve_path(self, path: str, *, for_write: bool = False) -> Path:
        """``PathJail.resolve_path``: the real path inside the jail, or ``PolicyViolation``."""
        return self.jail.resolve_path(path, for_write=for_write)

    def is_allowed_path(self, path: Path) -> bool:
        """Whether an already-absolute path (e.g. found by a directory walk) may be read."""
        return self.jail.is_allowed_path(path)

    def classify_command(self, command: str) -> CommandRisk:
        """The command's risk class; a command that cannot be analysed counts as HIGH."""
        return self.commands.classify_command(command)

    def assess_command(self, command: str) -> CommandAssessment:
        """Analyse a shell command against the allowlist, the risk classes and the jail."""
        return self.commands.assess_command(command)

    # ------------------------------------------------------------------ decisions

    def decide(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        *,
        side_effects: bool,
        session_allowed: frozenset[str] = frozenset(),
    ) -> PolicyDecision:
        """Whether a tool call may run, must be approved first, or is refused."""
        level = self.profile.level
        if level == "readonly" and side_effects:
            return PolicyDecision(
                Approval.DENY,
                f"Tool '{tool_name}' is not allowed: the risk profile is read-only "
                "(no side effects)",
            )
        path_denial = self._path_argument_denial(tool_name, arguments)
        if path_denial is not None:
            return PolicyDecision(Approval.DENY, path_denial)

        if tool_name == "shell":
            command = arguments.get("command")
            if not isinstance(command, str):
                return PolicyDecision(Approval.DENY, "shell requires a string 'command' argument")
            assessment = self.assess_command(command)
            if assessment.denial is not None:
                return PolicyDecision(Approval.DENY, assessment.denial)
            if assessment.blocked_high_risk:
                return PolicyDecision(
                    Approval.DENY,
                    "High-risk command blocked by security policy: "
                    + "; ".join(assessment.blocked_high_risk),
                )
            if level == "full":
                return PolicyDecision(Approval.ALLOW)
            if assessment.risk is CommandRisk.HIGH:
                return PolicyDecision(
                    Approval.ASK, "high-risk command: " + "; ".join(assessment.reasons)
                )
            if (
                assessment.risk is CommandRisk.MEDIUM
                and self.profile.require_approval_for_medium_risk
            ):
                return PolicyDecision(
                    Approval.ASK, "medium-risk command: " + "; ".join(assessment.reasons)
                )

        if level in ("full", "readonly"):
            # readonly: side-effect tools were refused above; the rest read only.
            return PolicyDecision(Approval.ALLOW)
        always_ask = self.profile.always_ask
        if "*" in always_ask or tool_name in always_ask:
            return PolicyDecision(Approval.ASK, f"'{tool_name}' is in always_ask")
        auto = self.profile.auto_approve
        if (
            "*" in auto
            or tool_name in auto
            or tool_name in session_allowed
            or tool_name in SELF_APPROVING_TOOLS
        ):
            return PolicyDecision(Approval.ALLOW)
        return PolicyDecision(Approval.ASK, f"'{tool_name}' needs approval")

    def _path_argument_denial(self, tool_name: str, arguments: Mapping[str, Any]) -> str | None:
        for_write = PATH_ARGUMENT_TOOLS.get(tool_name)
        if for_write is None:
            return None
        path = arguments.get("path")
        if not isinstance(path, str) or not path:
            return None  # the tool itself reports a missing path
        if tool_name == "deliver_file":
            denial = deliver_path_denial(path)
            if denial is not None:
                return denial
        try:
            self.resolve_path(path, for_write=for_write)
        except PolicyViolation as violation:
            return str(violation)
        return None
