"""Loading config.toml: defaults, the legacy [autonomy] table, env choices, clear errors."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import pytest

from acp_server.config import (
    ConfigError,
    load_config,
    resolve_config_dir,
    starter_config_document,
    write_starter_config,
)
from tests.helpers import write_config


def test_no_file_uses_the_echo_default_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        config = load_config(tmp_path, environ={}, announce_default=True)
    assert config.config_file is None
    assert list(config.agents) == ["default"]
    assert config.agents["default"].model_provider == "echo.default"
    assert config.workspace_dir == tmp_path / "data"
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1
    assert "offline echo provider" in notices[0]


def test_no_file_is_quiet_unless_asked_to_announce(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Administrative commands (`zeroclaw sessions ...`) load the config only for paths.
    with caplog.at_level(logging.INFO):
        config = load_config(tmp_path, environ={})
    assert list(config.agents) == ["default"]
    assert caplog.records == []


@pytest.mark.parametrize(
    ("variable", "ref", "model"),
    [
        ("OPENROUTER_API_KEY", "openrouter.default", "anthropic/claude-sonnet-4.6"),
        ("ANTHROPIC_API_KEY", "anthropic.default", "claude-sonnet-4-6"),
        ("OPENAI_API_KEY", "openai.default", "gpt-4.1"),
    ],
)
def test_no_file_picks_the_provider_from_the_environment(
    tmp_path: Path, variable: str, ref: str, model: str
) -> None:
    config = load_config(tmp_path, environ={variable: "sk-test"})
    assert config.agents["default"].model_provider == ref
    assert config.providers[ref].model == model
    assert config.providers[ref].api_key == "sk-test"
    assert config.default_model == model


def test_full_file_round_trip(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
        schema_version = 3
        workspace_dir = "state"
        [acp]
        default_agent = "coder"
        max_sessions = 3
        session_timeout_secs = 60
        [providers.models.openrouter.main]
        model = "anthropic/claude-sonnet-4.6"
        temperature = 0
        max_tokens = 1000
        [agents.coder]
        model_provider = "openrouter.main"
        risk_profile = "strict"
        runtime_profile = "quick"
        system_prompt = "Be brief."
        [agents.off]
        enabled = false
        model_provider = "openrouter.main"
        [risk_profiles.strict]
        level = "readonly"
        forbidden_paths = ["/secret"]
        auto_approve = ["my_tool"]
        [runtime_profiles.quick]
        shell_timeout_secs = 5
        max_tool_iterations = 2
        """,
    )
    config = load_config(tmp_path, environ={"OPENROUTER_API_KEY": "from-env"})
    assert config.workspace_dir == tmp_path / "state"
    assert config.store_path == tmp_path / "state" / "sessions" / "acp-sessions.db"
    assert (config.acp.default_agent, config.acp.max_sessions, config.acp.session_timeout_secs) == (
        "coder",
        3,
        60,
    )
    provider = config.providers["openrouter.main"]
    assert provider.temperature == 0.0
    assert provider.api_key == "from-env"
    assert config.agents["coder"].system_prompt == "Be brief."
    assert not config.agents["off"].dispatchable
    strict = config.risk_profiles["strict"]
    assert strict.level == "readonly"
    assert strict.forbidden_paths == ("/secret",)
    assert "file_read" in strict.auto_approve  # the built-in list is always merged in
    assert "my_tool" in strict.auto_approve
    assert config.runtime_profiles["quick"].max_tool_iterations == 2
    assert "default" in config.risk_profiles


def test_legacy_autonomy_table_maps_onto_the_default_profile(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_config(
        tmp_path,
        """
        [autonomy]
        level = "full"
        workspace_only = false
        allowed_commands = ["git"]
        max_actions_per_hour = 20
        [providers.models.echo.e]
        model = "echo"
        [agents.a]
        model_provider = "echo.e"
        """,
    )
    with caplog.at_level(logging.WARNING):
        config = load_config(tmp_path, environ={})
    default = config.risk_profiles["default"]
    assert default.level == "full"
    assert default.workspace_only is False
    assert default.allowed_commands == ("git",)
    assert any("max_actions_per_hour" in r.getMessage() for r in caplog.records)


def test_unknown_keys_are_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_config(tmp_path, "[acp]\nmax_sesions = 3\n[telemetry]\nenabled = true\n")
    with caplog.at_level(logging.WARNING):
        load_config(tmp_path, environ={})
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "`acp.max_sesions`" in messages
    assert "`telemetry`" in messages


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("[acp]\nmax_sessions = 'ten'\n", "acp.max_sessions", "expected an integer"),
        ("[acp]\nmax_sessions = 0\n", "acp.max_sessions", "greater than 0"),
        (
            "[risk_profiles.x]\nlevel = 'read_only'\n",
            "risk_profiles.x.level",
            "readonly, supervised, full",
        ),
        ("[agents.a]\nmodel_provider = 'nope.x'\n", "agents.a.model_provider", "does not exist"),
        ("[acp]\ndefault_agent = 'ghost'\n", "acp.default_agent", "no [agents.ghost]"),
        ("[gateway]\nport = 70000\n", "gateway.port", "TCP port"),
        ("acp = 3\n", "acp", "expected a table"),
    ],
)
def test_bad_values_name_the_file_key_and_problem(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    write_config(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path, environ={})
    message = str(raised.value)
    assert str(tmp_path / "config.toml") in message
    assert f"`{key}`" in message
    assert problem in message


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    write_config(tmp_path, "[acp\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(tmp_path, environ={})


def test_config_dir_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZEROCLAW_CONFIG_DIR", str(tmp_path / "env"))
    assert resolve_config_dir(tmp_path / "flag") == tmp_path / "flag"
    assert resolve_config_dir(None) == tmp_path / "env"
    monkeypatch.delenv("ZEROCLAW_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".zeroclaw").mkdir()
    assert resolve_config_dir(None) == tmp_path / ".zeroclaw"


def test_starter_config_loads_and_is_not_overwritten(tmp_path: Path) -> None:
    path = write_starter_config(tmp_path)
    document = tomllib.loads(path.read_text())
    assert document == starter_config_document()
    assert "api_key" not in path.read_text()
    config = load_config(tmp_path, environ={})
    assert config.agents["offline"].model_provider == "echo.default"
    with pytest.raises(ConfigError, match="--force"):
        write_starter_config(tmp_path)
    write_starter_config(tmp_path, force=True)


def test_the_two_timeouts_default_to_session_timeout_secs_and_can_be_set_apart(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, "[acp]\nsession_timeout_secs = 60\n")
    config = load_config(tmp_path, environ={})
    assert (config.acp.permission_timeout, config.acp.idle_session_timeout) == (60, 60)
    write_config(
        tmp_path,
        "[acp]\nsession_timeout_secs = 60\npermission_timeout_secs = 5\n"
        "idle_session_timeout_secs = 900\n",
    )
    config = load_config(tmp_path, environ={})
    assert (config.acp.permission_timeout, config.acp.idle_session_timeout) == (5, 900)
    write_config(tmp_path, "[acp]\npermission_timeout_secs = 0\n")
    with pytest.raises(ConfigError, match=r"acp\.permission_timeout_secs"):
        load_config(tmp_path, environ={})
