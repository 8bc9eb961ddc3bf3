"""Landlock (Linux ≥ 5.13) through its three system calls, with ctypes.

The ruleset is built in the server (``build_ruleset``): creating a ruleset and adding rules
affects no thread. Only ``landlock_restrict_self`` confines, and it confines the calling
thread and what it execs, so it runs in the command's forked child before exec
(``supervisor.apply_child_setup``), never in a server thread (trio reuses its worker
threads).

Rights follow the kernel's ABI version (the ``LANDLOCK_ACCESS_*`` and ``LANDLOCK_SCOPE_*``
constants of the kernel's ``include/uapi/linux/landlock.h``): file-system rights from ABI 1
(refer 2, truncate 3, device ioctl 5), TCP bind/connect from ABI 4, signal and
abstract-Unix-socket scopes from ABI 6. UDP and named Unix sockets are not confined by
any ABI so far.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Final

import msgspec

from acp_server.security.grants import is_within

# System call numbers: 444-446 on every architecture with the unified table.
_SYS_CREATE_RULESET: Final = 444
_SYS_ADD_RULE: Final = 445
_CREATE_RULESET_VERSION: Final = 1 << 0
_RULE_PATH_BENEATH: Final = 1

EXECUTE: Final = 1 << 0
WRITE_FILE: Final = 1 << 1
READ_FILE: Final = 1 << 2
READ_DIR: Final = 1 << 3
REMOVE_DIR: Final = 1 << 4
REMOVE_FILE: Final = 1 << 5
MAKE_CHAR: Final = 1 << 6
MAKE_DIR: Final = 1 << 7
MAKE_REG: Final = 1 << 8
MAKE_SOCK: Final = 1 << 9
MAKE_FIFO: Final = 1 << 10
MAKE_BLOCK: Final = 1 << 11
MAKE_SYM: Final = 1 << 12
REFER: Final = 1 << 13  # ABI 2
TRUNCATE: Final = 1 << 14  # ABI 3
IOCTL_DEV: Final = 1 << 15  # ABI 5
NET_BIND_TCP: Final = 1 << 0  # ABI 4
NET_CONNECT_TCP: Final = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0  # ABI 6
SCOPE_SIGNAL: Final = 1 << 1  # ABI 6
SCOPE_ABI: Final = 6
"""The first ABI with scopes (abstract Unix sockets, signals)."""

_ABI1_FS: Final = (1 << 13) - 1
FILE_RIGHTS: Final = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The only rights a rule on a non-directory may carry."""
READ_RIGHTS: Final = EXECUTE | READ_FILE | READ_DIR


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: object) -> int:
    result: int = _libc().syscall(number, *args)
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled.

    Asked of the kernel itself (``landlock_create_ruleset`` with the version flag), not
    read from ``/sys``: securityfs is often not mounted."""
    if platform.system() != "Linux":
        return 0
    try:
        version = _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):  # pragma: no cover - no libc syscall()
        return 0
    return max(version, 0)


def handled_fs_rights(abi: int) -> int:
    rights = _ABI1_FS
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class LandlockRules(msgspec.Struct, frozen=True):
    """What one command may touch: paths read-only (read and execute) except what is
    ``hidden`` beneath them, the session's roots (read-write when ``roots_writable``) except
    what is ``denied`` beneath them (``add_rule_excluding``), paths read-write, single
    device files read-write, and whether TCP is allowed."""

    read_only: tuple[Path, ...]
    read_write: tuple[Path, ...]
    devices: tuple[Path, ...]
    network: bool
    roots: tuple[Path, ...] = ()
    roots_writable: bool = True
    hidden: tuple[Path, ...] = ()
    denied: tuple[Path, ...] = ()


def _add_fd_rule(ruleset_fd: int, fd: int, access: int, shown: Path) -> None:
    if not stat.S_ISDIR(os.fstat(fd).st_mode):
        access &= FILE_RIGHTS
    attr = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
    if _syscall(_SYS_ADD_RULE, ruleset_fd, _RULE_PATH_BENEATH, ctypes.byref(attr), 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock_add_rule({shown}): {os.strerror(errno)}")


def add_rule_excluding(ruleset_fd: int, path: Path, access: int, excluded: Sequence[Path]) -> None:
    """Grant ``access`` beneath ``path`` (a missing path grants nothing), except beneath
    the ``excluded`` paths inside it (``rule_targets``)."""
    for fd, shown in rule_targets(path, excluded):
        _add_fd_rule(ruleset_fd, fd, access, shown)


def rule_targets(path: Path, excluded: Sequence[Path]) -> Iterator[tuple[int, Path]]:
    """What to grant so that everything beneath ``path`` is granted except beneath the
    ``excluded`` paths: ``path`` itself when none that exists is inside it, else its
    children, child by child, down to each excluded path, which gets nothing. Landlock only
    adds rights, so the directories on the way get no rule of their own: they can be passed
    through but not listed, and (granted read-write) nothing can be created or removed
    directly in them.

    Each item is an ``O_PATH`` descriptor (closed when the next item is asked for) and the
    path it was opened as. Children are opened relative to their parent's descriptor without
    following symbolic links, and a link is skipped (its target is granted or not on its
    own), so swapping a directory for a link during the walk grants nothing."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        real = _opened_path(fd, path) if excluded else path
        # Only what exists is carved out: a granted directory keeps its own rule (entries
        # can be created in it) unless it really holds an excluded path.
        inner = [item for item in excluded if is_within(item, real) and os.path.lexists(item)]
        if real in inner:
            return
        if inner and stat.S_ISDIR(os.fstat(fd).st_mode):
            yield from _children_except(fd, real, inner)
        else:
            yield fd, real
    finally:
        os.close(fd)


def _opened_path(fd: int, path: Path) -> Path:
    """The real path of what ``fd`` (opened as ``path``, links followed) is: one
    ``readlink`` of /proc/self/fd, else a walk resolving each link."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return Path(os.path.realpath(path))


def _children_except(dir_fd: int, directory: Path, inner: list[Path]) -> Iterator[tuple[int, Path]]:
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return
    try:
        names = os.listdir(listing)
    finally:
        os.close(listing)
    for name in names:
        child = directory / name
        below = [item for item in inner if is_within(item, child)]
        if child in below:
            continue  # the excluded path itself
        try:
            fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            continue  # gone meanwhile
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                continue
            if below and stat.S_ISDIR(mode):
                yield from _children_except(fd, child, below)
            else:
                yield fd, child
        finally:
            os.close(fd)


def planned_rules(rules: LandlockRules, fs: int) -> Iterator[tuple[Path, int, tuple[Path, ...]]]:
    """Each path ``rules`` grant, with its rights (within ``fs``, the handled ones) and
    what is excluded beneath it."""
    read = READ_RIGHTS & fs
    for path in rules.read_only:
        yield path, read, (*rules.hidden, *rules.denied)
    for path in rules.roots:
        # A root that is itself a denied path (nested in another root) is still granted.
        denied = tuple(item for item in rules.denied if item != path)
        yield path, fs if rules.roots_writable else read, denied
    for path in rules.read_write:
        yield path, fs, ()
    for path in rules.devices:
        yield path, (READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV) & fs, ()


def build_ruleset(rules: LandlockRules, abi: int) -> int:
    """A Landlock ruleset fd (close-on-exec) with ``rules``; the caller closes it."""
    fs = handled_fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=0, scoped=0)
    size = 8
    if abi >= 4:
        size = 16
        if not rules.network:
            attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    if abi >= SCOPE_ABI:
        size = 24
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    fd = _create_ruleset(attr, size)
    try:
        for path, rights, excluded in planned_rules(rules, fs):
            add_rule_excluding(fd, path, rights, excluded)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create_ruleset(attr: _RulesetAttr, size: int) -> int:
    fd = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if fd < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock_create_ruleset: {os.strerror(errno)}")
    os.set_inheritable(fd, False)
    return fd


def build_scope_ruleset() -> int:
    """A ruleset (fd, close-on-exec; the caller closes it) that handles no file-system or
    network right and only scopes abstract Unix sockets: under it a process can connect to
    the abstract sockets of its own Landlock domain only, not to the host's. ABI >= 6.

    What bubblewrap runs under: it leaves the file system to bubblewrap's mounts (a domain
    that handles no file-system right does not forbid them)."""
    attr = _RulesetAttr(
        handled_access_fs=0, handled_access_net=0, scoped=SCOPE_ABSTRACT_UNIX_SOCKET
    )
    return _create_ruleset(attr, ctypes.sizeof(_RulesetAttr))


def existing(paths: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(path for path in paths if path.exists())
