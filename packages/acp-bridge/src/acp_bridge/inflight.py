"""Requests relayed to the gateway and not yet answered: what the IDE is still owed."""

from __future__ import annotations

import logging
from typing import Any, Final

import msgspec

from acp_core.jsonrpc import RequestId

logger = logging.getLogger("acp_bridge.relay")

MAX_IN_FLIGHT_REQUESTS: Final = 100_000
"""Ids kept for requests awaiting a reply; beyond this the oldest are forgotten (a client
that never reads its replies must not grow the bridge without bound)."""


class Owed(msgspec.Struct):
    """A request relayed to the gateway and not yet answered."""

    method: str
    session_id: str | None = None
    params: dict[str, Any] | None = None
    """session/new, session/load or session/resume params (to resume with the same cwd)."""


class InFlightTable:
    """Requests relayed to the gateway and not yet answered, oldest first, bounded."""

    __slots__ = ("_limit", "_owed")

    def __init__(self, *, limit: int = MAX_IN_FLIGHT_REQUESTS) -> None:
        self._owed: dict[RequestId, Owed] = {}
        self._limit = limit

    def __len__(self) -> int:
        return len(self._owed)

    def add(
        self,
        request_id: RequestId,
        method: str,
        session_id: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        if len(self._owed) >= self._limit and request_id not in self._owed:
            forgotten = next(iter(self._owed))
            del self._owed[forgotten]
            logger.warning("more than %d requests in flight; forgot id %r", self._limit, forgotten)
        self._owed[request_id] = Owed(method, session_id, params)

    def get(self, request_id: RequestId) -> Owed | None:
        return self._owed.get(request_id)

    def settle(self, request_id: RequestId) -> Owed | None:
        return self._owed.pop(request_id, None)

    def drain(self) -> list[tuple[RequestId, Owed]]:
        owed = list(self._owed.items())
        self._owed.clear()
        return owed
