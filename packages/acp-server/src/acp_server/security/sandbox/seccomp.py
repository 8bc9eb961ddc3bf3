"""A seccomp filter that refuses Unix-domain sockets: the fallback that keeps a sandboxed
command away from the host's abstract Unix sockets where Landlock cannot scope them
(its ``LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`` needs ABI 6, Linux 6.12).

A seccomp filter sees system-call arguments, not the memory they point to, so it cannot
tell an abstract address from a path: it refuses ``socket(AF_UNIX, …)`` altogether
(``socketpair``, which has no address, still works). ``io_uring_setup`` is refused too:
io_uring can create and connect sockets without the ``socket`` system call. System calls
of another ABI than the native one (x86's 32-bit and x32 calls, which reach ``socket``
under other numbers) fail with ENOSYS. The program is built from the classic BPF
instructions of the kernel's ``include/uapi/linux/filter.h`` and ``seccomp.h``.
"""

from __future__ import annotations

import errno
import platform
import socket
import struct
import sys
from functools import cache
from typing import Final, NamedTuple

_LOAD_WORD: Final = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_EQUAL: Final = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JUMP_AT_LEAST: Final = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RETURN: Final = 0x06  # BPF_RET | BPF_K
_ALLOW: Final = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO: Final = 0x00050000  # SECCOMP_RET_ERRNO | errno
_OFFSET_NR: Final = 0  # struct seccomp_data
_OFFSET_ARCH: Final = 4
_X32_SYSCALL_BIT: Final = 0x40000000
_IO_URING_SETUP: Final = 425  # the same number on every architecture (unified table)


class _Abi(NamedTuple):
    audit_arch: int
    socket_nr: int
    foreign_from: int | None  # system-call numbers from here on belong to another ABI


_ABIS: Final = {
    "x86_64": _Abi(0xC000003E, 41, _X32_SYSCALL_BIT),
    "aarch64": _Abi(0xC00000B7, 198, None),
}


def _instruction(code: int, k: int, jump_true: int = 0, jump_false: int = 0) -> bytes:
    return struct.pack("HBBI", code, jump_true, jump_false, k)


@cache
def unix_socket_filter() -> bytes | None:
    """The filter program (``struct sock_filter`` array), or None on an architecture this
    module does not know (there the abstract sockets stay reachable, and the posture says
    so)."""
    abi = _ABIS.get(platform.machine())
    if abi is None:
        return None
    # The low 32 bits of args[0] (the address family), wherever the byte order puts them.
    family_offset = 16 if sys.byteorder == "little" else 20
    deny_unix = _instruction(_RETURN, _ERRNO | errno.EACCES)
    deny_foreign = _instruction(_RETURN, _ERRNO | errno.ENOSYS)
    allow = _instruction(_RETURN, _ALLOW)
    # Jumps count instructions to skip; the three returns close the program, in the order
    # allow, deny_unix, deny_foreign. Each check below names its distance to them.
    checks = [
        (_LOAD_WORD, _OFFSET_ARCH, None),
        (_JUMP_EQUAL, abi.audit_arch, ("next", "deny_foreign")),
        (_LOAD_WORD, _OFFSET_NR, None),
    ]
    if abi.foreign_from is not None:
        checks.append((_JUMP_AT_LEAST, abi.foreign_from, ("deny_foreign", "next")))
    checks += [
        (_JUMP_EQUAL, _IO_URING_SETUP, ("deny_unix", "next")),
        (_JUMP_EQUAL, abi.socket_nr, ("next", "allow")),
        (_LOAD_WORD, family_offset, None),
        (_JUMP_EQUAL, socket.AF_UNIX, ("deny_unix", "allow")),
    ]
    targets = {"allow": len(checks), "deny_unix": len(checks) + 1, "deny_foreign": len(checks) + 2}
    program = b""
    for index, (code, k, jumps) in enumerate(checks):
        if jumps is None:
            program += _instruction(code, k)
            continue
        true_skip, false_skip = (
            0 if name == "next" else targets[name] - index - 1 for name in jumps
        )
        program += _instruction(code, k, true_skip, false_skip)
    return program + allow + deny_unix + deny_foreign
