"""``[gateway] metrics_listen`` and ``[logging] format``: read into the config, and broken
values refused with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.config import ConfigError, load_config
from acp_server.config.observability import parse_listen_address


def _load(tmp_path: Path, text: str) -> object:
    (tmp_path / "config.toml").write_text(text)
    return load_config(tmp_path, environ={})


def test_the_defaults_are_no_metrics_listener_and_human_logs(tmp_path: Path) -> None:
    config = load_config(tmp_path, environ={})
    assert config.gateway.metrics_listen is None
    assert config.log_format == "human"


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
        ("[::1]:9464", ("::1", 9464)),
        ("metrics.internal:9464", ("metrics.internal", 9464)),
    ],
)
def test_metrics_listen_is_host_and_port(
    tmp_path: Path, value: str, address: tuple[str, int]
) -> None:
    (tmp_path / "config.toml").write_text(f'[gateway]\nmetrics_listen = "{value}"\n')
    assert load_config(tmp_path, environ={}).gateway.metrics_listen == address


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("9464", "HOST:PORT"),
        (":9464", "HOST:PORT"),
        ("::1:9464", "brackets"),
        ("127.0.0.1:http", "port must be a number"),
        ("127.0.0.1:70000", "port must be a number"),
    ],
)
def test_a_broken_metrics_listen_names_the_key(tmp_path: Path, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, f'[gateway]\nmetrics_listen = "{value}"\n')
    assert "`gateway.metrics_listen`" in str(raised.value)
    assert problem in str(raised.value)


def test_logging_format_json(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[logging]\nformat = "JSON"\n')
    assert load_config(tmp_path, environ={}).log_format == "json"


def test_an_unknown_logging_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, '[logging]\nformat = "logfmt"\n')
    assert "`logging.format`" in str(raised.value)
    assert "human, json" in str(raised.value)


@given(st.text(max_size=40))
def test_listen_addresses_parse_or_say_why(text: str) -> None:
    try:
        host, port = parse_listen_address(text)
    except ValueError as exc:
        problem = str(exc)
        assert problem, text
        return
    assert host
    assert 0 <= port <= 65535
