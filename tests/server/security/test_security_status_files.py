"""``zeroclaw security status`` says, per risk profile, which of the server's own files its
shell commands are kept from, and says so plainly when its posture does not hide them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from acp_server.cli.main import cli
from acp_server.security.sandbox import BACKENDS, BackendProbe, BackendStatus
from acp_server.security.sandbox import posture as posture_module
from tests.helpers import echo_config, write_config


def server_files_line(lines: list[str], profile_line: str) -> str:
    """The ``the server's own files`` line under the profile whose line starts so."""
    start = next(index for index, line in enumerate(lines) if line.startswith(profile_line))
    return next(line for line in lines[start + 1 :] if "the server's own files" in line)


def test_status_names_the_server_files_each_profile_hides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    available = BackendProbe.known(
        {
            name: BackendStatus(name, True, "ABI 7" if name == "landlock" else name)
            for name in BACKENDS
        }
    )
    monkeypatch.setattr(posture_module, "system_probe", lambda: available)
    monkeypatch.setattr("acp_server.cli.security.system_probe", lambda: available)
    document = echo_config()
    document["risk_profiles"]["off"] = {"sandbox_enabled": False}
    document["workspace_dir"] = str(tmp_path / "elsewhere")
    config_dir = write_config(tmp_path / "cfg", document)
    runner = CliRunner()
    text = runner.invoke(cli, ["--config-dir", str(config_dir), "security", "status"])
    as_json = runner.invoke(cli, ["--config-dir", str(config_dir), "security", "status", "--json"])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    default = server_files_line(lines, "  default: landlock ABI 7 (")
    assert default.startswith("    the server's own files, hidden from shell commands: ")
    assert f"the config directory {config_dir}" in default
    assert f"the data directory (workspace_dir) {tmp_path / 'elsewhere'}" in default
    assert f"the server user's home directory {Path.home()}" in default
    off = server_files_line(lines, "  off: none (shell commands run unconfined; sandbox off)")
    assert off.startswith("    the server's own files, NOT hidden (none) from shell commands: ")
    profiles = json.loads(as_json.output)["riskProfiles"]
    assert profiles["default"]["serverFiles"]["hidden"] is True
    assert profiles["off"]["serverFiles"]["hidden"] is False
    assert {"label": "the config directory", "path": str(config_dir)} in profiles["default"][
        "serverFiles"
    ]["paths"]
