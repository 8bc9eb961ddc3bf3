"""The daemon's reading of ``[gateway]``: the rules of acp_core.gateway_contract, as errors
that name the key, and the config-directory order as ``zeroclaw`` applies it."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.config import ConfigError, GatewayConfig, load_config, resolve_config_dir


def gateway(tmp_path: Path, table: str) -> GatewayConfig:
    (tmp_path / "config.toml").write_text(f"[gateway]\n{table}\n")
    return load_config(tmp_path, environ={}).gateway


@pytest.mark.parametrize(
    ("table", "host", "port", "prefix"),
    [
        ("port = 0", "127.0.0.1", 0, ""),
        ('host = "  "', "127.0.0.1", 42617, ""),
        ('host = "[::1]"', "::1", 42617, ""),
        ('path_prefix = "zc"', "127.0.0.1", 42617, "/zc"),
        ('path_prefix = "//zc/"', "127.0.0.1", 42617, "/zc"),
        ('path_prefix = "/"', "127.0.0.1", 42617, ""),
    ],
)
def test_values_are_stored_as_the_contract_normalizes_them(
    tmp_path: Path, table: str, host: str, port: int, prefix: str
) -> None:
    settings = gateway(tmp_path, table)
    assert (settings.host, settings.port, settings.path_prefix) == (host, port, prefix)


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ("port = -1", "gateway.port", "TCP port (0-65535"),
        ('path_prefix = "/a b"', "gateway.path_prefix", "whitespace"),
        ('path_prefix = "/a?x=1"', "gateway.path_prefix", "'?'"),
    ],
)
def test_broken_values_name_the_key(tmp_path: Path, table: str, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        gateway(tmp_path, table)
    assert f"`{key}`" in str(raised.value)
    assert problem in str(raised.value)


def test_a_blank_config_dir_flag_means_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ZEROCLAW_CONFIG_DIR", str(tmp_path / "env"))
    assert resolve_config_dir("  ") == tmp_path / "env"
    assert resolve_config_dir("") == tmp_path / "env"
