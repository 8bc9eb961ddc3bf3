"""Config directory resolution, [gateway] parsing and URL building."""

from __future__ import annotations

from pathlib import Path

import platformdirs
import pytest

from acp_bridge.config import (
    CONFIG_NOT_FOUND_MESSAGE,
    GatewayTarget,
    add_agent_query,
    check_ws_url,
    http_base_for,
    load_gateway_target,
    parse_gateway_target,
    resolve_config_dir,
)
from acp_bridge.errors import BridgeExit, ExitCode


def gateway(text: str) -> GatewayTarget:
    return parse_gateway_target(text, source="config.toml")


def test_defaults_match_the_daemon() -> None:
    config = gateway("schema_version = 3\n")
    assert config == GatewayTarget("127.0.0.1", 42617, "", True, False)
    assert config.ws_url == "ws://127.0.0.1:42617/acp"


@pytest.mark.parametrize(
    ("table", "url"),
    [
        ('host = "::1"\nport = 9000', "ws://[::1]:9000/acp"),
        ('host = "[::1]"\nport = 9000', "ws://[::1]:9000/acp"),
        ('host = "fe80::1%eth0"', "ws://[fe80::1%25eth0]:42617/acp"),
        ('host = "  gw.example  "', "ws://gw.example:42617/acp"),
        ('host = ""', "ws://127.0.0.1:42617/acp"),
        ('path_prefix = "/zc/"', "ws://127.0.0.1:42617/zc/acp"),
        ('path_prefix = "zc"', "ws://127.0.0.1:42617/zc/acp"),
        ('path_prefix = "/"', "ws://127.0.0.1:42617/acp"),
        ('path_prefix = "/a/b//"', "ws://127.0.0.1:42617/a/b/acp"),
        ("[gateway.tls]\nenabled = true", "wss://127.0.0.1:42617/acp"),
        ("[gateway.tls]\nenabled = false", "ws://127.0.0.1:42617/acp"),
    ],
)
def test_url_is_built_from_the_gateway_table(table: str, url: str) -> None:
    assert gateway(f"[gateway]\n{table}\n").ws_url == url


def test_only_the_gateway_table_is_read_and_a_bom_is_ignored() -> None:
    text = '\ufeff[agents.x]\nport = "not ours"\n[gateway]\nrequire_pairing = false\n'
    assert gateway(text) == GatewayTarget(require_pairing=False)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[gateway\n", "is not valid TOML"),
        ('[gateway]\nport = "42617"', "[gateway].port must be an integer"),
        ("[gateway]\nport = 70000", "[gateway].port must be an integer between 1 and 65535"),
        ("[gateway]\nport = true", "[gateway].port"),
        ('[gateway]\nrequire_pairing = "yes"', "[gateway].require_pairing must be true or false"),
        ("[gateway]\nhost = 1", "[gateway].host must be a string"),
        ('[gateway]\ntls = "on"', "[gateway].tls must be a table"),
        ('[gateway.tls]\nenabled = "on"', "[gateway.tls].enabled must be true or false"),
        ('gateway = "x"', "[gateway] must be a table"),
    ],
)
def test_bad_gateway_settings_are_usage_errors(text: str, says: str) -> None:
    with pytest.raises(BridgeExit) as caught:
        gateway(text)
    assert caught.value.code is ExitCode.USAGE
    assert says in caught.value.message
    assert "config.toml" in caught.value.message


def test_missing_config_is_exit_1_with_zeroclaw_message(tmp_path: Path) -> None:
    with pytest.raises(BridgeExit) as caught:
        load_gateway_target(tmp_path)
    assert caught.value.code is ExitCode.CONNECTION
    assert caught.value.message.startswith(CONFIG_NOT_FOUND_MESSAGE)
    assert str(tmp_path / "config.toml") in caught.value.message


def test_missing_config_is_fine_when_the_url_is_given(tmp_path: Path) -> None:
    assert load_gateway_target(tmp_path, required=False) == GatewayTarget()


def test_config_file_is_read_from_the_directory(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[gateway]\nport = 1234\n")
    assert load_gateway_target(tmp_path).port == 1234
    (tmp_path / "config.toml").write_bytes(b"[gateway]\nhost = '\xff'\n")
    with pytest.raises(BridgeExit) as caught:
        load_gateway_target(tmp_path)
    assert caught.value.code is ExitCode.USAGE
    assert "not UTF-8" in caught.value.message


class TestConfigDirResolution:
    def test_flag_wins(self, tmp_path: Path) -> None:
        environ = {"ZEROCLAW_CONFIG_DIR": str(tmp_path / "env")}
        (tmp_path / ".zeroclaw").mkdir()
        assert resolve_config_dir(str(tmp_path / "flag"), environ, tmp_path) == tmp_path / "flag"

    def test_env_comes_next(self, tmp_path: Path) -> None:
        (tmp_path / ".zeroclaw").mkdir()
        environ = {"ZEROCLAW_CONFIG_DIR": f"  {tmp_path / 'env'} "}
        assert resolve_config_dir(None, environ, tmp_path) == tmp_path / "env"

    def test_home_dot_zeroclaw_when_it_exists(self, tmp_path: Path) -> None:
        (tmp_path / ".zeroclaw").mkdir()
        environ = {"ZEROCLAW_CONFIG_DIR": "  "}
        assert resolve_config_dir(None, environ, tmp_path) == tmp_path / ".zeroclaw"

    def test_platform_dir_last(self, tmp_path: Path) -> None:
        expected = Path(platformdirs.user_config_dir("zeroclaw"))
        assert resolve_config_dir(None, {}, tmp_path) == expected

    def test_tilde_is_expanded(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("HOME", str(tmp_path))
        assert resolve_config_dir("~/zc", {}, tmp_path) == tmp_path / "zc"


@pytest.mark.parametrize(
    ("url", "agent", "expected"),
    [
        ("ws://h:1/acp", "coder", "ws://h:1/acp?agent=coder"),
        ("ws://h:1/acp", "my agent/é&x", "ws://h:1/acp?agent=my%20agent%2F%C3%A9%26x"),
        ("ws://h:1/acp?x=1", "a", "ws://h:1/acp?x=1&agent=a"),
        ("ws://[::1]:1/zc/acp", "a", "ws://[::1]:1/zc/acp?agent=a"),
    ],
)
def test_agent_alias_is_added_url_encoded(url: str, agent: str, expected: str) -> None:
    assert add_agent_query(url, agent) == expected


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("ws://127.0.0.1:42617/acp", "http://127.0.0.1:42617"),
        ("wss://gw:443/zc/acp?agent=a", "https://gw:443/zc"),
        ("ws://[::1]:9/acp/", "http://[::1]:9"),
    ],
)
def test_pairing_endpoints_live_next_to_acp(url: str, base: str) -> None:
    assert http_base_for(url) == base


@pytest.mark.parametrize("url", ["http://h/acp", "ws:///acp", "acp", "ws://h:notaport/acp"])
def test_url_flag_must_be_a_websocket_url(url: str) -> None:
    with pytest.raises(BridgeExit) as caught:
        check_ws_url(url)
    assert caught.value.code is ExitCode.USAGE


def test_url_flag_accepts_ws_and_wss() -> None:
    assert check_ws_url("wss://gw.example/acp") == "wss://gw.example/acp"


def test_a_blank_flag_means_not_given(tmp_path: Path) -> None:
    environ = {"ZEROCLAW_CONFIG_DIR": str(tmp_path / "env")}
    assert resolve_config_dir("  ", environ, tmp_path) == tmp_path / "env"


def test_port_0_is_refused_with_advice_unless_the_url_is_given(tmp_path: Path) -> None:
    with pytest.raises(BridgeExit) as caught:
        gateway("[gateway]\nport = 0\n")
    assert caught.value.code is ExitCode.USAGE
    assert "[gateway].port is 0" in caught.value.message
    assert "--url" in caught.value.message
    (tmp_path / "config.toml").write_text("[gateway]\nport = 0\nrequire_pairing = false\n")
    assert load_gateway_target(tmp_path, required=False).require_pairing is False


@pytest.mark.parametrize("prefix", ["/a b", "/a?b", "/zc/../x", "/é"])
def test_a_prefix_no_url_can_carry_is_a_usage_error(prefix: str) -> None:
    with pytest.raises(BridgeExit) as caught:
        gateway(f'[gateway]\npath_prefix = "{prefix}"\n')
    assert caught.value.code is ExitCode.USAGE
    assert "[gateway].path_prefix must" in caught.value.message
