"""``[acp] client_fs`` and ``[acp] client_terminal`` (config/client.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.config import AcpConfig, ConfigError, load_config
from tests.helpers import echo_config, write_config


def _acp(tmp_path: Path, **acp: object) -> AcpConfig:
    document = echo_config()
    document.setdefault("acp", {}).update(acp)
    return load_config(write_config(tmp_path / "cfg", document)).acp


def test_client_offers_default_to_files_auto_and_no_terminal(tmp_path: Path) -> None:
    acp = _acp(tmp_path)
    assert (acp.client_fs, acp.client_terminal) == ("auto", False)


def test_client_offers_are_read_from_the_acp_table(tmp_path: Path) -> None:
    acp = _acp(tmp_path, client_fs="never", client_terminal=True)
    assert (acp.client_fs, acp.client_terminal) == ("never", True)


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("client_fs", "sometimes", 'must be "auto" or "never"'),
        ("client_fs", True, "expected a string"),
        ("client_terminal", "yes", "expected true or false"),
    ],
)
def test_bad_client_offers_name_the_key(
    tmp_path: Path, key: str, value: object, problem: str
) -> None:
    with pytest.raises(ConfigError, match=f"acp.{key}") as raised:
        _acp(tmp_path, **{key: value})
    assert problem in str(raised.value)
