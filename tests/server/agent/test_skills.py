"""Skill loading: lookup order and clashes, the audit, SKILL.md front matter (YAML) and
SKILL.toml, and the ``[skills]`` / ``skill_bundles`` / ``skills_mode`` keys."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.skills.loader import (
    MAX_SKILL_FILE_BYTES,
    load_skills,
    shebang_names_shell,
)
from acp_server.agent.skills.manifest import (
    NO_DESCRIPTION,
    SkillManifestError,
    parse_skill_markdown,
    split_front_matter,
)
from acp_server.config import ConfigError, SkillsConfig, load_config
from tests.helpers import echo_config, write_config


def skill_md(root: Path, directory: str, text: str) -> Path:
    path = root / directory / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def names(config: SkillsConfig) -> list[str]:
    return [skill.name for skill in load_skills(config).skills]


def test_workspace_skills_come_first_then_bundles_sorted_and_earlier_sources_win(
    tmp_path: Path,
) -> None:
    own, bundle = tmp_path / "ws" / "skills", tmp_path / "shared" / "skills" / "team"
    skill_md(own, "zeta", "---\nname: zeta\ndescription: mine\n---\nown zeta\n")
    skill_md(own, "alpha", "alpha body\n")
    skill_md(bundle, "beta", "beta body\n")
    skill_md(bundle, "zeta-copy", "---\nname: zeta\ndescription: theirs\n---\nbundle zeta\n")
    (bundle / "README.md").write_text("not a skill: only directories count\n")
    config = SkillsConfig(sources=(own, bundle))
    loaded = load_skills(config)
    assert [skill.name for skill in loaded.skills] == ["alpha", "zeta", "beta"]
    zeta = loaded.find("ZETA")
    assert zeta is not None
    assert zeta.description == "mine"
    assert zeta.prompts == ("own zeta\n",)
    # Everything looked at is watched, so a change anywhere is seen by a stat.
    assert own in loaded.watched
    assert own / "alpha" / "SKILL.md" in loaded.watched


def test_missing_sources_are_no_skills(tmp_path: Path) -> None:
    assert names(SkillsConfig(sources=(tmp_path / "absent",))) == []


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda d: (d / "run.sh").write_text("echo hi\n"), "script files are not allowed"),
        (lambda d: (d / "tool").write_text("#!/usr/bin/env bash\necho\n"), "script files"),
        (lambda d: (d / "big.md").write_bytes(b"x" * (MAX_SKILL_FILE_BYTES + 1)), "over 512 KiB"),
        (lambda d: os.symlink("/etc/passwd", d / "link"), "symlinks are not allowed"),
    ],
)
def test_the_audit_skips_a_skill_with_one_warning_naming_file_and_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make: object, reason: str
) -> None:
    source = tmp_path / "skills"
    skill_md(source, "good", "fine\n")
    bad = skill_md(source, "bad", "looks fine\n").parent
    assert callable(make)
    make(bad)
    with caplog.at_level(logging.WARNING, logger="acp_server.agent.skills.loader"):
        loaded = load_skills(SkillsConfig(sources=(source,)))
        load_skills(SkillsConfig(sources=(source,)))  # read again: no second warning
    assert [skill.name for skill in loaded.skills] == ["good"]
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1, warnings
    assert reason in warnings[0]
    assert str(bad) in warnings[0]


def test_allow_scripts_lets_a_script_file_through(tmp_path: Path) -> None:
    source = tmp_path / "skills"
    (skill_md(source, "deploy", "deploy it\n").parent / "run.sh").write_text("echo\n")
    assert names(SkillsConfig(sources=(source,))) == []
    assert names(SkillsConfig(sources=(source,), allow_scripts=True)) == ["deploy"]


def test_a_symlinked_skill_directory_is_skipped(tmp_path: Path) -> None:
    source = tmp_path / "skills"
    real = skill_md(tmp_path / "elsewhere", "real", "body\n").parent
    source.mkdir()
    os.symlink(real, source / "linked")
    assert names(SkillsConfig(sources=(source,))) == []


def test_a_directory_without_a_manifest_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "skills" / "empty").mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        assert names(SkillsConfig(sources=(tmp_path / "skills",))) == []
    assert "has no SKILL.md or SKILL.toml" in caplog.text


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"#!/bin/sh\n", True),
        (b"#!/usr/bin/env -S bash -e\n", True),
        (b"#! /usr/local/bin/fish\n", True),
        (b"#!/usr/bin/env python3\n", False),
        (b"# just a comment\n", False),
        (b"#!\n", False),
    ],
)
def test_shebangs_naming_a_shell(head: bytes, expected: bool) -> None:
    assert shebang_names_shell(head) is expected


def test_front_matter_fields_and_defaults(tmp_path: Path) -> None:
    text = (
        "---\r\nname: review\r\ndescription: >-\r\n  Review a change\r\n  carefully\r\n"
        "version: 2\r\nauthor: Ada\r\ntags: [code, review]\r\nalways: true\r\n"
        "argument-hint: <branch>\r\nallowed-tools: [shell]\r\nlicense: MIT\r\n---\r\n"
        "# Review\r\n\r\nRead the diff.\r\n"
    )
    skill = parse_skill_markdown(text, tmp_path, tmp_path / "SKILL.md")
    assert (skill.name, skill.description, skill.version) == (
        "review",
        "Review a change carefully",
        "2",
    )
    assert (skill.author, skill.tags, skill.always) == ("Ada", ("code", "review"), True)
    assert skill.argument_hint == "<branch>"
    assert skill.prompts == ("# Review\n\nRead the diff.\n",)
    bare = parse_skill_markdown("# Title\n\nFirst real line.\n", tmp_path / "dir", tmp_path)
    assert (bare.name, bare.description, bare.version, bare.always) == (
        "dir",
        "First real line.",
        "0.1.0",
        False,
    )
    assert parse_skill_markdown("", tmp_path, tmp_path).description == NO_DESCRIPTION
    comma = parse_skill_markdown("---\ntags: a, b ,\n---\nx\n", tmp_path, tmp_path)
    assert comma.tags == ("a", "b")


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("name: [unclosed\n", r"not valid YAML \(line \d+\)"),
        ("- just\n- a list\n", "must be a YAML mapping"),
        ("description: x\n  bad: indent\n", "not valid YAML"),
    ],
)
def test_broken_front_matter_is_a_clear_error(tmp_path: Path, front: str, problem: str) -> None:
    with pytest.raises(SkillManifestError, match=problem):
        parse_skill_markdown(f"---\n{front}---\nbody\n", tmp_path, tmp_path / "SKILL.md")


def test_broken_front_matter_skips_the_skill_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    skill_md(tmp_path / "skills", "broken", "---\nname: [oops\n---\nbody\n")
    with caplog.at_level(logging.WARNING):
        assert names(SkillsConfig(sources=(tmp_path / "skills",))) == []
    assert "front matter is not valid YAML" in caplog.text
    assert "broken" in caplog.text


scalar = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40)


@given(name=scalar, description=scalar, body=st.text(max_size=200))
def test_front_matter_written_by_a_yaml_dumper_reads_back(
    name: str, description: str, body: str
) -> None:
    front = yaml.safe_dump({"name": name, "description": description, "extra": [1, 2]})
    skill = parse_skill_markdown(
        f"---\n{front}---\n{body}", Path("/s/dir"), Path("/s/dir/SKILL.md")
    )
    assert skill.name == (name.strip() or "dir")
    if description.strip():
        assert skill.description == description.strip()
    assert skill.prompts == (
        (body.replace("\r\n", "\n"),) if body.replace("\r\n", "\n").strip() else ()
    )


@given(st.text(max_size=300))
def test_any_skill_md_parses_or_is_a_manifest_error(text: str) -> None:
    try:
        skill = parse_skill_markdown(text, Path("/s/x"), Path("/s/x/SKILL.md"))
    except SkillManifestError:
        return
    assert skill.name
    assert skill.description


@given(st.text(max_size=200))
def test_text_without_an_opening_rule_is_all_body(text: str) -> None:
    if text.replace("\r\n", "\n").startswith("---\n"):
        return
    assert split_front_matter(text) == (None, text.replace("\r\n", "\n"))


def test_skill_toml_is_authoritative_with_tools(tmp_path: Path) -> None:
    directory = tmp_path / "skills" / "deploy"
    directory.mkdir(parents=True)
    (directory / "SKILL.md").write_text("---\nname: ignored\n---\nignored body\n")
    (directory / "SKILL.toml").write_text(
        'prompts = ["Then announce."]\n'
        '[skill]\nname = "deploy"\ndescription = "Ship it"\nprompts = ["Check CI first."]\n'
        'argument_hint = "<env>"\nunknown_key = 1\n'
        '\n[[tools]]\nname = "status"\ndescription = "Deployment status"\nkind = "shell"\n'
        'command = "git log -1 {{ref}}"\nargs = { ref = "A git ref" }\ntimeout_secs = 5\n'
        '\n[[tools]]\nname = "docs"\nkind = "http"\ncommand = "https://example.invalid"\n'
    )
    [skill] = load_skills(SkillsConfig(sources=(tmp_path / "skills",))).skills
    assert (skill.name, skill.description, skill.argument_hint) == ("deploy", "Ship it", "<env>")
    assert skill.location == directory / "SKILL.toml"
    assert skill.prompts == ("Check CI first.", "Then announce.")
    status, docs = skill.tools
    assert (status.kind, status.command, status.args, status.timeout_secs) == (
        "shell",
        "git log -1 {{ref}}",
        (("ref", "A git ref"),),
        5,
    )
    assert docs.kind == "http"


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ('[skill]\nname = "x"\n', "needs a name and a description"),
        ("not toml = = 1\n", "invalid TOML"),
        (
            '[skill]\nname="x"\ndescription="d"\n[[tools]]\nname="t"\nkind="shell"\n',
            "needs a command",
        ),
        ('description = "no table"\n', "a [skill] table is required"),
    ],
)
def test_a_bad_skill_toml_skips_the_skill(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, toml: str, problem: str
) -> None:
    directory = tmp_path / "skills" / "bad"
    directory.mkdir(parents=True)
    (directory / "SKILL.toml").write_text(toml)
    with caplog.at_level(logging.WARNING):
        assert names(SkillsConfig(sources=(tmp_path / "skills",))) == []
    assert problem in caplog.text


def test_skills_config_keys(tmp_path: Path) -> None:
    document = echo_config(extra_agents={"other": {"model_provider": "echo.default"}})
    document["skills"] = {"allow_scripts": True, "skills_mode": "compact", "max_full_chars": 99}
    document["agents"]["echo"]["skill_bundles"] = ["team", "common"]
    document["agents"]["other"]["skills_mode"] = "full"
    config = load_config(write_config(tmp_path, document), environ={})
    echo, other = config.agents["echo"].skills, config.agents["other"].skills
    workspace = tmp_path / "data" / "agents" / "echo" / "workspace"
    shared = tmp_path / "data" / "shared" / "skills"
    assert echo.sources == (workspace / "skills", shared / "team", shared / "common")
    assert (echo.mode, echo.allow_scripts, echo.max_full_chars) == ("compact", True, 99)
    assert (other.mode, other.allow_scripts) == ("full", True)
    default = load_config(tmp_path / "none", environ={}).agents["default"].skills
    assert default.mode == "full"
    assert not default.allow_scripts
    assert default.sources == (
        tmp_path / "none" / "data" / "agents" / "default" / "workspace" / "skills",
    )


@pytest.mark.parametrize(
    ("where", "value", "key"),
    [
        ("agent", {"skills_mode": "lazy"}, r"agents\.echo\.skills_mode"),
        ("agent", {"skill_bundles": ["../escape"]}, r"agents\.echo\.skill_bundles"),
        ("agent", {"skill_bundles": "team"}, r"agents\.echo\.skill_bundles"),
        ("skills", {"skills_mode": "partial"}, r"skills\.skills_mode"),
        ("skills", {"max_full_chars": 0}, r"skills\.max_full_chars"),
        ("skills", {"allow_scripts": "yes"}, r"skills\.allow_scripts"),
    ],
)
def test_bad_skills_keys_name_the_key(
    tmp_path: Path, where: str, value: dict[str, object], key: str
) -> None:
    document = echo_config()
    if where == "agent":
        document["agents"]["echo"].update(value)
    else:
        document["skills"] = value
    with pytest.raises(ConfigError, match=key):
        load_config(write_config(tmp_path, document), environ={})
