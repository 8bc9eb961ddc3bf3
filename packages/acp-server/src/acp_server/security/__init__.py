"""The per-session security policy: path jail, command risk, approval decisions.

Three parts, one module each:

* ``security/approval.py``: ``SecurityPolicy`` and ``decide`` (allow / ask / deny by risk
  level, ``auto_approve``, ``always_ask``), composing the other two;
* ``security/paths.py``: the path jail (``resolve_path``, ``is_allowed_path``,
  ``forbidden_paths``, ``deliver_path_denial``);
* ``security/commands.py``: the shell command classifier (``assess_command``,
  ``classify_command``, command-line splitting, brace expansion), with
  ``security/programs.py`` judging what each program does with its arguments.

Everything is importable from ``acp_server.security`` as well.
"""

from acp_server.security.approval import (
    NO_RULES,
    Approval,
    PathArgument,
    PolicyDecision,
    SecurityPolicy,
    ToolRules,
    covers,
    remember_allow_always,
)
from acp_server.security.commands import (
    DEFAULT_MAX_COMMAND_CHARS,
    DEFAULT_MAX_EXPANSIONS,
    SHELL_ENV_PASSTHROUGH,
    CommandAssessment,
    CommandClassifier,
    CommandRisk,
    command_words,
    expand_braces,
    shell_environment,
)
from acp_server.security.paths import PathJail, PolicyViolation, deliver_path_denial, is_within
from acp_server.security.programs import (
    DANGEROUS_ENV_ASSIGNMENTS,
    FIND_HIGH_RISK_ACTIONS,
    GIT_READONLY_SUBCOMMANDS,
    HIGH_RISK_COMMANDS,
    MEDIUM_RISK_COMMANDS,
    PACKAGE_CODE_RUNNERS,
    PACKAGE_MANAGER_MUTATIONS,
)

__all__ = [
    "DANGEROUS_ENV_ASSIGNMENTS",
    "DEFAULT_MAX_COMMAND_CHARS",
    "DEFAULT_MAX_EXPANSIONS",
    "FIND_HIGH_RISK_ACTIONS",
    "GIT_READONLY_SUBCOMMANDS",
    "HIGH_RISK_COMMANDS",
    "MEDIUM_RISK_COMMANDS",
    "NO_RULES",
    "PACKAGE_CODE_RUNNERS",
    "PACKAGE_MANAGER_MUTATIONS",
    "SHELL_ENV_PASSTHROUGH",
    "Approval",
    "CommandAssessment",
    "CommandClassifier",
    "CommandRisk",
    "PathArgument",
    "PathJail",
    "PolicyDecision",
    "PolicyViolation",
    "SecurityPolicy",
    "ToolRules",
    "command_words",
    "covers",
    "deliver_path_denial",
    "expand_braces",
    "is_within",
    "remember_allow_always",
    "shell_environment",
]
