"""The caps on unauthenticated sockets: oldest first, in total and per peer."""

from __future__ import annotations

import resource

import pytest

from acp_server.gateway.pending import (
    MIN_PENDING_CONNECTIONS,
    PendingConnections,
    pending_cap_for_file_limit,
)


async def test_past_the_per_peer_cap_the_oldest_of_that_peer_is_cut() -> None:
    pending = PendingConnections(max_total=10, max_per_peer=2)
    first, second = pending.enter("10.0.0.1"), pending.enter("10.0.0.1")
    other = pending.enter("10.0.0.2")
    third = pending.enter("10.0.0.1")
    assert first.scope.cancel_called
    assert not any(p.scope.cancel_called for p in (second, other, third))
    assert len(pending) == 3
    assert pending.evicted == 1


async def test_past_the_total_cap_the_oldest_overall_is_cut() -> None:
    pending = PendingConnections(max_total=3, max_per_peer=3)
    sockets = [pending.enter(f"10.0.0.{n}") for n in range(3)]
    newest = pending.enter("10.0.0.9")
    assert [p.scope.cancel_called for p in [*sockets, newest]] == [True, False, False, False]
    assert len(pending) == 3


async def test_a_socket_that_left_is_never_cut() -> None:
    pending = PendingConnections(max_total=2, max_per_peer=2)
    authenticated = pending.enter("127.0.0.1")
    pending.leave(authenticated)
    pending.leave(authenticated)  # idempotent
    for _ in range(5):
        pending.enter("127.0.0.1")
    assert not authenticated.scope.cancel_called
    assert len(pending) == 2
    assert pending.evicted == 3


@pytest.mark.parametrize(
    ("soft", "expected"), [(1024, 256), (256, 64), (20, MIN_PENDING_CONNECTIONS)]
)
def test_the_total_cap_follows_a_small_open_file_limit(
    monkeypatch: pytest.MonkeyPatch, soft: int, expected: int
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (soft, soft))
    assert pending_cap_for_file_limit() == expected
