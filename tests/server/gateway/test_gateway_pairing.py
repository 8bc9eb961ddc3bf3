"""Pairing state machine and the atomic config.toml rewrite."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_server.gateway.admin import AdminSecret, read_admin_secret
from acp_server.gateway.pairing import (
    ConfigRewriteError,
    PairingGuard,
    generate_token,
    persist_paired_tokens,
)
from acp_server.security.pairing import (
    DEFAULT_PAIR_LOCKOUT_SECS,
    PairAccepted,
    PairRejected,
    generate_pairing_code,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guard(clock: FakeClock, *, per_minute: int = 100) -> PairingGuard:
    return PairingGuard(clock=clock, rate_limit_per_minute=per_minute)


def test_codes_and_tokens_have_the_documented_shape() -> None:
    assert re.fullmatch(r"\d{6}", generate_pairing_code())
    assert re.fullmatch(r"zc_[0-9a-f]{64}", generate_token())
    assert generate_token() != generate_token()


def test_right_code_pairs_once() -> None:
    state = guard(FakeClock())
    code = state.issue_code()
    assert state.attempt(code) == PairAccepted()
    assert state.code is None
    again = state.attempt(code)
    assert isinstance(again, PairRejected)
    assert again.status == 403


def test_wrong_code_is_403_and_missing_is_400() -> None:
    state = guard(FakeClock())
    code = state.issue_code()
    wrong = "000000" if code != "000000" else "111111"
    assert state.attempt(wrong) == PairRejected(403, "Invalid pairing code")
    missing = state.attempt(None)
    assert isinstance(missing, PairRejected)
    assert missing.status == 400


def test_five_failures_lock_out_even_the_right_code_until_the_lockout_ends() -> None:
    clock = FakeClock()
    state = guard(clock)
    code = state.issue_code()
    outcomes = [state.attempt("not-it") for _ in range(5)]
    assert [o.status for o in outcomes if isinstance(o, PairRejected)] == [403] * 4 + [429]
    locked = state.attempt(code)
    assert isinstance(locked, PairRejected)
    assert locked.status == 429
    assert locked.retry_after is not None
    assert 0 < locked.retry_after <= DEFAULT_PAIR_LOCKOUT_SECS
    clock.now += DEFAULT_PAIR_LOCKOUT_SECS
    assert state.attempt(code) == PairAccepted()


def test_a_new_code_lifts_the_lockout() -> None:
    state = guard(FakeClock())
    state.issue_code()
    for _ in range(5):
        state.attempt("nope")
    fresh = state.issue_code()
    assert state.attempt(fresh) == PairAccepted()


def test_per_minute_rate_limit_with_retry_after() -> None:
    clock = FakeClock()
    state = guard(clock, per_minute=3)
    code = state.issue_code()
    for _ in range(2):
        state.attempt("bad")
        clock.now += 1
    state.attempt("bad")
    throttled = state.attempt(code)
    assert isinstance(throttled, PairRejected)
    assert throttled.status == 429
    assert throttled.retry_after == 58  # the first attempt leaves the window 60 s after it
    clock.now += 58
    assert state.attempt(code) == PairAccepted()


CONFIG = """\
schema_version = 3
workspace_dir = "/srv/zc"

[acp]
default_agent = "alpha"

[gateway]
port = 4000
allowed_origins = ["https://ide.example.com"]

[agents.alpha]
model_provider = "echo.default"
"""


def test_rewrite_changes_only_paired_tokens(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text(CONFIG)
    os.chmod(config_file, 0o600)
    before = tomllib.loads(CONFIG)
    persist_paired_tokens(config_file, ["a" * 64, "b" * 64])
    after = tomllib.loads(config_file.read_text())
    assert after["gateway"].pop("paired_tokens") == ["a" * 64, "b" * 64]
    assert after == before
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]  # no temp file left


ANNOTATED = """\
# ZeroClaw config for the build box: ask ops before changing the gateway.
schema_version = 3

[gateway]
port = 4000 # opened in the firewall
# Paired clients (digests only):
paired_tokens = []
allowed_origins = ["https://ide.example.com"]   # the team IDE

# Agents below.
[agents.alpha]
model_provider = "echo.default"
"""


def test_rewrite_keeps_comments_and_layout(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text(ANNOTATED)
    persist_paired_tokens(config_file, ["a" * 64])
    assert config_file.read_text() == ANNOTATED.replace(
        "paired_tokens = []", f'paired_tokens = ["{"a" * 64}"]'
    )
    persist_paired_tokens(config_file, [])
    assert config_file.read_text() == ANNOTATED


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layout=st.sampled_from([ANNOTATED, CONFIG, "# only a comment\n", "gateway = { port = 1 }\n"]),
    digests=st.lists(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64), max_size=4),
)
def test_rewrite_round_trip_changes_nothing_but_the_tokens(
    tmp_path: Path, layout: str, digests: list[str]
) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text(layout)
    before = tomllib.loads(layout)
    persist_paired_tokens(config_file, digests)
    text = config_file.read_text()
    after = tomllib.loads(text)
    assert after["gateway"].pop("paired_tokens") == digests
    before.setdefault("gateway", {}).pop("paired_tokens", None)
    assert after == before
    # Every comment line the admin wrote is still there, in order.
    comments = [line for line in layout.splitlines() if line.lstrip().startswith("#")]
    assert [line for line in text.splitlines() if line.lstrip().startswith("#")] == comments


def test_rewrite_refuses_a_gateway_that_is_not_a_table(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("[[gateway]]\nport = 1\n")
    with pytest.raises(ConfigRewriteError, match="not a table"):
        persist_paired_tokens(config_file, ["d" * 64])
    assert config_file.read_text() == "[[gateway]]\nport = 1\n"


def test_rewrite_follows_a_symlinked_config_and_keeps_the_link(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real_file = dotfiles / "zeroclaw.toml"
    real_file.write_text(CONFIG)
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    link = config_dir / "config.toml"
    link.symlink_to(real_file)
    persist_paired_tokens(link, ["e" * 64])
    assert link.is_symlink()
    assert link.resolve() == real_file
    assert tomllib.loads(real_file.read_text())["gateway"]["paired_tokens"] == ["e" * 64]
    assert [p.name for p in config_dir.iterdir()] == ["config.toml"]
    assert [p.name for p in dotfiles.iterdir()] == ["zeroclaw.toml"]  # no temp file left


def test_rewrite_adds_a_gateway_table_and_can_empty_it(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("schema_version = 3\n[acp]\nmax_sessions = 4\n")
    persist_paired_tokens(config_file, ["c" * 64])
    assert tomllib.loads(config_file.read_text())["gateway"] == {"paired_tokens": ["c" * 64]}
    persist_paired_tokens(config_file, [])
    document = tomllib.loads(config_file.read_text())
    assert document["gateway"] == {"paired_tokens": []}
    assert document["acp"] == {"max_sessions": 4}


def test_rewrite_refuses_a_broken_file_and_leaves_it_alone(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("[gateway\nport = 1\n")
    with pytest.raises(ConfigRewriteError, match="not valid TOML"):
        persist_paired_tokens(config_file, ["d" * 64])
    assert config_file.read_text() == "[gateway\nport = 1\n"


def test_rewrite_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigRewriteError, match="cannot read"):
        persist_paired_tokens(tmp_path / "config.toml", [])


def test_admin_secret_is_private_matched_and_removed_only_if_ours(tmp_path: Path) -> None:
    config_dir = tmp_path / "new-dir"
    first = AdminSecret.create(config_dir)
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    assert read_admin_secret(config_dir) == first.value
    assert first.matches(first.value)
    assert not first.matches(None)
    assert not first.matches(first.value[:-1] + "x")
    second = AdminSecret.create(config_dir)  # another gateway on the same config dir
    first.remove()
    assert read_admin_secret(config_dir) == second.value
    second.remove()
    assert read_admin_secret(config_dir) is None
