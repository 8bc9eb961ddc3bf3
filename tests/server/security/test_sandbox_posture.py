"""The OS sandbox's configuration and posture: parsing the risk-profile keys, the choice of
backend for each setting (with availability simulated), the start-up report, the refusal
of a required sandbox, and ``zeroclaw security status``."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.shell import ShellTool
from acp_server.cli.main import cli
from acp_server.config import ConfigError, RiskProfileConfig, load_config
from acp_server.config.values import SANDBOX_BACKEND_NAMES
from acp_server.security.sandbox import (
    BackendProbe,
    BackendStatus,
    SandboxRefused,
    bubblewrap,
    discard_session_temp_dir,
    plan_spawn,
    resolve_posture,
    seccomp,
    session_temp_dir,
)
from acp_server.security.sandbox import posture as posture_module
from acp_server.security.sandbox.posture import Backend, log_startup_posture
from acp_server.security.sandbox.spawn import program_dirs
from tests.helpers import echo_config, make_config, write_config
from tests.server.tool_context import make_context


def probe_with(*available: Backend) -> BackendProbe:
    """A machine where only ``available`` (and ``none``) work."""
    return BackendProbe.known(
        {
            name: BackendStatus(
                name,
                name == "none" or name in available,
                (
                    ("ABI 7" if name == "landlock" else f"/usr/bin/{name}")
                    if name in available
                    else f"{name} missing in this test"
                ),
            )
            for name in posture_module.BACKENDS
        }
    )


def risk_config(tmp_path: Path, **risk: Any) -> RiskProfileConfig:
    return make_config(tmp_path, risk=risk).risk_profiles["default"]


def test_sandbox_keys_are_read_from_the_risk_profile(tmp_path: Path) -> None:
    profile = risk_config(
        tmp_path,
        sandbox_enabled=True,
        sandbox_backend="bubblewrap",
        firejail_args=["--x11=none"],
        sandbox_network="deny",
    )
    assert profile.sandbox_enabled is True
    assert profile.sandbox_backend == "bubblewrap"
    assert profile.firejail_args == ("--x11=none",)
    assert profile.sandbox_network == "deny"
    unset = risk_config(tmp_path / "unset")
    assert (unset.sandbox_enabled, unset.sandbox_backend, unset.sandbox_network) == (
        None,
        "auto",
        "allow",
    )


@given(st.text(max_size=20))
def test_only_known_backend_names_are_accepted(name: str) -> None:
    document = echo_config(risk={"sandbox_backend": name})
    with tempfile.TemporaryDirectory() as scratch:
        config_dir = write_config(Path(scratch), document)
        if name in SANDBOX_BACKEND_NAMES:
            loaded = load_config(config_dir, environ={})
            assert loaded.risk_profiles["default"].sandbox_backend == name
        else:
            with pytest.raises(ConfigError, match="sandbox_backend"):
                load_config(config_dir, environ={})


def test_unknown_backend_or_network_mode_exits_2(tmp_path: Path) -> None:
    for key, value in (("sandbox_backend", "docker"), ("sandbox_network", "maybe")):
        config_dir = write_config(tmp_path / key, echo_config(risk={key: value}))
        result = CliRunner().invoke(cli, ["--config-dir", str(config_dir), "acp"])
        assert result.exit_code == 2, result.output
        assert f"risk_profiles.default.{key}" in result.output


def test_auto_takes_landlock_then_bubblewrap() -> None:
    auto = RiskProfileConfig()
    assert resolve_posture(auto, probe_with("landlock", "bubblewrap")).active == "landlock"
    second = resolve_posture(auto, probe_with("bubblewrap"))
    assert second.active == "bubblewrap"
    assert second.describe() == "bubblewrap (workspace rw, system ro, network allowed)"


def test_best_effort_falls_back_to_none_with_the_reasons() -> None:
    fallback = resolve_posture(RiskProfileConfig(), probe_with())
    assert fallback.active == "none"
    assert not fallback.refuses
    assert fallback.reason == (
        "landlock: landlock missing in this test; bubblewrap: bubblewrap missing in this test"
    )
    assert fallback.meta()["reason"] == fallback.reason
    assert fallback.describe().startswith(
        "none (shell commands run unconfined; sandbox unavailable"
    )


@pytest.mark.parametrize(
    "profile",
    [RiskProfileConfig(sandbox_enabled=True), RiskProfileConfig(sandbox_backend="bubblewrap")],
    ids=["enabled-true", "named-backend"],
)
def test_required_sandbox_that_is_unavailable_refuses(profile: RiskProfileConfig) -> None:
    refused = resolve_posture(profile, probe_with())
    assert refused.refuses
    assert refused.meta()["required"] is True
    with pytest.raises(SandboxRefused, match="missing in this test"):
        plan_spawn(
            ["/bin/sh", "-c", "true"],
            posture=refused,
            profile=profile,
            workspace=Path("/"),
            session_id="s",
            env={},
        )


def test_off_and_readonly_postures() -> None:
    off = resolve_posture(RiskProfileConfig(sandbox_enabled=False), probe_with("landlock"))
    assert (off.active, off.requested, off.refuses) == ("none", "off", False)
    assert off.describe() == "none (shell commands run unconfined; sandbox off)"
    readonly = resolve_posture(
        RiskProfileConfig(level="readonly", sandbox_network="deny"), probe_with("landlock")
    )
    assert readonly.describe() == "landlock ABI 7 (workspace ro, system ro, network denied)"
    assert readonly.meta()["landlockAbi"] == "7"


def test_start_up_reports_the_posture_and_warns_once_per_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(posture_module, "system_probe", lambda: probe_with())
    config = make_config(tmp_path)
    with caplog.at_level(logging.INFO):
        log_startup_posture(config, None)
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0].startswith("sandbox: none (shell commands run unconfined")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith("risk profile default: no OS sandbox available")


async def test_shell_tool_refuses_when_the_required_sandbox_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(posture_module, "system_probe", lambda: probe_with())
    profile = RiskProfileConfig(level="full", sandbox_enabled=True, allowed_commands=("*",))
    ctx, _ = make_context(tmp_path, profile=profile)
    with trio.fail_after(10), pytest.raises(ToolError) as refused:
        await ShellTool().run({"command": "touch made.txt"}, ctx)
    assert str(refused.value).startswith(
        "Sandbox error: the risk profile requires an OS sandbox (auto) and none is available"
    )
    assert not (tmp_path / "made.txt").exists()


def test_security_status_lists_backends_and_profiles(tmp_path: Path) -> None:
    document = echo_config(risk={"sandbox_backend": "none"})
    config_dir = write_config(tmp_path, document)
    text = CliRunner().invoke(cli, ["--config-dir", str(config_dir), "security", "status"])
    assert text.exit_code == 0, text.output
    assert "sandbox backends:" in text.output
    assert "default: none (shell commands run unconfined; sandbox off)" in text.output
    assert "abstract Unix sockets (D-Bus, X11, IDE helpers): reachable" in text.output
    as_json = CliRunner().invoke(
        cli, ["--config-dir", str(config_dir), "security", "status", "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    document_out = json.loads(as_json.output)
    assert [b["name"] for b in document_out["backends"]] == list(posture_module.BACKENDS)
    assert all(b["available"] or b["detail"] for b in document_out["backends"])
    assert document_out["riskProfiles"]["default"]["requested"] == "off"
    assert document_out["riskProfiles"]["default"]["abstractUnixSockets"] == "reachable"


def test_program_dirs_never_grant_the_root_the_home_or_the_cwd(tmp_path: Path) -> None:
    tools = tmp_path / "tools" / "bin"
    tools.mkdir(parents=True)
    path = os.pathsep.join(["/", str(Path.home()), ".", "", "relative/bin", str(tools)])
    granted = program_dirs({"PATH": path})
    assert tools in granted
    assert Path("/") not in granted
    assert not any(Path.home().is_relative_to(p) for p in granted)
    assert Path.cwd() not in granted or Path.cwd() == Path(sys.base_prefix)


def test_a_session_temp_dir_is_removed_when_the_session_leaves() -> None:
    path = session_temp_dir("leaving-session")
    (path / "left-behind").mkdir()
    (path / "left-behind" / "file").write_text("x")
    cleanup = discard_session_temp_dir("leaving-session")
    assert cleanup is not None
    cleanup.join(timeout=10)
    assert not path.exists()
    # Nothing to remove the second time, and a session that never had one is fine too.
    assert discard_session_temp_dir("leaving-session") is None
    assert discard_session_temp_dir("never-had-one") is None


@pytest.mark.parametrize("writable", [True, False], ids=["writable", "readonly"])
def test_bubblewrap_mounts_every_root_as_it_mounts_the_workspace(writable: bool) -> None:
    roots = [Path("/srv/work"), Path("/tmp/extra-one"), Path("/data/extra-two")]
    argv = bubblewrap.bwrap_argv(
        "bwrap",
        workspace=roots[0],
        writable_workspace=writable,
        temp_dir=Path("/tmp/session"),
        extra_read_only=(),
        network=True,
        extra_roots=roots[1:],
    )
    mount = "--bind" if writable else "--ro-bind"
    for root in roots:
        at = argv.index(str(root))
        assert argv[at - 1 : at + 2] == [mount, str(root), str(root)]
        # After the tmpfs over /tmp, so a root beneath it is shown, not hidden.
        assert at > argv.index("/tmp")
    assert argv[-3:] == ["--chdir", "/srv/work", "--"]


@pytest.mark.parametrize(
    ("active", "network", "abi", "expected"),
    [
        ("landlock", True, 7, "landlock"),
        ("landlock", False, 6, "landlock"),
        ("landlock", False, 5, "seccomp"),  # Landlock's network rules make no namespace
        ("bubblewrap", True, 7, "landlock"),  # the host's network namespace is shared
        ("bubblewrap", True, 0, "seccomp"),
        ("bubblewrap", False, 0, "network-namespace"),
        ("firejail", True, 7, "reachable"),  # set-user-ID: no no_new_privs, so neither
        ("firejail", False, 0, "network-namespace"),
        ("none", True, 7, "reachable"),
    ],
)
def test_what_keeps_each_backend_from_the_hosts_abstract_sockets(
    active: Backend, network: bool, abi: int, expected: str
) -> None:
    if expected == "seccomp" and seccomp.unix_socket_filter() is None:
        expected = "reachable"  # an architecture the filter does not know
    confinement = posture_module.abstract_socket_confinement(active, network, abi)
    assert confinement == expected
    said = posture_module.ABSTRACT_SOCKETS_SAID[confinement]
    assert said.startswith("reachable" if expected == "reachable" else "out of reach")
