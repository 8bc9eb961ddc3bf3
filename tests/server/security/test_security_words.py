"""The classifier reads a command's words as bash does: line continuations, tilde forms,
and walks that follow symbolic links out of the workspace."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from acp_server.config import RiskProfileConfig
from acp_server.security import CommandRisk, SecurityPolicy, command_words

OPEN = replace(RiskProfileConfig(), forbidden_paths=())
BASH = shutil.which("bash")

# Pieces of unquoted, single- and double-quoted text, and line continuations between them.
_PIECES = st.sampled_from(
    ["a", "b.", "..", "/", "-x", " ", "  ", "\\\n", "'q r'", '"d e"', '"f\\\ng"', "\\ ", "'\\\n'"]
)


def bash_words(text: str) -> list[str]:
    """The words bash hands to a command for ``text`` (printf prints them NUL-separated)."""
    assert BASH is not None
    completed = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", f"printf '%s\\0' {text}"],
        capture_output=True,
        check=True,
    )
    return completed.stdout.decode().split("\0")[:-1]


@pytest.mark.skipif(BASH is None, reason="needs bash")
@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(_PIECES, min_size=1, max_size=10))
def test_words_are_the_words_bash_sees(pieces: list[str]) -> None:
    text = "".join(pieces)
    if not text.strip(" \\\n"):
        return  # printf with no arguments prints one empty word
    [words] = command_words(f"printf %s\\0 {text}")
    assert words[2:] == bash_words(text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return root.resolve()


def denial(workspace: Path, command: str) -> str | None:
    return SecurityPolicy(OPEN, workspace).assess_command(command).denial


@pytest.mark.parametrize(
    "command",
    [
        "cat .\\\n./outside/secret.txt",
        'cat ".\\\n./outside/secret.txt"',
        "cat src/.\\\n.\\\n/.\\\n./.\\\n./outside/secret.txt",
        "cat ~+/../outside/secret.txt",
        "cat {x,~+/..}/outside/secret.txt",
        "echo hi > ~+/../out.txt",
        "X=~+/..; cat $X/outside/secret.txt",
        "X=a:~+/..; ls",
        "ls name=~+/..",
    ],
)
def test_escapes_hidden_from_a_naive_reading_are_refused(workspace: Path, command: str) -> None:
    refusal = denial(workspace, command)
    assert refusal is not None
    assert refusal.startswith("Path escapes workspace directory")


@pytest.mark.parametrize("command", ["cat ~-/x", "ls ~1", "ls ~+2", "ls ~-1/x"])
def test_tilde_forms_that_depend_on_shell_state_are_refused(workspace: Path, command: str) -> None:
    refusal = denial(workspace, command)
    assert refusal is not None
    assert "tilde form" in refusal


def test_tilde_forms_inside_the_workspace_pass(workspace: Path) -> None:
    policy = SecurityPolicy(OPEN, workspace)
    for command in ("ls ~+", "ls ~+/src", "cat src/.\\\n/x", "echo a\\\nb"):
        assessment = policy.assess_command(command)
        assert assessment.denial is None, command
        assert assessment.risk is CommandRisk.LOW


@pytest.mark.parametrize(
    "command",
    [
        "grep -R secret .",
        "grep -rRn secret src",
        "grep --dereference-recursive secret",
        "find -L . -name secret.txt",
        "find . -follow -name secret.txt",
        "ls -RL",
        "ls -R -L src",
        "du -L .",
        "cp -rL src copy",
    ],
)
def test_following_links_out_of_the_workspace_is_refused(workspace: Path, command: str) -> None:
    profile = replace(OPEN, allowed_commands=("*",))
    policy = SecurityPolicy(profile, workspace)
    assert policy.assess_command(command).denial is None  # no link yet
    (workspace / "src" / "elsewhere").symlink_to(workspace.parent / "outside")
    refusal = policy.assess_command(command).denial
    assert refusal is not None
    assert "follows symbolic links" in refusal
    assert "src/elsewhere ->" in refusal


@pytest.mark.parametrize("command", ["grep -r secret .", "find . -name x", "ls -L", "ls -R"])
def test_walks_that_do_not_follow_links_pass(workspace: Path, command: str) -> None:
    (workspace / "src" / "elsewhere").symlink_to(workspace.parent / "outside")
    (workspace / "inside").symlink_to(workspace / "src")
    assert denial(workspace, command) is None


def test_links_inside_the_workspace_do_not_stop_a_following_walk(workspace: Path) -> None:
    (workspace / "inside").symlink_to(workspace / "src")
    assert denial(workspace, "grep -R x .") is None


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(position=st.integers(min_value=0))
def test_a_continuation_anywhere_in_a_word_changes_nothing(workspace: Path, position: int) -> None:
    command = "cat ../outside/secret.txt"
    at = 4 + position % (len(command) - 4)
    spliced = command[:at] + "\\\n" + command[at:]
    assert denial(workspace, spliced) == denial(workspace, command)
