"""The file tools' path walk (acp_server/security/beneath.py): from the outermost jail
root, one directory at a time, following no link (tests/server/agent/test_tools_swap_race.py
races the tools themselves)."""

from __future__ import annotations

import errno
import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.security.beneath import (
    lstat_beneath,
    open_beneath,
    opened_directory,
    walk_origin,
)

SECRET = "outside-secret"

_NAME = st.text(alphabet="abcxyz", min_size=1, max_size=3)
_PATHS = st.lists(_NAME, min_size=0, max_size=4).map(lambda names: Path("/", *names))


@given(roots=st.lists(_PATHS, max_size=4), path=_PATHS)
def test_a_walk_starts_at_the_outermost_root_holding_the_path(
    roots: list[Path], path: Path
) -> None:
    start, names = walk_origin(roots, path)
    assert Path(start).joinpath(*names) == path
    holding = [root for root in roots if path == root or root in path.parents]
    if holding:
        assert Path(start) in holding
        assert not any(root in Path(start).parents for root in holding)
    else:
        assert start == "/"


def test_a_link_anywhere_on_the_way_refuses_the_open(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside")
    outside = tmp_path / "outside"
    (outside / "b").mkdir(parents=True)
    (outside / "b" / "f.txt").write_text(SECRET)
    target = root / "a" / "b" / "f.txt"
    fd = open_beneath([root], target)
    assert os.read(fd, 100) == b"inside"
    os.close(fd)
    os.rename(root / "a", root / "a.real")
    (root / "a").symlink_to(outside)
    for attempt in (
        lambda: open_beneath([root], target),
        lambda: lstat_beneath([root], target),
    ):
        with pytest.raises(OSError) as refused:
            attempt()
        assert refused.value.errno == errno.ELOOP
    with pytest.raises(OSError) as refused, opened_directory([root], target.parent):
        pass
    assert refused.value.errno == errno.ELOOP


def test_the_last_name_and_the_root_itself_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text(SECRET)
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(OSError) as refused:
        open_beneath([root], root / "link.txt")
    assert refused.value.errno == errno.ELOOP
    assert lstat_beneath([root], root / "link.txt").st_size < len(str(tmp_path)) + 20
    # A root swapped for a link after the session started is not followed either.
    os.rename(root, tmp_path / "root.real")
    root.symlink_to(tmp_path)
    with pytest.raises(OSError) as swapped:
        open_beneath([root], root / "secret.txt")
    assert swapped.value.errno == errno.ELOOP


def test_a_nested_root_is_reached_from_the_root_around_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "inner").mkdir(parents=True)
    (workspace / "inner" / "f.txt").write_text("inside")
    inner = workspace / "inner"
    assert walk_origin([inner, workspace], inner / "f.txt") == (str(workspace), ("inner", "f.txt"))
    os.rename(inner, workspace / "inner.real")
    inner.symlink_to(tmp_path)
    with pytest.raises(OSError) as refused:
        open_beneath([inner, workspace], inner / "f.txt")
    assert refused.value.errno == errno.ELOOP


def test_creating_parents_follows_no_link(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with opened_directory([root], root / "x" / "y", create=True) as fd:
        os.mkdir("z", dir_fd=fd)
    assert (root / "x" / "y" / "z").is_dir()
    (root / "l").symlink_to(tmp_path)
    with (
        pytest.raises(OSError) as refused,
        opened_directory([root], root / "l" / "new", create=True),
    ):
        pass
    assert refused.value.errno == errno.ELOOP
    assert not (tmp_path / "new").exists()


def test_a_path_outside_every_root_is_walked_from_the_file_system_root(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("lifted jail")
    fd = open_beneath([tmp_path / "elsewhere"], tmp_path / "f.txt")
    try:
        assert os.read(fd, 100) == b"lifted jail"
    finally:
        os.close(fd)
    assert walk_origin([], tmp_path)[1] == PurePosixPath(tmp_path).parts[1:]
