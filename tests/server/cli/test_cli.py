"""The `zeroclaw` command line (in process, through click's runner)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from acp_server.cli.main import cli
from tests.helpers import write_config


def test_help_lists_the_commands() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in ("acp", "init", "prompt", "demo"):
        assert command in result.output


def test_init_writes_then_refuses_to_overwrite(tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["--config-dir", str(tmp_path), "init"])
    assert first.exit_code == 0
    assert (tmp_path / "config.toml").exists()
    second = runner.invoke(cli, ["--config-dir", str(tmp_path), "init"])
    assert second.exit_code == 2
    assert "--force" in second.output
    forced = runner.invoke(cli, ["--config-dir", str(tmp_path), "init", "--force"])
    assert forced.exit_code == 0


def test_bad_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    write_config(tmp_path, "[acp]\nmax_sessions = -1\n")
    result = CliRunner().invoke(cli, ["--config-dir", str(tmp_path), "acp"])
    assert result.exit_code == 2
    assert "`acp.max_sessions`" in result.output
