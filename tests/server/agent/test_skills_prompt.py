"""The skills block of the system prompt, the tools skills bring (``read_skill``, skill
shell tools under the shell tool's rules) and skills as slash commands."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.skills.commands import expand_skill_command
from acp_server.agent.skills.loader import LoadedSkills
from acp_server.agent.skills.manifest import Skill, SkillTool
from acp_server.agent.skills.prompt_section import (
    COMPACT_INTRO,
    FULL_INTRO,
    composed_tool_name,
    render_skills_section,
)
from acp_server.agent.skills.tools import ReadSkillTool, SkillShellTool, skill_tools
from acp_server.agent.tools.base import ToolError
from acp_server.config import RiskProfileConfig, SkillsConfig
from acp_server.protocol.presentation.commands import available_commands
from acp_server.security import Approval, SecurityPolicy
from tests.server.tool_context import make_context


def make_skill(root: Path, name: str, body: str = "Do the thing.", **options: object) -> Skill:
    directory = root / "skills" / name
    directory.mkdir(parents=True, exist_ok=True)
    location = directory / "SKILL.md"
    location.write_text(f"---\nname: {name}\n---\n{body}")
    fields: dict[str, object] = {"prompts": (body,), **options}
    return Skill(name, f"{name} <&> description", location, directory, **fields)  # type: ignore[arg-type]


def test_full_mode_inlines_escaped_instructions_and_lists_tools(tmp_path: Path) -> None:
    tools = (
        SkillTool("status", "Show status", "shell", "git status"),
        SkillTool("docs", "Open docs", "http", "https://example.invalid"),
    )
    skill = make_skill(tmp_path, "ops", "Use <care> & 'quotes'.", tools=tools)
    text, mode = render_skills_section([skill], SkillsConfig(), tmp_path / "elsewhere")
    assert mode == "full"
    assert text.startswith(
        f"## Available Skills\n\n{FULL_INTRO}\n\n<available_skills>\n  <skill>\n"
    )
    assert (
        "    <name>ops</name>\n    <description>ops &lt;&amp;&gt; description</description>" in text
    )
    assert f"    <location>{skill.location}</location>" in text
    assert (
        "    <instructions>\n      <instruction>Use &lt;care&gt; &amp; &apos;quotes&apos;."
        "</instruction>\n    </instructions>"
    ) in text
    assert (
        "      <tool>\n        <name>ops__status</name>\n        <description>Show status" in text
    )
    assert "<callable_tools hint=" in text
    assert "<tools>\n      <tool>\n        <name>docs</name>" in text
    assert "        <kind>http</kind>" in text
    assert text.endswith("  </skill>\n</available_skills>")


def test_compact_mode_has_summaries_relative_locations_and_always_skills(tmp_path: Path) -> None:
    plain = make_skill(tmp_path, "plain", "plain-body")
    pinned = make_skill(tmp_path, "pinned", "pinned-body", always=True)
    text, mode = render_skills_section([plain, pinned], SkillsConfig(mode="compact"), tmp_path)
    assert mode == "compact"
    assert COMPACT_INTRO in text
    assert "<location>skills/plain/SKILL.md</location>" in text
    assert "plain-body" not in text
    assert "<instruction>pinned-body</instruction>" in text


def test_full_mode_over_the_cap_falls_back_to_compact_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    skill = make_skill(tmp_path, "huge", "x" * 5000)
    config = SkillsConfig(max_full_chars=1000, sources=(tmp_path / "cap-test",))
    with caplog.at_level(logging.WARNING):
        text, mode = render_skills_section([skill], config, tmp_path)
    assert mode == "compact"
    assert "x" * 100 not in text
    assert "exceeds [skills] max_full_chars (1000); using compact mode" in caplog.text
    assert render_skills_section([], SkillsConfig(), tmp_path) == ("", "full")


@given(st.text(max_size=40), st.text(max_size=80))
def test_composed_tool_names_are_short_and_plain(skill: str, tool: str) -> None:
    name = composed_tool_name(skill, tool)
    assert re.fullmatch(r"[A-Za-z0-9_-]{2,64}", name)
    assert composed_tool_name(skill, tool) == name


def test_composed_tool_name_keeps_valid_names_and_hashes_long_ones() -> None:
    assert composed_tool_name("deploy", "status") == "deploy__status"
    assert composed_tool_name("my skill", "run it") == "my_skill__run_it"
    long_a, long_b = composed_tool_name("s" * 70, "a"), composed_tool_name("s" * 70, "b")
    assert len(long_a) == 64
    assert long_a != long_b


def test_skill_tools_compose_names_and_read_skill_only_when_compact(tmp_path: Path) -> None:
    tools = (SkillTool("status", "d", "shell", "git status"), SkillTool("web", "d", "http", "u"))
    loaded = LoadedSkills((make_skill(tmp_path, "ops", tools=tools),))
    assert list(skill_tools(loaded, compact=False)) == ["ops__status"]
    assert list(skill_tools(loaded, compact=True)) == ["read_skill", "ops__status"]
    assert skill_tools(LoadedSkills(), compact=True) == {}


async def test_read_skill_returns_the_raw_file_case_insensitively(tmp_path: Path) -> None:
    skill = make_skill(tmp_path, "Review", "Check the diff.")
    tool = ReadSkillTool(lambda: LoadedSkills((skill,)))
    ctx, _ = make_context(tmp_path)
    output = await tool.run({"name": "review"}, ctx)
    assert output.text == "---\nname: Review\n---\nCheck the diff."
    with pytest.raises(ToolError, match=r"Unknown skill 'nope'\. Available skills: Review"):
        await tool.run({"name": "nope"}, ctx)
    skill.location.unlink()
    with pytest.raises(ToolError, match="Failed to read skill 'Review' from"):
        await tool.run({"name": "Review"}, ctx)


def shell_tool(
    tmp_path: Path, command: str, args: tuple[tuple[str, str], ...] = ()
) -> SkillShellTool:
    skill = make_skill(tmp_path, "ops")
    return SkillShellTool(skill, SkillTool("run", "Run", "shell", command, args))


def test_arguments_are_substituted_shell_quoted(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, "echo {{word}} {{ word }} {{unknown}}", (("word", "w"),))
    assert (
        tool.command({"word": "a b; rm -rf /"})
        == "echo 'a b; rm -rf /' 'a b; rm -rf /' {{unknown}}"
    )
    assert tool.command({}) is None
    assert tool.command({"word": 3}) is None
    assert tool.parameters["required"] == ["word"]
    assert (
        shell_tool(tmp_path, "ls {{skill_dir}}").command({}) == f"ls {tmp_path / 'skills' / 'ops'}"
    )


def test_skill_tools_get_the_shell_tools_approval_rules(tmp_path: Path) -> None:
    policy = SecurityPolicy(RiskProfileConfig(), tmp_path)
    echo = shell_tool(tmp_path, "echo {{word}}", (("word", "w"),))
    rules = echo.definition.rules
    decision = policy.decide(echo.name, {"word": "hi"}, side_effects=True, rules=rules)
    assert decision.approval is Approval.ASK  # supervised: asked, as a shell call would be
    curl = shell_tool(tmp_path, "curl {{url}}", (("url", "u"),))
    denied = policy.decide(curl.name, {"url": "x"}, side_effects=True, rules=curl.definition.rules)
    assert denied.approval is Approval.DENY
    assert "curl" in (denied.reason or "")
    missing = policy.decide(echo.name, {}, side_effects=True, rules=rules)
    assert missing.approval is Approval.DENY
    full = SecurityPolicy(RiskProfileConfig(level="full"), tmp_path)
    assert full.decide(echo.name, {"word": "x"}, side_effects=True, rules=rules).approval is (
        Approval.ALLOW
    )
    readonly = SecurityPolicy(RiskProfileConfig(level="readonly"), tmp_path)
    assert readonly.decide(echo.name, {"word": "x"}, side_effects=True, rules=rules).approval is (
        Approval.DENY
    )


async def test_a_skill_tool_runs_like_the_shell_tool(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, "echo {{word}}", (("word", "w"),))
    ctx, _ = make_context(tmp_path, RiskProfileConfig(sandbox_enabled=False))
    output = await tool.run({"word": "hello world"}, ctx)
    assert (output.ok, output.text) == (True, "hello world")
    refused = shell_tool(tmp_path, "curl {{u}}", (("u", "u"),))
    with pytest.raises(ToolError, match="curl"):
        await refused.run({"u": "x"}, ctx)


def test_commands_list_each_skill_with_its_hint(tmp_path: Path) -> None:
    loaded = LoadedSkills(
        (
            make_skill(tmp_path, "review", argument_hint="<branch>"),
            make_skill(tmp_path, "two words"),
        )
    )
    commands = available_commands(loaded)
    assert [(c.name, c.input.hint if c.input else None) for c in commands] == [
        ("review", "<branch>"),
        ("two-words", None),
    ]


def test_a_slash_prompt_puts_the_skill_instructions_first(tmp_path: Path) -> None:
    loaded = LoadedSkills((make_skill(tmp_path, "review", "REVIEW-STEPS"),))
    expanded = expand_skill_command(loaded, "/Review main please")
    assert expanded.index("REVIEW-STEPS") < expanded.index("/Review main please")
    assert "'review' skill" in expanded
    assert "REVIEW-STEPS" in expand_skill_command(loaded, "  /review")
    for ordinary in ("/reviewer x", "/unknown", "review /review", "/ review", "hello"):
        assert expand_skill_command(loaded, ordinary) == ordinary
