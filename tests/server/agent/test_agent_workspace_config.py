"""The agent workspace and ``[acp] project_instructions`` keys, and the prompt pieces
that need no server: persona truncation and the date line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from acp_server.agent.prompt.identity import (
    MAX_PERSONA_FILE_CHARS,
    read_persona_files,
    render_persona,
    seed_persona_files,
)
from acp_server.agent.prompt.system_prompt import date_section
from acp_server.config import ConfigError, load_config
from tests.helpers import echo_config, write_config


def test_agent_workspace_defaults_under_workspace_dir_and_path_is_relative_to_config(
    tmp_path: Path,
) -> None:
    document = echo_config(extra_agents={"other": {"model_provider": "echo.default"}})
    document["agents"]["other"]["workspace"] = {"path": "personas/other"}
    config = load_config(write_config(tmp_path, document), environ={})
    assert config.agents["echo"].workspace == tmp_path / "data" / "agents" / "echo" / "workspace"
    assert config.agents["other"].workspace == tmp_path / "personas" / "other"
    assert config.agents["echo"].project_instructions == ("AGENTS.md",)
    assert load_config(tmp_path / "none", environ={}).agents["default"].workspace == (
        tmp_path / "none" / "data" / "agents" / "default" / "workspace"
    )


def test_project_instructions_list_is_copied_to_agents_and_can_be_empty(tmp_path: Path) -> None:
    document = echo_config()
    document["acp"] = {"project_instructions": ["AGENTS.md", "CLAUDE.md"]}
    config = load_config(write_config(tmp_path / "a", document), environ={})
    assert config.acp.project_instructions == ("AGENTS.md", "CLAUDE.md")
    assert config.agents["echo"].project_instructions == ("AGENTS.md", "CLAUDE.md")
    document["acp"] = {"project_instructions": []}
    config = load_config(write_config(tmp_path / "b", document), environ={})
    assert config.agents["echo"].project_instructions == ()


@pytest.mark.parametrize("bad", ["../AGENTS.md", "docs/AGENTS.md", "", ".."])
def test_project_instructions_must_be_plain_names(tmp_path: Path, bad: str) -> None:
    document = echo_config()
    document["acp"] = {"project_instructions": [bad]}
    with pytest.raises(ConfigError, match=r"acp\.project_instructions"):
        load_config(write_config(tmp_path, document), environ={})


def test_a_long_persona_file_is_cut_with_a_visible_notice(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("é" * (MAX_PERSONA_FILE_CHARS + 10))
    [soul] = read_persona_files(tmp_path)
    assert soul.truncated
    assert len(soul.text) == MAX_PERSONA_FILE_CHARS  # characters, not bytes
    assert render_persona([soul]).endswith(
        f"[... truncated at {MAX_PERSONA_FILE_CHARS} chars — use `file_read` for the full file]"
    )


def test_seeding_never_overwrites_content_and_reports_what_it_wrote(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("mine\n")
    written = seed_persona_files(tmp_path, "quill")
    assert "SOUL.md" not in written
    assert "BOOTSTRAP.md" not in written
    assert (tmp_path / "SOUL.md").read_text() == "mine\n"
    assert "quill" in (tmp_path / "IDENTITY.md").read_text()
    assert seed_persona_files(tmp_path, "quill") == []
    assert not (tmp_path / "MEMORY.md").exists()


def test_date_section_has_date_and_offset_but_no_time() -> None:
    moment = datetime(2026, 8, 22, 17, 44, tzinfo=timezone(timedelta(hours=-4)))
    text = date_section(moment)
    assert "Date: 2026-08-22\nUTC offset: -04:00" in text
    assert "17:44" not in text
