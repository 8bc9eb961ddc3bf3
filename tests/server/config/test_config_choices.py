"""``[agents.<alias>] model_providers`` and ``context_window`` in config.toml, and the
stored config choices (``acp_sessions.config_json``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.config import ConfigError
from acp_server.protocol.services.config_options import level_choices, provider_choices
from acp_server.storage.dialect import SQLITE
from acp_server.storage.settings import read_choices, write_choices
from acp_server.storage.sqlite import MIGRATIONS
from tests.helpers import make_config

OTHER = {"openai": {"fast": {"model": "gpt-fast", "api_key": "sk-test", "context_window": 8192}}}


def test_model_providers_list_the_agents_own_provider_first_and_each_once(
    tmp_path: Path,
) -> None:
    config = make_config(
        tmp_path,
        providers=OTHER,
        agents={"echo": {"model_providers": [" openai.fast", "echo.default", "openai.fast"]}},
    )
    agent = config.agents["echo"]
    assert agent.model_providers == ("echo.default", "openai.fast")
    assert config.providers["openai.fast"].context_window == 8192
    assert config.providers["echo.default"].context_window is None


def test_an_unknown_model_provider_names_the_key_and_what_exists(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        make_config(tmp_path, agents={"echo": {"model_providers": ["echo.default", "openai.x"]}})
    message = str(raised.value)
    assert "agents.echo.model_providers[1]" in message
    assert "`openai.x` does not exist (available: echo.default)" in message


@pytest.mark.parametrize("bad", ["openai.fast", ["openai.fast", 3]])
def test_model_providers_must_be_an_array_of_strings(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match=r"agents\.echo\.model_providers"):
        make_config(tmp_path, providers=OTHER, agents={"echo": {"model_providers": bad}})


def test_context_window_must_be_positive(tmp_path: Path) -> None:
    bad = {"openai": {"fast": {"model": "m", "api_key": "k", "context_window": 0}}}
    with pytest.raises(ConfigError, match=r"providers\.models\.openai\.fast\.context_window"):
        make_config(tmp_path, providers=bad)


def test_levels_never_go_above_the_profile() -> None:
    assert level_choices("readonly") == ["readonly"]
    assert level_choices("supervised") == ["readonly", "supervised"]
    assert level_choices("full") == ["readonly", "supervised", "full"]
    assert provider_choices("a.x", ("b.y", "a.x")) == ["a.x", "b.y"]
    assert provider_choices("", ("b.y",)) == ["b.y"]


def _database() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    for migrate in MIGRATIONS:
        migrate(conn)
    conn.execute(
        "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir, created_at,"
        " last_activity) VALUES ('s-1', 'echo', '/w', 'now', 'now')"
    )
    return conn


@given(st.dictionaries(st.text(), st.text()))
def test_stored_choices_round_trip(choices: dict[str, str]) -> None:
    conn = _database()
    assert read_choices(conn, SQLITE, "s-1") == {}  # none made yet
    assert write_choices(conn, SQLITE, "s-1", choices)
    assert read_choices(conn, SQLITE, "s-1") == choices
    assert not write_choices(conn, SQLITE, "s-2", choices)  # not stored
    assert read_choices(conn, SQLITE, "s-2") == {}


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"mode": 3, "model": "a.b"}'])
def test_unreadable_stored_choices_count_as_none(text: str) -> None:
    conn = _database()
    conn.execute("UPDATE acp_sessions SET config_json = ?", (text,))
    expected = {"model": "a.b"} if "model" in text else {}
    assert read_choices(conn, SQLITE, "s-1") == expected
