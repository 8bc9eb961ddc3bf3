"""Approval decisions: whether a tool call runs, is asked about first, or is refused.

``SecurityPolicy`` is the per-session policy the runtime and the tools hold: it composes the
path jail (``security/paths.py``) and the shell classifier (``security/commands.py``) and
adds ``decide``. The agent runtime asks ``decide`` before running a tool call; tools call
``resolve_path`` for every path they touch and the shell tool re-checks its command with
``assess_command`` (defence in depth: a decision is never trusted across an approval wait).

Approval decisions (``decide``), by risk level, as ZeroClaw's implementation decides them:

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
                                     ``session_allowed`` up to the risk
                                     class approved, or
                                     ``ToolRules.self_approving``)
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

An ``allow-always`` answer is remembered with the risk class of the command it approved
(``remember_allow_always``): it covers later commands of that class or lower, never a
higher one, so "always allow" given to ``git status`` does not cover ``git commit``.
HIGH-risk commands ask every time whatever was remembered.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec.structs import replace

from acp_server.config import RiskLevel, RiskProfileConfig
from acp_server.security.commands import (
    RISK_ORDER,
    CommandAssessment,
    CommandClassifier,
    CommandRisk,
)
from acp_server.security.paths import PathJail, PolicyViolation, deliver_path_denial


class Approval(enum.Enum):
    ALLOW = "allow"  # run without asking
    ASK = "ask"  # send session/request_permission first
    DENY = "deny"  # refuse; PolicyDecision.reason says why


class PolicyDecision(msgspec.Struct, frozen=True):
    """``command_risk`` is the risk class of the call's shell command (LOW for a tool
    without one): what an ``allow-always`` answer to this call is remembered as."""

    approval: Approval
    reason: str = ""
    command_risk: CommandRisk = CommandRisk.LOW


def covers(remembered: CommandRisk, risk: CommandRisk) -> bool:
    """Whether an approval remembered at ``remembered`` covers a call of class ``risk``."""
    return RISK_ORDER[risk] <= RISK_ORDER[remembered]


def remember_allow_always(
    allowed: dict[str, CommandRisk], tool_name: str, decision: PolicyDecision
) -> None:
    """Record an ``allow-always`` answer to the call ``decision`` was made for: the tool is
    allowed for the rest of the session up to the highest risk class approved so far."""
    previous = allowed.get(tool_name)
    if previous is None or not covers(previous, decision.command_risk):
        allowed[tool_name] = decision.command_risk


class PathArgument(msgspec.Struct, frozen=True):
    """The argument of a tool that names a file or directory the tool touches.

    ``decide`` checks it against the jail before anyone is asked to approve a call that
    would be refused anyway. ``plain`` refuses any ``..`` component, even one that stays
    inside (``deliver_path_denial``).
    """

    name: str = "path"
    for_write: bool = False
    plain: bool = False


class ToolRules(msgspec.Struct, frozen=True):
    """What ``decide`` needs to know about a tool beyond its name (its ``ToolDefinition``
    declares them; a tool without a definition, such as an MCP tool, has none).

    ``command_argument`` names the argument holding a shell command, judged by
    ``assess_command``. ``self_approving`` tools only talk to the user (ask_user's question
    *is* a permission request; an escalation or a plan is just shown): asking "may I ask
    you?" first would be noise, so they run unless the operator lists them in always_ask.
    """

    path_argument: PathArgument | None = None
    command_argument: str | None = None
    self_approving: bool = False
    command_of: Callable[[Mapping[str, Any]], str | None] | None = None
    """For a tool that builds its shell command from its arguments (a skill's tool): the
    command line ``decide`` judges like the shell tool's (None: the arguments are unusable)."""


NO_RULES: Final = ToolRules()
_NOTHING_ALLOWED: Final[Mapping[str, CommandRisk]] = {}


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

    def at_level(self, level: RiskLevel) -> SecurityPolicy:
        """This policy at another risk level (the session's mode picker): the same
        workspace, the same extra roots and every other setting of the profile."""
        policy = type(self)(replace(self.profile, level=level), self.workspace)
        policy.jail.add_roots(self.jail.extra_roots)
        return policy

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
        session_allowed: Mapping[str, CommandRisk] = _NOTHING_ALLOWED,
        rules: ToolRules = NO_RULES,
    ) -> PolicyDecision:
        """Whether a tool call may run, must be approved first, or is refused.

        ``session_allowed`` maps the tools answered ``allow-always`` in this session to the
        highest command risk class those answers approved (``remember_allow_always``)."""
        level = self.profile.level
        if level == "readonly" and side_effects:
            return PolicyDecision(
                Approval.DENY,
                f"Tool '{tool_name}' is not allowed: the risk profile is read-only "
                "(no side effects)",
            )
        path_denial = self._path_argument_denial(rules.path_argument, arguments)
        if path_denial is not None:
            return PolicyDecision(Approval.DENY, path_denial)

        risk = CommandRisk.LOW  # of the call's shell command; a tool without one is LOW
        if rules.command_argument is not None or rules.command_of is not None:
            if rules.command_of is not None:
                command = rules.command_of(arguments)
            else:
                command = arguments.get(rules.command_argument or "")
            if not isinstance(command, str):
                problem = (
                    f"a string '{rules.command_argument}' argument"
                    if rules.command_of is None
                    else "a string value for each of its arguments"
                )
                return PolicyDecision(Approval.DENY, f"{tool_name} requires {problem}")
            assessment = self.assess_command(command)
            if assessment.denial is not None:
                return PolicyDecision(Approval.DENY, assessment.denial)
            if assessment.blocked_high_risk:
                return PolicyDecision(
                    Approval.DENY,
                    "High-risk command blocked by security policy: "
                    + "; ".join(assessment.blocked_high_risk),
                )
            risk = assessment.risk
            if level == "full":
                return PolicyDecision(Approval.ALLOW, command_risk=risk)
            if risk is CommandRisk.HIGH:
                return PolicyDecision(
                    Approval.ASK,
                    "high-risk command: " + "; ".join(assessment.reasons),
                    command_risk=risk,
                )
            if risk is CommandRisk.MEDIUM and self.profile.require_approval_for_medium_risk:
                return PolicyDecision(
                    Approval.ASK,
                    "medium-risk command: " + "; ".join(assessment.reasons),
                    command_risk=risk,
                )

        if level in ("full", "readonly"):
            # readonly: side-effect tools were refused above; the rest read only.
            return PolicyDecision(Approval.ALLOW, command_risk=risk)
        always_ask = self.profile.always_ask
        if "*" in always_ask or tool_name in always_ask:
            return PolicyDecision(Approval.ASK, f"'{tool_name}' is in always_ask", risk)
        auto = self.profile.auto_approve
        if "*" in auto or tool_name in auto or rules.self_approving:
            return PolicyDecision(Approval.ALLOW, command_risk=risk)
        remembered = session_allowed.get(tool_name)
        if remembered is not None:
            if covers(remembered, risk):
                return PolicyDecision(Approval.ALLOW, command_risk=risk)
            return PolicyDecision(
                Approval.ASK,
                f"'{tool_name}' was always allowed for {remembered.value}-risk commands only; "
                f"this one is {risk.value}-risk",
                risk,
            )
        return PolicyDecision(Approval.ASK, f"'{tool_name}' needs approval", risk)

    def _path_argument_denial(
        self, argument: PathArgument | None, arguments: Mapping[str, Any]
    ) -> str | None:
        if argument is None:
            return None
        path = arguments.get(argument.name)
        if not isinstance(path, str) or not path:
            return None  # the tool itself reports a missing path
        if argument.plain:
            denial = deliver_path_denial(path)
            if denial is not None:
                return denial
        try:
            self.resolve_path(path, for_write=argument.for_write)
        except PolicyViolation as violation:
            return str(violation)
        return None
