"""The file tools' jail and the shell's OS sandbox grant exactly the same set
(security/grants.py), whatever the roots, forbidden entries and private paths: checked
path by path over a real directory tree, against the Landlock rules the sandbox would add
and the bubblewrap mounts it would make."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from acp_server.config import PrivatePath, RiskProfileConfig
from acp_server.security import PathJail
from acp_server.security.grants import is_within, root_refusal, session_grants
from acp_server.security.sandbox import bubblewrap
from acp_server.security.sandbox.landlock import (
    LandlockRules,
    handled_fs_rights,
    planned_rules,
    rule_targets,
)

TREE: Final = (
    "ws/f.txt", "ws/a/f.txt", "ws/a/x/f.txt", "ws/a/y/f.txt", "ws/b/f.txt", "ws/b/y/f.txt",
    "other/f.txt", "other/a/f.txt", "other/a/x/f.txt", "out/f.txt", "out/a/f.txt",
)  # fmt: skip
EXTRA_ROOTS: Final = ("ws/a/x", "ws/b", "other", "other/a")
FORBIDDEN: Final = ("a", "a/x", "b/y", "b/y/f.txt", "f.txt", "a/y/f.txt")
PRIVATE: Final = ("out", "out/a", "other/a/x", "ws/b/y")


@pytest.fixture(scope="module")
def tree() -> Iterator[Path]:
    """The tree, outside the directories bubblewrap always covers (/tmp among them), so
    that covering the private paths is the sandbox's own doing."""
    base = Path(tempfile.mkdtemp(prefix="zeroclaw-grants-", dir="/var/tmp")).resolve()
    try:
        for relative in TREE:
            path = base / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(relative)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def every_path(base: Path) -> list[Path]:
    paths = {base / relative for relative in TREE}
    for path in list(paths):
        paths.update(parent for parent in path.parents if is_within(parent, base))
    return sorted(paths)


def bubblewrap_view(argv: Sequence[str], path: Path) -> str:
    """``rw``, ``ro`` or ``hidden``: what a command sees at ``path`` under these mounts (the
    last mount covering a path decides; every bind here maps a path onto itself)."""
    seen = "none"
    index = 1
    while index < len(argv) and argv[index] != "--":
        option = argv[index]
        if option in ("--bind", "--ro-bind", "--ro-bind-try"):
            source, target = argv[index + 1], Path(argv[index + 2])
            index += 3
            if is_within(path, target):
                hidden = source == "/dev/null"
                seen = "hidden" if hidden else "rw" if option == "--bind" else "ro"
        elif option in ("--tmpfs", "--dev", "--proc", "--chdir"):
            if option == "--tmpfs" and is_within(path, Path(argv[index + 1])):
                seen = "hidden"
            index += 2
        elif option == "--cap-drop":
            index += 2
        else:
            index += 1
    return seen


def landlock_granted(
    roots: Sequence[Path], denied: Sequence[Path], hidden: Sequence[Path] = ()
) -> list[Path]:
    """What the Landlock rules the sandbox plans for these roots cover (``roots`` given as
    the system's read-only directories when ``hidden`` is)."""
    rules = LandlockRules(
        read_only=tuple(roots) if hidden else (),
        read_write=(),
        devices=(),
        network=True,
        roots=() if hidden else tuple(roots),
        hidden=tuple(hidden),
        denied=tuple(denied),
    )
    return [
        target
        for path, _rights, excluded in planned_rules(rules, handled_fs_rights(7))
        for _fd, target in rule_targets(path, excluded)
    ]


def carved(path: Path, excluded: Sequence[Path]) -> bool:
    """A directory Landlock grants child by child (it holds an excluded path): reachable
    through, but not listed, and nothing is created directly in it."""
    return any(is_within(item, path) and item != path for item in excluded)


@settings(max_examples=150, deadline=None)
@given(
    extra=st.lists(st.sampled_from(EXTRA_ROOTS), unique=True),
    forbidden=st.lists(st.sampled_from(FORBIDDEN), unique=True),
    private=st.lists(st.sampled_from(PRIVATE), unique=True),
)
def test_the_jail_and_both_sandboxes_grant_the_same_paths(
    tree: Path, extra: list[str], forbidden: list[str], private: list[str]
) -> None:
    profile = replace(
        RiskProfileConfig(),
        forbidden_paths=tuple(forbidden),
        private_paths=tuple(PrivatePath(f"private {name}", tree / name) for name in private),
    )
    workspace = tree / "ws"
    jail = PathJail(profile, workspace, [tree / name for name in extra])
    grants = jail.grants
    assert grants == session_grants(profile, workspace, jail.extra_roots)
    landlock = landlock_granted(grants.roots, grants.denied)
    argv = bubblewrap.bwrap_argv(
        "bwrap",
        workspace=workspace,
        extra_roots=grants.roots[1:],
        writable_workspace=True,
        temp_dir=tree / "scratch",
        extra_read_only=(),
        network=True,
        hidden=grants.private,
        denied=grants.denied,
    )
    for path in every_path(tree):
        allowed = jail.is_allowed_path(path)
        assert grants.allows(path) == allowed, path
        by_landlock = any(is_within(path, target) for target in landlock)
        if carved(path, grants.denied):
            assert not by_landlock, path  # stricter than the jail, never looser
        else:
            assert by_landlock == allowed, (path, allowed, landlock)
        if any(is_within(path, root) for root in grants.roots):
            assert (bubblewrap_view(argv, path) == "rw") == allowed, (path, argv)
        elif any(is_within(path, tree / name) for name in private):
            assert bubblewrap_view(argv, path) == "hidden", (path, argv)


def test_private_paths_are_carved_out_of_a_granted_system_directory(tree: Path) -> None:
    private = [tree / "out" / "a", tree / "other" / "a"]
    granted = landlock_granted([tree], (), hidden=private)
    for path in every_path(tree):
        reachable = not any(is_within(path, item) for item in private)
        if not carved(path, private):
            assert any(is_within(path, target) for target in granted) == reachable, path


def test_a_link_in_a_carved_directory_is_not_followed(tree: Path, tmp_path: Path) -> None:
    (tmp_path / "granted").mkdir()
    (tmp_path / "granted" / "secret").mkdir()
    (tmp_path / "granted" / "link").symlink_to(tree)
    granted = landlock_granted([tmp_path / "granted"], (), hidden=[tmp_path / "granted" / "secret"])
    assert granted == []  # the link is skipped, the excluded directory gets nothing


@pytest.mark.parametrize(
    ("root", "reason"),
    [
        ("/", "it is the file system root"),
        ("{tree}", "it contains private config"),
        ("{tree}/ws", "it contains private config"),
        ("{tree}/ws/a", None),
        ("/opt", "it is a forbidden path (forbidden_paths has /opt)"),
        ("/etc", "it contains a forbidden path (forbidden_paths has /etc/zc-forbidden)"),
    ],
)
def test_root_refusal_names_what_a_root_would_grant(
    tree: Path, root: str, reason: str | None
) -> None:
    profile = replace(
        RiskProfileConfig(),
        forbidden_paths=("/opt", "/etc/zc-forbidden", "relative/is/not/a/refusal"),
        private_paths=(PrivatePath("private config", tree / "ws" / "b"),),
    )
    refusal = root_refusal(Path(root.format(tree=tree)), profile)
    assert refusal == reason if reason is None else refusal is not None and reason in refusal
