"""Skill command templates (acp_server/agent/skills/templates.py): a value reaches the
command as literal text wherever its placeholder stands, checked against a real bash."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_server.agent.skills.templates import (
    Context,
    fill,
    placeholders,
    unquotable_placeholders,
)

BASH = shutil.which("bash")
# Any text a tool argument may hold (no NUL: no command line does; no lone surrogate: the
# arguments are refused first), rich in what the shell treats specially.
VALUES = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("$`\"'\\!;&|<>(){}[]*?~#= \t\n%^-")),
        st.characters(codec="utf-8", exclude_characters="\x00"),
    ),
    max_size=30,
)
# Each prints the value between markers; $( … ) strips trailing newlines, so it is read
# through a variable the substitution assigns (no splitting there).
TEMPLATES = {
    Context.UNQUOTED: "printf '<%s>' {{v}}",
    Context.DOUBLE: 'printf "<%s>" "{{v}}"',
    Context.SINGLE: "printf '<%s>' '{{v}}'",
    Context.SUBSTITUTION: "x=$(printf '%s.' {{v}}); printf '<%s>' \"${x%.}\"",
}


def run_bash(command: str) -> str:
    assert BASH is not None
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", command],
        capture_output=True,
        timeout=10,
        check=True,
        env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin"},
    )
    return done.stdout.decode("utf-8", errors="surrogateescape")


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("context", list(TEMPLATES))
@settings(max_examples=40, deadline=None)
@given(value=VALUES)
def test_bash_reads_back_exactly_the_value(context: Context, value: str) -> None:
    template = TEMPLATES[context]
    [found] = [each for each in placeholders(template) if each.name == "v"]
    assert found.context is context
    assert run_bash(fill(template, {"v": value})) == f"<{value}>"


@pytest.mark.parametrize(
    "template",
    [
        "echo `cat {{v}}`",
        'echo "${X:-{{v}}}"',
        "echo $(( {{v}} + 1 ))",
        "echo $'{{v}}'",
        'echo "$(cat {{v}})"',
        "cat <<EOF\n{{v}}\nEOF",
        "echo `date` {{v}}",  # after an opaque part: not followed, so refused too
    ],
)
def test_a_placeholder_where_no_quoting_is_sound_is_refused(template: str) -> None:
    assert [each.name for each in unquotable_placeholders(template)] == ["v"]
    with pytest.raises(ValueError, match="stands inside"):
        fill(template, {"v": "x"})


def test_comments_escapes_and_unknown_placeholders() -> None:
    template = "echo \\' {{a}} # it's {{b}}\necho '{{c}}' {{skill_dir}}"
    contexts = {each.name: each.context for each in placeholders(template)}
    assert contexts == {"a": Context.UNQUOTED, "c": Context.SINGLE, "skill_dir": Context.UNQUOTED}
    assert fill("echo {{a}} {{other}}", {"a": "x y"}) == "echo 'x y' {{other}}"
