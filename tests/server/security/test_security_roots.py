"""The path jail's extra roots (ACP ``additionalDirectories``): inside any root is inside."""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from acp_server.config import RiskLevel, RiskProfileConfig
from acp_server.security import CommandRisk, PolicyViolation, SecurityPolicy


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    workspace, extra, outside = tmp_path / "ws", tmp_path / "extra", tmp_path / "outside"
    for directory in (workspace, extra / ".keys", outside):
        directory.mkdir(parents=True)
    (extra / "doc.md").write_text("doc\n")
    (workspace / "to-outside").symlink_to(outside)
    return workspace.resolve(), extra.resolve(), outside.resolve()


def test_a_path_in_an_extra_root_resolves_and_one_elsewhere_escapes(
    roots: tuple[Path, Path, Path],
) -> None:
    workspace, extra, outside = roots
    forbid_keys = RiskProfileConfig(forbidden_paths=(str(extra / ".keys"),))
    policy = SecurityPolicy(forbid_keys, workspace)
    with pytest.raises(PolicyViolation, match="escapes workspace directory"):
        policy.resolve_path(str(extra / "doc.md"))
    policy.jail.add_roots([extra])
    assert policy.resolve_path(str(extra / "doc.md")) == extra / "doc.md"
    assert policy.resolve_path(str(extra / "new.md"), for_write=True) == extra / "new.md"
    # Relative paths stay relative to the cwd; links out of every root still escape.
    assert policy.resolve_path("doc.md") == workspace / "doc.md"
    with pytest.raises(PolicyViolation, match="escapes workspace directory"):
        policy.resolve_path("../outside/x")
    with pytest.raises(PolicyViolation, match="a symbolic link resolves it"):
        policy.resolve_path("to-outside/x")
    # forbidden_paths inside an extra root still apply.
    with pytest.raises(PolicyViolation, match="forbidden by security policy"):
        policy.resolve_path(str(extra / ".keys" / "id"))
    assert not policy.is_allowed_path(outside)


def test_a_read_only_profile_keeps_extra_roots_read_only(roots: tuple[Path, Path, Path]) -> None:
    workspace, extra, _ = roots
    policy = SecurityPolicy(RiskProfileConfig(level="readonly"), workspace)
    policy.jail.add_roots([extra])
    assert policy.resolve_path(str(extra / "doc.md")) == extra / "doc.md"
    with pytest.raises(PolicyViolation, match="read-only"):
        policy.resolve_path(str(extra / "doc.md"), for_write=True)


@pytest.mark.parametrize("level", ["readonly", "supervised", "full"])
def test_a_policy_at_another_level_keeps_its_roots_and_its_profile(
    roots: tuple[Path, Path, Path], level: RiskLevel
) -> None:
    workspace, extra, _ = roots
    profile = RiskProfileConfig(
        forbidden_paths=(str(extra / ".keys"),), auto_approve=("file_read",), level="full"
    )
    policy = SecurityPolicy(profile, workspace)
    policy.jail.add_roots([extra])
    changed = policy.at_level(level)
    assert changed.profile == replace(profile, level=level)
    assert (changed.workspace, changed.jail.extra_roots) == (workspace, (extra,))
    assert changed.resolve_path(str(extra / "doc.md")) == extra / "doc.md"
    with pytest.raises(PolicyViolation, match="forbidden"):
        changed.resolve_path(str(extra / ".keys" / "id"))


def test_a_shell_redirect_into_an_extra_root_is_medium_not_high(
    roots: tuple[Path, Path, Path],
) -> None:
    workspace, extra, outside = roots
    profile = RiskProfileConfig(level="full", workspace_only=False, forbidden_paths=())
    policy = SecurityPolicy(profile, workspace)
    policy.jail.add_roots([extra])
    inside = policy.assess_command(f"echo hi > {extra / 'out.txt'}")
    elsewhere = policy.assess_command(f"echo hi > {outside / 'out.txt'}")
    assert (inside.risk, elsewhere.risk) == (CommandRisk.MEDIUM, CommandRisk.HIGH)


def test_extra_roots_are_stored_and_read_back(tmp_path: Path) -> None:
    from acp_server.storage.settings import decode_directories
    from acp_server.storage.sqlite import SessionStore

    store = SessionStore.open(tmp_path / "sessions.db")
    try:
        store.create_session("s-1", "echo", str(tmp_path))
        assert store.additional_dirs("s-1") == ()
        assert store.set_additional_dirs("s-1", ["/a", "/b"])
        assert store.additional_dirs("s-1") == ("/a", "/b")
        assert store.set_additional_dirs("s-1", [])
        assert store.additional_dirs("s-1") == ()
        assert not store.set_additional_dirs("missing", ["/a"])
        assert store.additional_dirs("missing") == ()
    finally:
        store.close()
    assert decode_directories('{"not": "a list"}') == ()
    assert decode_directories("not json") == ()
    assert decode_directories('["/a", 3]') == ("/a",)
