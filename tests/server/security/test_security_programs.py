"""Code runners and machine-state changes are high risk; allow-always keeps its risk class."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from acp_server.config import RiskProfileConfig
from acp_server.security import (
    Approval,
    CommandRisk,
    PolicyDecision,
    SecurityPolicy,
    ToolRules,
    remember_allow_always,
)

SUPERVISED = RiskProfileConfig()
EVERY_PROGRAM = RiskProfileConfig(allowed_commands=("*",))
SHELL_RULES = ToolRules(command_argument="command")
RELAXED_MEDIUM = replace(SUPERVISED, require_approval_for_medium_risk=False)

CODE_RUNNERS = [
    "python3 -c 'import os'",
    "python3 -Ic 'import os'",
    "python -X dev -c pass",
    "python3",
    "python3 - < src.py",
    "echo 'import os' | python3 -i src.py",
    "node -i",
    "echo 'import os' | python3",
    "python3 -m pip install requests",
    "node -e 'process.exit()'",
    "node --eval=1",
    "node -pe 1",
    "node",
    "perl -ne print src.py",
    "perl '-MPOSIX;system(1)' x.pl",
    "ruby -e 1",
    "awk 'BEGIN { system(\"id\") }'",
    "git grep -O'touch x' foo",
    "git grep --open-files-in-pager=vim foo",
    "git log --ext-diff -p",
    "git clone -u 'touch x' repo copy",
    "git fetch --upload-pack='touch x' origin",
    "git rebase -x 'make' main",
    "git bisect run ./test.sh",
    "git submodule foreach ls",
    "git difftool HEAD",
    "git config core.pager 'touch x'",
    "git config --add core.fsmonitor x",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=x git status",
    "GIT_EXTERNAL_DIFF=./x git diff",
    "GIT_PAGER=./x git log",
    "PAGER=./x git log",
    "HOME=. git log",
    "npm_config_script_shell=./x npm ls",
    "npm test",
    "npm run build",
    "npm start",
    "npm --prefix . run evil",
    "npm install",
    "npm ci",
    "npx cowsay",
    "yarn",
    "yarn build",
    "pnpm lint",
    "cargo run",
    "cargo build",
    "cargo test",
    "pip install ./pkg",
    "pip3 download x",
    "uv run x.py",
    "make",
    "time rm x",
    "export GIT_PAGER=x",
    "alias ls=rm",
    "hostname evil",
    "hostname -F name.txt",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "date 010100002020",
    "sysctl -w kernel.x=1",
    "ip link set lo down",
    "timedatectl set-time 2020-01-01",
]

STILL_LOW = [
    "python3 src/main.py",
    "python3 -m pytest",
    "python3 -u -W ignore src/main.py",
    "python3 --version",
    "node src/app.js",
    "node --version",
    "perl src/x.pl",
    "git grep foo",
    "git log -p",
    "git diff --no-ext-diff",
    "npm ls",
    "npm --version",
    "yarn --version",
    "cargo tree",
    "cargo --version",
    "pip list",
    "date",
    "date +%s",
    "date -d tomorrow +%F",
    "date -u -R",
    "hostname",
    "hostname -f",
    "uname -a",
]


def assessed(command: str, profile: RiskProfileConfig = EVERY_PROGRAM) -> CommandRisk:
    assessment = SecurityPolicy(profile, Path.cwd()).assess_command(command)
    assert assessment.denial is None, assessment.denial
    return assessment.risk


def decide(
    workspace: Path,
    command: str,
    profile: RiskProfileConfig = SUPERVISED,
    remembered: dict[str, CommandRisk] | None = None,
) -> PolicyDecision:
    return SecurityPolicy(profile, workspace).decide(
        "shell",
        {"command": command},
        side_effects=True,
        session_allowed=remembered or {},
        rules=SHELL_RULES,
    )


@pytest.mark.parametrize("command", CODE_RUNNERS)
def test_code_runners_are_high_risk_and_blocked(tmp_path: Path, command: str) -> None:
    (tmp_path / "src.py").write_text("")
    profile = replace(EVERY_PROGRAM, block_high_risk_commands=False)
    policy = SecurityPolicy(profile, tmp_path)
    assessment = policy.assess_command(command)
    assert assessment.denial is None, assessment.denial
    assert assessment.risk is CommandRisk.HIGH
    # Blocked by default, whatever an allow-always answered before.
    blocked = decide(tmp_path, command, EVERY_PROGRAM, {"shell": CommandRisk.HIGH})
    assert blocked.approval is Approval.DENY
    assert blocked.reason.startswith("High-risk command blocked by security policy")


@pytest.mark.parametrize("command", STILL_LOW)
def test_programs_that_only_read_or_run_workspace_files_stay_low(
    tmp_path: Path, command: str
) -> None:
    assert assessed(command) is CommandRisk.LOW


def test_git_config_read_is_medium_and_uninstall_is_medium() -> None:
    assert assessed("git config --get user.name") is CommandRisk.MEDIUM
    assert assessed("npm uninstall left-pad") is CommandRisk.MEDIUM
    assert assessed("cargo add serde") is CommandRisk.MEDIUM


def test_an_explicit_allowlist_entry_unblocks_one_form_which_still_asks(tmp_path: Path) -> None:
    profile = replace(SUPERVISED, allowed_commands=(*SUPERVISED.allowed_commands, "npm test"))
    asked = decide(tmp_path, "npm test", profile, {"shell": CommandRisk.HIGH})
    assert asked.approval is Approval.ASK
    assert "npm test" in asked.reason
    assert decide(tmp_path, "npm run x", profile).approval is Approval.DENY
    python = replace(SUPERVISED, allowed_commands=(*SUPERVISED.allowed_commands, "python3 -c"))
    assert decide(tmp_path, "python3 -c 1", python).approval is Approval.ASK


def test_allow_always_never_covers_a_higher_risk_class(tmp_path: Path) -> None:
    remembered: dict[str, CommandRisk] = {}
    first = decide(tmp_path, "ls", RELAXED_MEDIUM)
    assert first.approval is Approval.ASK
    remember_allow_always(remembered, "shell", first)
    assert remembered == {"shell": CommandRisk.LOW}
    assert decide(tmp_path, "git status", RELAXED_MEDIUM, remembered).approval is Approval.ALLOW
    medium = decide(tmp_path, "git commit -m x", RELAXED_MEDIUM, remembered)
    assert medium.approval is Approval.ASK
    assert medium.reason == (
        "'shell' was always allowed for low-risk commands only; this one is medium-risk"
    )
    remember_allow_always(remembered, "shell", medium)
    assert remembered == {"shell": CommandRisk.MEDIUM}
    assert decide(tmp_path, "git push", RELAXED_MEDIUM, remembered).approval is Approval.ALLOW
    # A lower class approved later never lowers what was remembered.
    remember_allow_always(remembered, "shell", first)
    assert remembered == {"shell": CommandRisk.MEDIUM}
    # High risk asks every time.
    anything = replace(RELAXED_MEDIUM, allowed_commands=("*",), block_high_risk_commands=False)
    high = decide(tmp_path, "rm x", anything, {"shell": CommandRisk.HIGH})
    assert high.approval is Approval.ASK
