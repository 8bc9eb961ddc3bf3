"""SecurityPolicy: the path jail, forbidden paths, approval decisions and command risk."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from acp_server.agent.tools.registry import definition_for
from acp_server.config import RiskProfileConfig
from acp_server.security import (
    Approval,
    CommandRisk,
    PolicyDecision,
    PolicyViolation,
    SecurityPolicy,
)

SUPERVISED = RiskProfileConfig()
READONLY = RiskProfileConfig(level="readonly")
FULL = RiskProfileConfig(level="full")
ANYTHING_GOES = RiskProfileConfig(allowed_commands=("*",), block_high_risk_commands=False)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return root.resolve()


def policy(workspace: Path, profile: RiskProfileConfig = SUPERVISED) -> SecurityPolicy:
    return SecurityPolicy(profile, workspace)


def decide(
    p: SecurityPolicy,
    tool_name: str,
    arguments: Mapping[str, Any],
    *,
    side_effects: bool,
    session_allowed: Mapping[str, CommandRisk] | None = None,
) -> PolicyDecision:
    """``decide`` with the tool's own rules, as the runtime calls it."""
    return p.decide(
        tool_name,
        arguments,
        side_effects=side_effects,
        session_allowed=session_allowed or {},
        rules=definition_for(tool_name).rules,
    )


# --------------------------------------------------------------------------- path jail


def test_relative_path_inside_resolves_to_real_path(workspace: Path) -> None:
    assert policy(workspace).resolve_path("src/main.py") == workspace / "src" / "main.py"
    assert policy(workspace).resolve_path("src/../src/main.py") == workspace / "src" / "main.py"
    assert policy(workspace).resolve_path(str(workspace / "new.txt"), for_write=True) == (
        workspace / "new.txt"
    )


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "src/../../outside/secret.txt"])
def test_dotdot_escape_is_refused(workspace: Path, path: str) -> None:
    with pytest.raises(PolicyViolation, match="Path escapes workspace directory"):
        policy(workspace).resolve_path(path)


def test_absolute_path_outside_is_refused(workspace: Path) -> None:
    outside = workspace.parent / "outside" / "secret.txt"
    with pytest.raises(PolicyViolation, match=f"Path escapes workspace directory: {outside}"):
        policy(workspace).resolve_path(str(outside))


def test_home_relative_path_outside_is_refused(workspace: Path) -> None:
    with pytest.raises(PolicyViolation, match="Path escapes workspace directory: ~/"):
        policy(workspace).resolve_path("~/.bashrc")


@pytest.mark.parametrize("target", ["outside", "outside/secret.txt", "outside/missing.txt"])
def test_symlink_leading_outside_is_refused(workspace: Path, target: str) -> None:
    link = workspace / "link"
    link.symlink_to(workspace.parent / target)
    with pytest.raises(PolicyViolation, match="symbolic link"):
        policy(workspace).resolve_path("link", for_write=True)


def test_symlink_inside_a_directory_path_is_refused(workspace: Path) -> None:
    (workspace / "linkdir").symlink_to(workspace.parent / "outside")
    with pytest.raises(PolicyViolation, match="Path escapes workspace directory: linkdir/secret"):
        policy(workspace).resolve_path("linkdir/secret.txt")


def test_symlink_staying_inside_is_fine(workspace: Path) -> None:
    (workspace / "alias.py").symlink_to(workspace / "src" / "main.py")
    assert policy(workspace).resolve_path("alias.py") == workspace / "src" / "main.py"


def test_nul_byte_and_empty_path_are_refused(workspace: Path) -> None:
    with pytest.raises(PolicyViolation, match="NUL"):
        policy(workspace).resolve_path("src/\x00main.py")
    with pytest.raises(PolicyViolation, match="empty"):
        policy(workspace).resolve_path("  ")


def test_symlink_loop_is_refused(workspace: Path) -> None:
    (workspace / "a").symlink_to(workspace / "b")
    (workspace / "b").symlink_to(workspace / "a")
    with pytest.raises(PolicyViolation):
        policy(workspace).resolve_path("a/file")


def test_forbidden_ancestor_of_workspace_does_not_forbid_the_workspace(workspace: Path) -> None:
    # The defaults forbid /tmp and /home, which hold most projects (and pytest's tmp_path).
    profile = replace(SUPERVISED, forbidden_paths=(str(workspace.parent),))
    assert policy(workspace, profile).resolve_path("src/main.py") == workspace / "src" / "main.py"
    # ...but everything else under the forbidden ancestor stays forbidden once the jail is lifted.
    full = replace(FULL, forbidden_paths=(str(workspace.parent),))
    with pytest.raises(PolicyViolation, match="forbidden"):
        policy(workspace, full).resolve_path(str(workspace.parent / "outside" / "secret.txt"))


def test_forbidden_path_inside_workspace_applies(workspace: Path) -> None:
    (workspace / ".secrets").mkdir()
    (workspace / ".secrets" / "key").write_text("k")
    (workspace / "innocent").symlink_to(workspace / ".secrets" / "key")
    profile = replace(SUPERVISED, forbidden_paths=(str(workspace / ".secrets"),))
    with pytest.raises(PolicyViolation, match=r"forbidden by security policy: \.secrets/key"):
        policy(workspace, profile).resolve_path(".secrets/key")
    with pytest.raises(PolicyViolation, match="forbidden"):
        policy(workspace, profile).resolve_path("innocent")


def test_forbidden_paths_expand_home(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    profile = replace(FULL, forbidden_paths=("~/.ssh",))
    with pytest.raises(PolicyViolation, match=r"forbidden_paths has ~/\.ssh"):
        policy(workspace, profile).resolve_path("~/.ssh/id_ed25519")


def test_full_level_lifts_the_jail_but_not_forbidden_paths(workspace: Path) -> None:
    outside = workspace.parent / "outside" / "secret.txt"
    open_profile = replace(FULL, forbidden_paths=())
    assert policy(workspace, open_profile).resolve_path(str(outside)) == outside
    assert policy(workspace, open_profile).resolve_path("../outside/secret.txt") == outside
    with pytest.raises(PolicyViolation, match="forbidden"):
        policy(workspace, FULL).resolve_path("/etc/passwd")


def test_workspace_only_false_lifts_the_jail_in_supervised(workspace: Path) -> None:
    profile = replace(SUPERVISED, workspace_only=False, forbidden_paths=())
    outside = workspace.parent / "outside" / "secret.txt"
    assert policy(workspace, profile).resolve_path(str(outside)) == outside


def test_readonly_refuses_paths_for_writing(workspace: Path) -> None:
    with pytest.raises(PolicyViolation, match="read-only"):
        policy(workspace, READONLY).resolve_path("src/main.py", for_write=True)
    assert policy(workspace, READONLY).resolve_path("src/main.py").is_file()


# --------------------------------------------------------------------------- decisions


def test_readonly_denies_side_effects_and_allows_reads(workspace: Path) -> None:
    p = policy(workspace, READONLY)
    write = decide(p, "file_write", {"path": "a.txt", "content": ""}, side_effects=True)
    assert write.approval is Approval.DENY
    assert "read-only" in write.reason
    assert decide(p, "shell", {"command": "ls"}, side_effects=True).approval is Approval.DENY
    assert decide(p, "file_read", {"path": "src/main.py"}, side_effects=False).approval is (
        Approval.ALLOW
    )
    assert decide(p, "deliver_file", {"path": "src/main.py"}, side_effects=False).approval is (
        Approval.ALLOW
    )


def test_supervised_asks_unless_auto_approved_or_allowed_always(workspace: Path) -> None:
    p = policy(workspace)
    read = decide(p, "file_read", {"path": "src/main.py"}, side_effects=False)
    assert read.approval is Approval.ALLOW
    args = {"path": "a.txt", "content": "x"}
    assert decide(p, "file_write", args, side_effects=True).approval is Approval.ASK
    remembered = decide(
        p, "file_write", args, side_effects=True, session_allowed={"file_write": CommandRisk.LOW}
    )
    assert remembered.approval is Approval.ALLOW
    assert decide(p, "mcp_weather", {}, side_effects=False).approval is Approval.ASK
    assert decide(p, "ask_user", {"question": "?"}, side_effects=False).approval is Approval.ALLOW


def test_supervised_always_ask_wins_over_auto_approve_and_allow_always(workspace: Path) -> None:
    p = policy(workspace, replace(SUPERVISED, always_ask=("file_read",)))
    decision = decide(
        p,
        "file_read",
        {"path": "src/main.py"},
        side_effects=False,
        session_allowed={"file_read": CommandRisk.LOW},
    )
    assert decision.approval is Approval.ASK
    star = policy(workspace, replace(SUPERVISED, always_ask=("*",)))
    assert (
        decide(star, "glob_search", {"pattern": "*"}, side_effects=False).approval is Approval.ASK
    )


def test_path_escape_is_denied_before_asking(workspace: Path) -> None:
    p = policy(workspace)
    decision = decide(p, "file_write", {"path": "../x", "content": ""}, side_effects=True)
    assert decision == decision.__class__(Approval.DENY, "Path escapes workspace directory: ../x")
    read = decide(p, "file_read", {"path": "/etc/passwd"}, side_effects=False)
    assert read.approval is Approval.DENY


def test_full_never_asks(workspace: Path) -> None:
    p = policy(workspace, replace(FULL, always_ask=("*",)))
    assert decide(p, "file_write", {"path": "a", "content": ""}, side_effects=True).approval is (
        Approval.ALLOW
    )
    assert decide(p, "shell", {"command": "git push"}, side_effects=True).approval is Approval.ALLOW
    assert decide(p, "shell", {"command": "rm -rf x"}, side_effects=True).approval is Approval.DENY


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "git status --short",
        "git log --oneline -5",
        "git diff HEAD~1",
        "cat src/main.py | grep print | wc -l",
        "ls 2>&1",
        "ls 2>/dev/null",
        "echo 'a; rm -rf / && $(reboot)'",
        "FOO=bar ls",
        "ls # rm -rf /",
        "cat < src/main.py",
        "grep -r print src",
        "python3 -m pytest",
    ],
)
def test_low_risk_commands(workspace: Path, command: str) -> None:
    assessment = policy(workspace).assess_command(command)
    assert assessment.denial is None
    assert assessment.risk is CommandRisk.LOW


@pytest.mark.parametrize(
    "command",
    [
        "git commit -m wip",
        "git push origin main",
        "git reset --hard",
        "git checkout main",
        "git rebase main",
        "git merge topic",
        "cargo add serde",
        "touch a.txt",
        "mkdir build",
        "mv a b",
        "cp a b",
        "ln -s a b",
        "echo hi > out.txt",
        "echo hi >> src/log.txt",
        "ls && git commit -m x",
    ],
)
def test_medium_risk_commands(workspace: Path, command: str) -> None:
    profile = replace(SUPERVISED, allowed_commands=(*SUPERVISED.allowed_commands, "touch", "mkdir", "mv", "cp", "ln"))  # fmt: skip
    assessment = policy(workspace, profile).assess_command(command)
    assert assessment.denial is None
    assert assessment.risk is CommandRisk.MEDIUM


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf build",
        "sudo ls",
        "chmod 777 a",
        "chown me a",
        "curl https://example.invalid",
        "wget https://example.invalid",
        "ssh host",
        "scp a host:b",
        "nc -l 9999",
        "dd if=a of=b",
        "mkfs.ext4 disk.img",
        "shutdown now",
        "reboot",
        "kill 1",
        "find . -name '*.o' -delete",
        "find . -exec cat {} ;",
        "bash -c ls",
        "xargs rm",
        "ls; rm a",
        "(cd src && rm a)",
        "ls | sh",
        "LD_PRELOAD=evil.so ls",
        "git -c core.pager=evil log",
        # Installing runs the package's build and install scripts.
        "npm install left-pad",
        "pip install requests",
        "python3 -m pip install requests",
        "cargo install ripgrep",
    ],
)
def test_high_risk_commands(workspace: Path, command: str) -> None:
    assessment = policy(workspace, ANYTHING_GOES).assess_command(command)
    assert assessment.denial is None
    assert assessment.risk is CommandRisk.HIGH
    assert policy(workspace, ANYTHING_GOES).classify_command(command) is CommandRisk.HIGH


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("rm -rf build", "Command 'rm' is not allowed"),
        ("ls | xargs rm", "Command 'xargs' is not allowed"),
        ("ls && (cd .. && ls)", "Command 'cd' is not allowed"),
        ("/bin/ls", "call it by its bare name 'ls'"),
        ("echo $(cat /etc/passwd)", "Command substitution"),
        ('echo "`id`"', "Command substitution"),
        ("cat <(ls)", "Command substitution"),
        ("echo 'unterminated", "unterminated"),
        ("ls ../", "Path escapes workspace directory: ../"),
        ("cat /etc/passwd", "Path escapes workspace directory: /etc/passwd"),
        ("git --git-dir=/etc log", "Path escapes workspace directory: /etc"),
        ("echo hi > ../out", "Path escapes workspace directory: ../out"),
        ("cat $HOME/.ssh/id_rsa", "Path escapes workspace directory"),
        ("cat {/etc/passwd,x}", "Path escapes workspace directory: /etc/passwd"),
        ("cat $NOT_SET/etc/passwd", "Path escapes workspace directory: /etc/passwd"),
        ("X=/etc; cat $X/passwd", "Path escapes workspace directory: /etc"),
        ("cat ${X:-/etc/passwd}", "Parameter expansion with operators"),
        ("cat $'\\x2fetc/passwd'", "ANSI-C"),
        ("", "empty"),
    ],
)
def test_refused_commands_name_the_problem(workspace: Path, command: str, reason: str) -> None:
    p = policy(workspace)
    decision = decide(p, "shell", {"command": command}, side_effects=True)
    assert decision.approval is Approval.DENY
    assert reason in decision.reason
    assert p.classify_command(command) is CommandRisk.HIGH


def test_symlink_argument_leading_outside_is_refused(workspace: Path) -> None:
    (workspace / "notes").symlink_to(workspace.parent / "outside" / "secret.txt")
    decision = decide(policy(workspace), "shell", {"command": "cat notes"}, side_effects=True)
    assert decision.approval is Approval.DENY
    assert "Path escapes workspace directory: notes" in decision.reason


def test_glob_matching_a_symlink_that_leads_outside_is_refused(workspace: Path) -> None:
    (workspace / "src" / "zz-link.py").symlink_to(workspace.parent / "outside" / "secret.txt")
    decision = decide(policy(workspace), "shell", {"command": "cat src/*.py"}, side_effects=True)
    assert decision.approval is Approval.DENY
    assert "Path escapes workspace directory: src/zz-link.py" in decision.reason
    fine = decide(policy(workspace), "shell", {"command": "cat src/m*.py"}, side_effects=True)
    assert fine.approval is Approval.ASK


def test_brace_expansion() -> None:
    from acp_server.security import expand_braces

    assert expand_braces("src/*.{ts,tsx}") == ["src/*.ts", "src/*.tsx"]
    assert expand_braces("{a}{b,c}") == ["{a}b", "{a}c"]
    assert expand_braces("plain") == ["plain"]


def test_high_risk_blocked_unless_explicitly_allowlisted(workspace: Path) -> None:
    star = policy(workspace, replace(SUPERVISED, allowed_commands=("*",)))
    blocked = decide(star, "shell", {"command": "rm -rf build"}, side_effects=True)
    assert blocked.approval is Approval.DENY
    assert "High-risk command blocked" in blocked.reason
    assert "'rm'" in blocked.reason

    explicit = policy(
        workspace, replace(SUPERVISED, allowed_commands=(*SUPERVISED.allowed_commands, "rm"))
    )
    asked = decide(
        explicit,
        "shell",
        {"command": "rm -rf build"},
        side_effects=True,
        session_allowed={"shell": CommandRisk.HIGH},
    )
    assert asked.approval is Approval.ASK  # high risk always asks, even after allow-always
    assert "high-risk" in asked.reason

    unblocked = policy(workspace, ANYTHING_GOES)
    assert decide(unblocked, "shell", {"command": "sudo ls"}, side_effects=True).approval is (
        Approval.ASK
    )


def test_medium_risk_needs_approval_when_configured(workspace: Path) -> None:
    allowed = {"shell": CommandRisk.MEDIUM}  # allow-always given to a medium-risk command
    asking = policy(workspace)
    commit = {"command": "git commit -m x"}
    decision = decide(asking, "shell", commit, side_effects=True, session_allowed=allowed)
    assert decision.approval is Approval.ASK
    assert "git commit" in decision.reason
    relaxed = policy(workspace, replace(SUPERVISED, require_approval_for_medium_risk=False))
    assert decide(
        relaxed, "shell", commit, side_effects=True, session_allowed=allowed
    ).approval is (Approval.ALLOW)
    # A low-risk command is covered by allow-always.
    status = {"command": "git status"}
    assert decide(asking, "shell", status, side_effects=True, session_allowed=allowed).approval is (
        Approval.ALLOW
    )
    assert decide(asking, "shell", status, side_effects=True).approval is Approval.ASK


def test_full_level_redirection_outside_workspace_is_high_risk(workspace: Path) -> None:
    open_profile = replace(FULL, forbidden_paths=())
    target = workspace.parent / "outside" / "log.txt"
    p = policy(workspace, open_profile)
    assert p.classify_command(f"echo hi > {target}") is CommandRisk.HIGH
    blocked = decide(p, "shell", {"command": f"echo hi > {target}"}, side_effects=True)
    assert blocked.approval is Approval.DENY
    assert "outside the workspace" in blocked.reason
    assert decide(
        policy(workspace, FULL), "shell", {"command": "cat /etc/hostname"}, side_effects=True
    ).reason.startswith("Path is forbidden by security policy: /etc/hostname")


def test_shell_environment_withholds_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from acp_server.security import shell_environment

    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret")
    env = shell_environment()
    assert "OPENROUTER_API_KEY" not in env
    assert env.get("PATH") == os.environ.get("PATH")


# --------------------------------------------------------------------------- properties

_SEGMENTS = st.sampled_from(["..", ".", "src", "main.py", "out", "in", "link", "~", "", "/"])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(segments=st.lists(_SEGMENTS, min_size=1, max_size=8))
def test_resolved_paths_never_leave_the_jail(workspace: Path, segments: list[str]) -> None:
    if not (workspace / "out").exists():
        (workspace / "out").symlink_to(workspace.parent / "outside")
        (workspace / "in").symlink_to(workspace / "src")
    p = policy(workspace, replace(SUPERVISED, forbidden_paths=()))
    refusal = ""
    try:
        resolved = p.resolve_path("/".join(segments))
    except PolicyViolation as violation:
        refusal = str(violation)
    if refusal:
        assert refusal.startswith(("Path escapes workspace directory", "Path is empty"))
        return
    assert resolved == workspace or workspace in resolved.parents
    assert resolved.resolve() == resolved


_WORDS = st.sampled_from(
    ["ls", "cat", "git", "rm", "echo", "..", "/etc", "$HOME", "src/*", "{a,/b}", "'x y'", '"', "'",
     ";", "&&", "|", ">", "2>&1", "<", "(", ")", "$(", "`", "#", "\\", "\n", "X=1", "-C", "commit"]
)  # fmt: skip


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(words=st.lists(_WORDS, min_size=1, max_size=10))
def test_command_assessment_never_crashes_and_stays_consistent(
    workspace: Path, words: list[str]
) -> None:
    command = " ".join(words)
    p = policy(workspace)
    assessment = p.assess_command(command)
    decision = decide(p, "shell", {"command": command}, side_effects=True)
    if assessment.denial is not None:
        assert decision.approval is Approval.DENY
        assert p.classify_command(command) is CommandRisk.HIGH
    elif "rm" in assessment.programs:
        raise AssertionError("rm is not in the default allowed_commands")
    # Supervised never lets a shell command through without asking by default.
    assert decision.approval is not Approval.ALLOW
