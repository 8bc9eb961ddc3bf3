"""The rules for unauthenticated sockets: only idle ones are cut, the oldest first and from
an address past its share first, and only at the cap; with none idle, accepting waits."""

from __future__ import annotations

import logging
import resource
import socket

import pytest
import trio
import trio.testing

from acp_server.gateway.pending import (
    IDLE_AFTER_SECS,
    MIN_PENDING_CONNECTIONS,
    PendingConnections,
    pending_cap_for_file_limit,
    raise_open_file_limit,
)


def _cut(*sockets: object) -> list[bool]:
    return [item.scope.cancel_called for item in sockets]  # type: ignore[attr-defined]


async def test_below_the_cap_no_socket_is_cut_however_many_share_an_address(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=200, max_per_peer=2)
    storm = [pending.enter("10.0.0.1") for _ in range(150)]
    await trio.sleep(IDLE_AFTER_SECS * 10)
    with trio.fail_after(0):  # room at once: nothing to wait for, nothing to cut
        await pending.wait_for_room()
    assert not any(_cut(*storm))
    assert (len(pending), pending.evicted) == (150, 0)


async def test_at_the_cap_the_oldest_idle_socket_is_cut_and_a_speaking_one_never(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=3, max_per_peer=3)
    oldest, speaking, idle = (pending.enter(f"10.0.0.{n}") for n in range(3))
    pending.spoke(speaking)
    await trio.sleep(IDLE_AFTER_SECS)
    await pending.wait_for_room()
    assert _cut(oldest, speaking, idle) == [True, False, False]
    pending.enter("10.0.0.9")
    await pending.wait_for_room()
    assert _cut(oldest, speaking, idle) == [True, False, True]
    assert pending.evicted == 2


async def test_with_none_idle_accepting_waits_until_a_socket_leaves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=2, max_per_peer=2)
    first, second = pending.enter("127.0.0.1"), pending.enter("127.0.0.1")
    pending.spoke(first)
    pending.spoke(second)
    room = trio.Event()

    async def accept_loop() -> None:
        await pending.wait_for_room()
        room.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept_loop)
        await trio.sleep(60)  # mid-handshake for a minute: still waiting, nothing cut
        assert not room.is_set()
        pending.leave(second)  # authenticated
    assert room.is_set()
    assert _cut(first, second) == [False, False]
    assert (pending.evicted, pending.pauses) == (0, 1)


async def test_a_socket_just_accepted_is_spared_until_it_could_have_spoken(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=1, max_per_peer=1)
    just_accepted = pending.enter("127.0.0.1")
    started = trio.current_time()
    await pending.wait_for_room()
    assert trio.current_time() - started == pytest.approx(IDLE_AFTER_SECS)
    assert just_accepted.scope.cancel_called


async def test_a_socket_with_bytes_waiting_is_not_idle_before_its_handler_reads_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=2, max_per_peer=2)
    client, server = socket.socketpair()
    silent_client, silent_server = socket.socketpair()
    with client, server, silent_client, silent_server:
        client.sendall(b"GET /acp HTTP/1.1\r\n")
        sent_its_head = pending.enter("127.0.0.1", fd=server.fileno())
        silent = pending.enter("127.0.0.1", fd=silent_server.fileno())
        await trio.sleep(IDLE_AFTER_SECS)
        await pending.wait_for_room()
        assert _cut(sent_its_head, silent) == [False, True]


async def test_an_address_past_its_share_loses_its_idle_sockets_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=4, max_per_peer=2)
    other = pending.enter("203.0.113.7")  # the oldest, but its address is within its share
    crowded = [pending.enter("10.0.0.1") for _ in range(3)]
    await trio.sleep(IDLE_AFTER_SECS)
    await pending.wait_for_room()
    assert _cut(other, *crowded) == [False, True, False, False]
    pending.enter("10.0.0.2")
    await pending.wait_for_room()  # 10.0.0.1 is back within its share: the oldest goes
    assert _cut(other, *crowded) == [True, True, False, False]


async def test_a_proxy_socket_is_counted_per_real_client_once_its_header_names_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pending = PendingConnections(max_total=4, max_per_peer=2)
    direct = pending.enter("203.0.113.9")
    # Many clients arrive through one proxy address: not one address's share before the
    # header names them.
    through_proxy = [pending.enter("10.0.0.1", cap_per_peer=False) for _ in range(3)]
    for item in through_proxy:
        pending.rekey(item, "203.0.113.7")
    await trio.sleep(IDLE_AFTER_SECS)
    await pending.wait_for_room()
    # The real client is past its share: its oldest idle socket goes before the older one.
    assert _cut(direct, *through_proxy) == [False, True, False, False]


async def test_a_socket_that_left_is_never_cut(autojump_clock: trio.testing.MockClock) -> None:
    pending = PendingConnections(max_total=2, max_per_peer=2)
    authenticated = pending.enter("127.0.0.1")
    pending.leave(authenticated)
    pending.leave(authenticated)  # idempotent
    for _ in range(5):
        await pending.wait_for_room()
        pending.enter("127.0.0.1")
    assert not authenticated.scope.cancel_called
    assert len(pending) == 2
    assert pending.evicted == 3


@pytest.mark.parametrize(
    ("soft", "expected"), [(8192, 1024), (1024, 256), (256, 64), (20, MIN_PENDING_CONNECTIONS)]
)
def test_the_total_cap_follows_a_small_open_file_limit(
    monkeypatch: pytest.MonkeyPatch, soft: int, expected: int
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (soft, soft))
    assert pending_cap_for_file_limit() == expected


def test_the_soft_open_file_limit_is_raised_to_the_hard_one_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    limits = {resource.RLIMIT_NOFILE: (1024, 4096)}
    monkeypatch.setattr(resource, "getrlimit", limits.__getitem__)
    monkeypatch.setattr(resource, "setrlimit", limits.__setitem__)
    with caplog.at_level(logging.INFO, logger="acp_server.gateway.pending"):
        assert raise_open_file_limit(needed=2000) == 4096
    assert limits[resource.RLIMIT_NOFILE] == (4096, 4096)
    assert "open-file limit raised from 1024 to 4096" in caplog.text
    assert "below the" not in caplog.text

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="acp_server.gateway.pending"):
        assert raise_open_file_limit(needed=5000) == 4096
    assert "the open-file limit is 4096, below the 5000 descriptors" in caplog.text
