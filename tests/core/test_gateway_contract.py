"""The gateway/bridge contract: config-dir order, [gateway] rules, URLs and tokens."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from acp_core.gateway_contract import (
    MAX_PRINCIPAL_CHARS,
    UNAUTHORIZED_BODY,
    GatewayAddress,
    bearer_value,
    default_principal,
    format_token,
    normalize_host,
    normalize_path_prefix,
    path_prefix_problem,
    port_problem,
    principal_problem,
    resolve_config_dir,
    token_from_bearer,
    url_host,
)

HOME = Path("/home/u")
CWD = Path("/work")
PLATFORM_DIR = Path("/platform/zeroclaw")


def resolve(
    flag: str | None, environ: dict[str, str] | None = None, *, legacy: bool = False
) -> Path:
    return resolve_config_dir(
        flag,
        environ=environ or {},
        home=HOME,
        cwd=CWD,
        is_dir=lambda path: legacy and path == HOME / ".zeroclaw",
        platform_config_dir=lambda: PLATFORM_DIR,
    )


class TestConfigDir:
    def test_flag_then_env_then_legacy_then_platform(self) -> None:
        env = {"ZEROCLAW_CONFIG_DIR": "/env"}
        assert resolve("/flag", env, legacy=True) == Path("/flag")
        assert resolve(None, env, legacy=True) == Path("/env")
        assert resolve(None, {}, legacy=True) == HOME / ".zeroclaw"
        assert resolve(None, {}) == PLATFORM_DIR

    @pytest.mark.parametrize("blank", ["", "  ", "\t"])
    def test_blank_flag_and_blank_env_mean_not_given(self, blank: str) -> None:
        assert resolve(blank, {"ZEROCLAW_CONFIG_DIR": "/env"}) == Path("/env")
        assert resolve(blank, {"ZEROCLAW_CONFIG_DIR": blank}) == PLATFORM_DIR

    def test_tilde_and_relative_paths(self) -> None:
        assert resolve("~") == HOME
        assert resolve("~/zc") == HOME / "zc"
        assert resolve(" rel/dir ") == CWD / "rel" / "dir"
        assert resolve(None, {"ZEROCLAW_CONFIG_DIR": "~/e"}) == HOME / "e"


class TestGatewayTable:
    @pytest.mark.parametrize(
        ("raw", "host"),
        [("  gw.example ", "gw.example"), ("", "127.0.0.1"), (" ", "127.0.0.1"), ("[::1]", "::1")],
    )
    def test_host(self, raw: str, host: str) -> None:
        assert normalize_host(raw) == host

    def test_port_0_is_for_listening_only(self) -> None:
        assert port_problem(0, "listen") is None
        problem = port_problem(0, "connect")
        assert problem is not None
        assert problem.startswith("is 0")
        assert "--url" in problem

    @pytest.mark.parametrize("port", [-1, 65536, 70000])
    def test_ports_out_of_range(self, port: int) -> None:
        assert "TCP port (0-65535" in (port_problem(port, "listen") or "")
        assert "between 1 and 65535" in (port_problem(port, "connect") or "")

    @pytest.mark.parametrize("port", [1, 42617, 65535])
    def test_ports_in_range(self, port: int) -> None:
        assert port_problem(port, "listen") is None
        assert port_problem(port, "connect") is None

    @pytest.mark.parametrize(
        ("raw", "prefix"),
        [
            ("", ""),
            ("/", ""),
            (" /x/ ", "/x"),
            ("zc", "/zc"),
            ("/zc/", "/zc"),
            ("//zc", "/zc"),
            ("/a/b//", "/a/b"),
            ("/a//b", "/a/b"),
        ],
    )
    def test_prefix_normalization(self, raw: str, prefix: str) -> None:
        assert path_prefix_problem(raw) is None
        assert normalize_path_prefix(raw) == prefix

    @pytest.mark.parametrize("raw", ["/a b", "/a?b", "/a#b", "/./x", "/x/..", "/é", "/a\x00"])
    def test_prefixes_a_url_cannot_carry(self, raw: str) -> None:
        assert path_prefix_problem(raw) is not None


class TestUrls:
    @pytest.mark.parametrize(
        ("host", "expected"),
        [
            ("127.0.0.1", "127.0.0.1"),
            ("::", "[::]"),
            ("2001:db8::1", "[2001:db8::1]"),
            ("fe80::1%eth0", "[fe80::1%25eth0]"),
            ("[::1]", "[::1]"),
        ],
    )
    def test_url_host(self, host: str, expected: str) -> None:
        assert url_host(host) == expected

    def test_routes_and_schemes(self) -> None:
        address = GatewayAddress("::1", 9000, "/zc", tls=False)
        assert address.acp_url == "ws://[::1]:9000/zc/acp"
        assert address.url("/pair") == "http://[::1]:9000/zc/pair"
        secure = GatewayAddress(tls=True)
        assert secure.acp_url == "wss://127.0.0.1:42617/acp"
        assert secure.url("/pair/code") == "https://127.0.0.1:42617/pair/code"


_segment = st.text(
    alphabet=st.characters(codec="ascii", categories=("L", "N"), include_characters="-_.~%"),
    min_size=1,
    max_size=8,
).filter(lambda segment: segment not in (".", ".."))
_raw_prefix = st.lists(_segment, max_size=4).flatmap(
    lambda segments: st.tuples(
        st.just(segments),
        st.lists(
            st.sampled_from(["/", "//"]), min_size=len(segments) + 1, max_size=len(segments) + 1
        ),
        st.sampled_from(["", " "]),
    )
)
_ipv4 = st.ip_addresses(v=4).map(str)
_ipv6 = st.ip_addresses(v=6).map(str)
_hostname = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}\Z")


def _join(parts: tuple[list[str], list[str], str]) -> str:
    segments, slashes, pad = parts
    text = "".join(slash + segment for slash, segment in zip(slashes, segments, strict=False))
    return pad + text + slashes[-1] + pad


@given(_raw_prefix.map(_join))
def test_prefix_normalization_is_idempotent_and_canonical(raw: str) -> None:
    assert path_prefix_problem(raw) is None
    prefix = normalize_path_prefix(raw)
    assert normalize_path_prefix(prefix) == prefix
    assert prefix == "" or (prefix.startswith("/") and not prefix.endswith("/"))
    assert "//" not in prefix
    # A prefix without its leading slash (or with extra slashes) means the same prefix.
    assert normalize_path_prefix(prefix.lstrip("/")) == prefix
    assert normalize_path_prefix(f"//{prefix}//") == prefix


@given(
    host=st.one_of(_ipv4, _ipv6, _hostname),
    port=st.integers(1, 65535),
    raw_prefix=_raw_prefix.map(_join),
    tls=st.booleans(),
    path=st.sampled_from(["/acp", "/pair", "/pair/code", "/health"]),
)
def test_urls_parse_back_to_their_parts(
    host: str, port: int, raw_prefix: str, tls: bool, path: str
) -> None:
    address = GatewayAddress(normalize_host(host), port, normalize_path_prefix(raw_prefix), tls)
    for websocket in (False, True):
        parts = urllib.parse.urlsplit(address.url(path, websocket=websocket))
        assert parts.scheme == ("ws" if websocket else "http") + ("s" if tls else "")
        assert parts.hostname == host.lower()
        assert parts.port == port
        assert parts.path == address.path_prefix + path
        assert (parts.query, parts.fragment) == ("", "")


@given(st.text(alphabet=st.characters(codec="ascii", categories=("L", "N", "P")), min_size=1))
def test_bearer_value_round_trips(token: str) -> None:
    assume(token.strip() == token and " " not in token)
    assert token_from_bearer(bearer_value(token)) == token
    assert token_from_bearer(bearer_value(token).lower()) == token.lower()


@pytest.mark.parametrize("value", ["", "Bearer", "Bearer   ", "Basic abc", "bearerabc"])
def test_not_a_bearer_value(value: str) -> None:
    assert token_from_bearer(value) is None


def test_token_shape_and_401_text() -> None:
    assert format_token("ab" * 32) == "zc_" + "ab" * 32
    assert UNAUTHORIZED_BODY.startswith("Unauthorized - provide Authorization header")


def test_importing_the_contract_loads_no_io_modules() -> None:
    forbidden = ("trio", "asyncio", "socket", "sqlite3", "subprocess", "threading", "logging")
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import acp_core.gateway_contract\n"
        "loaded = set(sys.modules) - before\n"
        f"print(json.dumps(sorted(n for n in loaded if n.split('.')[0] in {forbidden!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []


# ------------------------------------------------------------------ principals


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("alice", None),
        ("ci-runner.2@corp+x", None),
        ("A" * MAX_PRINCIPAL_CHARS, None),
        ("", "cannot be empty"),
        ("A" * (MAX_PRINCIPAL_CHARS + 1), "at most"),
        ("-alice", "starts with a letter or a digit"),
        ("bob smith", "only letters"),
        ("bob\nINFO forged log line", "only letters"),
        ("bob/../x", "only letters"),
        ("élodie", "starts with a letter or a digit"),
    ],
)
def test_principal_names_are_safe_in_headers_logs_and_tables(
    name: str, problem: str | None
) -> None:
    found = principal_problem(name)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


@given(st.text(max_size=200))
def test_any_host_name_gives_a_valid_default_principal(host: str) -> None:
    assert principal_problem(default_principal(host)) is None


def test_the_default_principal_is_the_host_names_first_label() -> None:
    assert default_principal("dev-box.corp.example") == "dev-box"
    assert default_principal("  ") == "client"
    assert default_principal("__") == "client"
