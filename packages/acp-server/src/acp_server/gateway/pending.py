"""Connections not yet authenticated, capped so idle sockets cannot lock everyone out.

A socket counts as pending from the moment it is accepted until it is either upgraded to an
authenticated WebSocket or its plain HTTP exchange has ended. Pending sockets are capped in
total and per peer address; when a new one would pass a cap, the oldest pending one (of that
peer, or overall) is cut. So a few hundred idle sockets never use up the process's file
descriptors, authenticated WebSockets are never touched, and a client that sends its request
at once (``/health``, a bridge's upgrade) is served however many idle sockets are open.
"""

from __future__ import annotations

import logging
import resource
from collections import OrderedDict
from typing import Final

import trio

logger = logging.getLogger(__name__)

DEFAULT_MAX_PENDING_CONNECTIONS: Final = 256
"""Unauthenticated sockets held at once, at most (fewer when file descriptors are scarce)."""
DEFAULT_MAX_PENDING_PER_PEER: Final = 64
PENDING_SHARE_OF_FILE_LIMIT: Final = 4
"""At most a quarter of the open-file limit goes to unauthenticated sockets."""
MIN_PENDING_CONNECTIONS: Final = 16
EVICTIONS_BETWEEN_WARNINGS: Final = 1000


def pending_cap_for_file_limit(default: int = DEFAULT_MAX_PENDING_CONNECTIONS) -> int:
    """``default``, lowered to a share of this process's open-file limit when that is small."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return default
    return max(MIN_PENDING_CONNECTIONS, min(default, soft // PENDING_SHARE_OF_FILE_LIMIT))


class PendingConnection:
    """One unauthenticated socket; its handler runs inside ``scope``, which a cut cancels."""

    __slots__ = ("peer", "scope")

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.scope = trio.CancelScope()


class PendingConnections:
    """The pending sockets, oldest first, in total and per peer (see the module docstring)."""

    def __init__(self, *, max_total: int, max_per_peer: int) -> None:
        self.max_total = max(1, max_total)
        self.max_per_peer = max(1, min(max_per_peer, self.max_total))
        self._all: OrderedDict[PendingConnection, None] = OrderedDict()
        self._by_peer: dict[str, OrderedDict[PendingConnection, None]] = {}
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._all)

    def enter(self, peer: str, *, cap_per_peer: bool = True) -> PendingConnection:
        """Register a freshly accepted socket, cutting the oldest pending one past a cap.

        ``cap_per_peer=False`` for a trusted proxy's socket: many clients share its address
        until the PROXY header names each (``rekey``); the total cap still holds.
        """
        if cap_per_peer:
            self._make_room_for(peer)
        if len(self._all) >= self.max_total:
            self._evict(next(iter(self._all)), f"{self.max_total} in all")
        pending = PendingConnection(peer)
        self._all[pending] = None
        self._by_peer.setdefault(peer, OrderedDict())[pending] = None
        return pending

    def rekey(self, pending: PendingConnection, peer: str) -> None:
        """Count ``pending`` under ``peer`` (the real client a proxy named) from now on."""
        if pending not in self._all or pending.peer == peer:
            return
        self._remove_from_peer(pending)
        self._make_room_for(peer)
        pending.peer = peer
        self._by_peer.setdefault(peer, OrderedDict())[pending] = None

    def _make_room_for(self, peer: str) -> None:
        same_peer = self._by_peer.get(peer)
        if same_peer is not None and len(same_peer) >= self.max_per_peer:
            self._evict(next(iter(same_peer)), f"{self.max_per_peer} from {peer}")

    def leave(self, pending: PendingConnection) -> None:
        """The socket was authenticated, answered or closed: no longer pending (idempotent)."""
        if pending not in self._all:
            return
        del self._all[pending]
        self._remove_from_peer(pending)

    def _remove_from_peer(self, pending: PendingConnection) -> None:
        same_peer = self._by_peer[pending.peer]
        del same_peer[pending]
        if not same_peer:
            del self._by_peer[pending.peer]

    def _evict(self, oldest: PendingConnection, cap: str) -> None:
        self.leave(oldest)
        oldest.scope.cancel()
        self.evicted += 1
        if self.evicted % EVICTIONS_BETWEEN_WARNINGS == 1:
            logger.warning(
                "unauthenticated connections at the cap (%s): closed the oldest idle one from "
                "%s (%d closed so far)",
                cap,
                oldest.peer,
                self.evicted,
            )
