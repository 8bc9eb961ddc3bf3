"""Connections not yet authenticated: capped so that idle sockets cannot lock anyone out,
while a burst of real clients (a thousand bridges reconnecting after a restart) is queued,
never cut.

A socket is *pending* from the moment it is accepted until it is upgraded with a valid
token or its plain HTTP exchange has ended. While pending it is either

* **quiet**: it has sent nothing of its own yet (no byte of a request head or TLS hello;
  behind a PROXY-protocol proxy, nothing after the proxy's header). A quiet socket is
  **idle**, the only kind ever cut, once it was accepted ``IDLE_AFTER_SECS`` ago and no
  byte waits in the kernel for it either; or
* **speaking**: it has sent something and is mid-handshake (reading its request head,
  being authenticated, upgrading). It is never cut: it ends by finishing its handshake or
  at the request-head deadline (gateway/service.py).

Nothing is cut below the cap of ``max_total`` pending sockets. The accept loop calls
``wait_for_room`` before every ``accept()``; at the cap it cuts one idle socket, the oldest
of an address holding more than ``max_per_peer`` quiet sockets (one address cannot crowd
out the others), else the oldest. With none idle it stops accepting until a pending socket
leaves or a quiet one turns idle: new connections wait in the kernel's listen backlog
instead of being cut. One address (NAT, a proxy without PROXY protocol, a test) may run
any number of handshakes at once; a trusted proxy's sockets are counted under the client
its PROXY header names (``rekey``), never under the proxy's own address.

So idle sockets never use up the file descriptors nor keep out ``/health`` or a client that
sends its request at once, and authenticated WebSockets are never touched. The cost: a
peer trickling partial request heads on ``max_total`` sockets delays (never refuses) other
clients by up to the request-head deadline.
"""

from __future__ import annotations

import fcntl
import logging
import math
import resource
import struct
import termios
from collections import OrderedDict
from typing import Final

import trio

logger = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_CONNECTIONS: Final = 1024
"""Unauthenticated sockets held at once, at most (fewer when file descriptors are scarce):
room for a thousand clients arriving at the same instant, at about 5 KiB each
(bench/gateway_load.py)."""
DEFAULT_MAX_PENDING_PER_PEER: Final = 64
"""Quiet sockets one address may hold before its idle ones are the first cut at the cap."""
PENDING_SHARE_OF_FILE_LIMIT: Final = 4
"""At most a quarter of the open-file limit goes to unauthenticated sockets."""
MIN_PENDING_CONNECTIONS: Final = 16
IDLE_AFTER_SECS: Final = 0.25
"""How long a socket that has sent nothing is spared after ``accept()``: a client writes
its request the moment its ``connect()`` returns, which is about when the kernel queued the
connection, but the gateway may accept it first. (One process opening a thousand sockets
at once may take seconds to write on each: the cap above, not this, keeps such a storm
uncut.) At the cap, an idle-socket flood is cut at ``max_total`` sockets per period."""
UNLIMITED_FILES_TARGET: Final = 1 << 20
"""The soft open-file limit asked for when the hard one is unlimited."""
EVICTIONS_BETWEEN_WARNINGS: Final = 1000
PAUSES_BETWEEN_WARNINGS: Final = 1000
_INT: Final = struct.Struct("i")


def pending_cap_for_file_limit(default: int = DEFAULT_MAX_PENDING_CONNECTIONS) -> int:
    """``default``, lowered to a share of this process's open-file limit when that is small."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return default
    return max(MIN_PENDING_CONNECTIONS, min(default, soft // PENDING_SHARE_OF_FILE_LIMIT))


def raise_open_file_limit(needed: int) -> int:
    """Raise this process's soft open-file limit to its hard limit, log it, and warn when
    even that is below ``needed``; returns the soft limit now in force.

    Every connection holds a descriptor, and many systems start services with a soft limit
    of 1024 (and a far higher hard one) so that programs that never asked for more keep
    ``select()``-sized descriptor numbers; a gateway asks.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_FILES_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:  # macOS caps the soft limit below "unlimited"
            logger.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
        else:
            logger.info("open-file limit raised from %d to %d (the hard limit)", soft, target)
            soft = target
    if soft != resource.RLIM_INFINITY and soft < needed:
        logger.warning(
            "the open-file limit is %d, below the %d descriptors the gateway's connection "
            "caps may need; raise it (systemd: LimitNOFILE=, shell: ulimit -n)",
            soft,
            needed,
        )
    return soft


def bytes_waiting(fd: int) -> int:
    """Bytes received on socket ``fd`` and not read yet (0 for no socket)."""
    if fd < 0:
        return 0
    try:
        return int(_INT.unpack(fcntl.ioctl(fd, termios.FIONREAD, bytes(_INT.size)))[0])
    except OSError:  # closed meanwhile: nothing will come
        return 0


class PendingConnection:
    """One unauthenticated socket; its handler runs inside ``scope``, which a cut cancels.

    ``peer`` is the address its quiet time is counted under; None for a trusted proxy's
    socket until its PROXY header names the client.
    """

    __slots__ = ("accepted_at", "fd", "peer", "scope")

    def __init__(self, peer: str | None, fd: int, accepted_at: float) -> None:
        self.peer = peer
        self.fd = fd
        self.accepted_at = accepted_at
        self.scope = trio.CancelScope()


Quiet = OrderedDict[PendingConnection, None]


class PendingConnections:
    """The pending sockets and the quiet ones among them, oldest first, in all and per
    client address (see the module docstring)."""

    def __init__(
        self, *, max_total: int, max_per_peer: int, idle_after: float = IDLE_AFTER_SECS
    ) -> None:
        self.max_total = max(1, max_total)
        self.max_per_peer = max(1, min(max_per_peer, self.max_total))
        self.idle_after = idle_after
        self._all: set[PendingConnection] = set()
        self._quiet: Quiet = OrderedDict()
        self._quiet_by_peer: dict[str, Quiet] = {}
        self._left = trio.Event()
        self.evicted = 0
        """Idle sockets cut so far."""
        self.pauses = 0
        """Times the accept loop waited because no pending socket was idle."""

    def __len__(self) -> int:
        return len(self._all)

    @property
    def quiet(self) -> int:
        return len(self._quiet)

    def enter(self, peer: str, *, fd: int = -1, cap_per_peer: bool = True) -> PendingConnection:
        """Register a freshly accepted socket (``fd``: its descriptor, to see whether bytes
        are waiting); ``wait_for_room`` made room for it.

        ``cap_per_peer=False`` for a trusted proxy's socket: many clients share its address
        until the PROXY header names each (``rekey``).
        """
        pending = PendingConnection(peer if cap_per_peer else None, fd, trio.current_time())
        self._all.add(pending)
        self._quiet[pending] = None
        if pending.peer is not None:
            self._add_to_peer(pending, pending.peer)
        return pending

    def rekey(self, pending: PendingConnection, peer: str) -> None:
        """Count ``pending``'s quiet time under ``peer`` (the client a proxy named)."""
        if pending not in self._quiet or pending.peer == peer:
            return
        if pending.peer is not None:
            self._remove_from_peer(pending, pending.peer)
        pending.peer = peer
        self._add_to_peer(pending, peer)

    def spoke(self, pending: PendingConnection) -> None:
        """``pending`` has sent its first byte: it is mid-handshake and is never cut."""
        if pending in self._quiet:
            self._remove_quiet(pending)

    def leave(self, pending: PendingConnection) -> None:
        """The socket was authenticated, answered or closed: no longer pending (idempotent)."""
        if pending not in self._all:
            return
        self._all.remove(pending)
        if pending in self._quiet:
            self._remove_quiet(pending)
        self._left.set()
        self._left = trio.Event()

    async def wait_for_room(self) -> None:
        """Return once one more socket may be accepted: below the cap, or at it after an
        idle socket was cut (the oldest of an address past its share, else the oldest).
        With none idle, wait for a pending socket to leave or a quiet one to turn idle;
        meanwhile new connections queue in the kernel's listen backlog."""
        paused = False
        while len(self._all) >= self.max_total:
            idle, idle_at = self._next_to_cut()
            if idle is not None:
                self._evict(idle)
                continue
            if not paused:
                paused = True
                self.pauses += 1
                if self.pauses % PAUSES_BETWEEN_WARNINGS == 1:
                    logger.warning(
                        "unauthenticated connections at the cap (%d), none idle: new "
                        "connections wait in the listen backlog (%d pauses so far)",
                        self.max_total,
                        self.pauses,
                    )
            with trio.move_on_at(idle_at):
                await self._left.wait()

    def _next_to_cut(self) -> tuple[PendingConnection | None, float]:
        """The idle socket to cut first, if any, else when one may turn idle."""
        idle_at = math.inf
        for quiet in self._quiet_by_peer.values():
            if len(quiet) > self.max_per_peer:
                idle, turns_idle_at = self._oldest_idle(quiet)
                if idle is not None:
                    return idle, turns_idle_at
                idle_at = min(idle_at, turns_idle_at)
        idle, turns_idle_at = self._oldest_idle(self._quiet)
        return idle, min(idle_at, turns_idle_at)

    def _oldest_idle(self, quiet: Quiet) -> tuple[PendingConnection | None, float]:
        """The oldest idle socket of ``quiet`` if any, else when the next one may turn idle
        (infinity: none will before something else changes)."""
        now = trio.current_time()
        for pending in quiet:
            turns_idle_at = pending.accepted_at + self.idle_after
            if turns_idle_at > now:
                return None, turns_idle_at  # the younger ones are younger still
            if not bytes_waiting(pending.fd):
                return pending, now
        return None, math.inf

    def _add_to_peer(self, pending: PendingConnection, peer: str) -> None:
        self._quiet_by_peer.setdefault(peer, OrderedDict())[pending] = None

    def _remove_quiet(self, pending: PendingConnection) -> None:
        del self._quiet[pending]
        if pending.peer is not None:
            self._remove_from_peer(pending, pending.peer)

    def _remove_from_peer(self, pending: PendingConnection, peer: str) -> None:
        same_peer = self._quiet_by_peer[peer]
        del same_peer[pending]
        if not same_peer:
            del self._quiet_by_peer[peer]

    def _evict(self, idle: PendingConnection) -> None:
        peer = idle.peer
        crowded = peer is not None and len(self._quiet_by_peer[peer]) > self.max_per_peer
        self.leave(idle)
        idle.scope.cancel()
        self.evicted += 1
        if self.evicted % EVICTIONS_BETWEEN_WARNINGS == 1:
            logger.warning(
                "unauthenticated connections at the cap (%d in all%s): closed the oldest idle "
                "one, from %s (%d closed so far)",
                self.max_total,
                f", over {self.max_per_peer} from {peer}" if crowded else "",
                peer or "a trusted proxy",
                self.evicted,
            )
