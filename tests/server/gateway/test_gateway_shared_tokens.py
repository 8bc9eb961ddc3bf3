"""Tokens and pairing in a PostgreSQL store, shared by gateway replicas.

Each "replica" here is its own ``PostgresSessionStore`` (its own connections) on one
throwaway database: the code pairs once across them, the lockout counts every replica's
wrong codes, config.toml's digests are imported once and a revoked one stays revoked, and a
revocation on one replica closes the other's connection with 1008 (by notification, or by
the periodic reconcile when the notification was missed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import psycopg
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from wsproto.frame_protocol import CloseReason

from acp_server.gateway.auth import hash_token
from acp_server.gateway.pairing import generate_token
from acp_server.gateway.revoke import RevokeRefused, digests_to_revoke
from acp_server.gateway.shared_tokens import SharedTokens
from acp_server.gateway.state import REVOKED_REASON, ConnectionRegistry, LiveConnection
from acp_server.gateway.websocket import WebSocketTransport
from acp_server.protocol.connection import AcpConnection
from acp_server.security.pairing import PairAccepted, PairingLimits, PairRejected
from acp_server.storage import StoreError
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.postgres.tokens import PostgresTokens
from tests.helpers import TIMING_SENSITIVE, poll_until

LIMITS = PairingLimits(rate_limit_per_minute=100)
HEX = "0123456789abcdef"


@pytest.fixture
def replicas(postgres_url: str) -> Iterator[tuple[PostgresTokens, PostgresTokens]]:
    first = PostgresSessionStore.open(postgres_url)
    second = PostgresSessionStore.open(postgres_url)
    try:
        yield PostgresTokens(first), PostgresTokens(second)
    finally:
        first.close()
        second.close()


def _live_connection(registry: ConnectionRegistry, digest: str) -> LiveConnection:
    _client, server = trio.testing.memory_stream_pair()
    # shut() only touches the transport; the ACP side is never reached here.
    connection = LiveConnection(
        WebSocketTransport(server), cast(AcpConnection, object()), digest, "127.0.0.1"
    )
    registry.add(connection)
    return connection


def test_one_code_pairs_once_across_replicas_even_at_the_same_moment(
    replicas: tuple[PostgresTokens, PostgresTokens],
) -> None:
    first, second = replicas
    code = first.startup_code()
    assert code is not None
    assert second.startup_code() == code  # a second replica shows the same code
    tokens = [generate_token() for _ in range(8)]
    many_failures = PairingLimits(rate_limit_per_minute=100, max_failures=100)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(
            pool.map(
                lambda pair: pair[0].attempt(
                    code, many_failures, hash_token(pair[1]), pair[1][-8:]
                ),
                [(replicas[n % 2], token) for n, token in enumerate(tokens)],
            )
        )
    accepted = [token for token, o in zip(tokens, outcomes, strict=True) if o == PairAccepted()]
    assert len(accepted) == 1
    assert all(
        o == PairRejected(403, "Invalid pairing code")
        for o in outcomes
        if o not in [PairAccepted()]
    )
    assert second.principal_of(hash_token(accepted[0])) is not None
    assert first.principal_of(hash_token(accepted[0])) is not None
    assert second.startup_code() is None  # paired now: no code at the next start
    assert first.status().paired_tokens == 1


def test_the_lockout_counts_wrong_codes_on_every_replica(
    replicas: tuple[PostgresTokens, PostgresTokens],
) -> None:
    first, second = replicas
    code = first.issue_code(discoverable=False)
    wrong = "000000" if code != "000000" else "111111"
    for attempt in range(4):
        rejected = replicas[attempt % 2].attempt(
            wrong, LIMITS, hash_token(generate_token()), "alice"
        )
        assert rejected == PairRejected(403, "Invalid pairing code")
    locked = first.attempt(wrong, LIMITS, hash_token(generate_token()), "alice")
    assert isinstance(locked, PairRejected)
    assert locked.status == 429
    right_but_locked = second.attempt(code, LIMITS, hash_token(generate_token()), "alice")
    assert isinstance(right_but_locked, PairRejected)
    assert right_but_locked.status == 429
    second.issue_code(discoverable=False)  # a fresh code lifts the lockout everywhere
    fresh = first.status().state.code
    assert first.attempt(fresh, LIMITS, hash_token(generate_token()), "alice") == PairAccepted()


def test_the_rate_limit_is_global(replicas: tuple[PostgresTokens, PostgresTokens]) -> None:
    limits = PairingLimits(rate_limit_per_minute=3, max_failures=100)
    replicas[0].issue_code(discoverable=False)
    answers = [replicas[n % 2].attempt("999999x", limits, "d", "alice") for n in range(4)]
    assert [a.status for a in answers if isinstance(a, PairRejected)] == [403, 403, 403, 429]


def test_config_digests_import_once_and_a_revoked_one_stays_revoked(
    replicas: tuple[PostgresTokens, PostgresTokens],
) -> None:
    first, second = replicas
    digests = [hash_token(generate_token()) for _ in range(3)]
    assert first.import_digests(digests) == 3
    assert second.import_digests(digests) == 0  # every replica imports; nothing twice
    assert second.revoke_matching(lambda paired: [digests[0]]) == [digests[0]]
    assert first.import_digests(digests) == 0  # an old config.toml revives nothing
    assert first.principal_of(digests[0]) is None
    assert first.still_paired(digests) == set(digests[1:])


def test_rotate_revokes_every_token_and_issues_one_code(
    replicas: tuple[PostgresTokens, PostgresTokens],
) -> None:
    first, second = replicas
    first.import_digests([hash_token(generate_token()) for _ in range(2)])
    revoked, code = second.rotate()
    assert revoked == 2
    status = first.status()
    assert status.paired_tokens == 0
    assert (status.state.code, status.state.discoverable) == (code, False)


@TIMING_SENSITIVE
async def test_a_revocation_on_one_replica_closes_the_others_connection_within_a_second(
    replicas: tuple[PostgresTokens, PostgresTokens],
) -> None:
    first, second = replicas
    digest = hash_token(generate_token())
    kept = hash_token(generate_token())
    first.import_digests([digest, kept])
    registry = ConnectionRegistry()
    watched = SharedTokens(first, registry, reconcile_interval_secs=3600)
    revoking = SharedTokens(second, ConnectionRegistry())
    live = _live_connection(registry, digest)
    other = _live_connection(registry, kept)
    assert await watched.verify("zc_" + "0" * 64) is None
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(watched.watch)
            started = time.monotonic()
            assert await revoking.revoke(lambda paired: [digest]) == [digest]
            await poll_until(lambda: live.close_code == CloseReason.POLICY_VIOLATION, within=1.0)
            latency = time.monotonic() - started
            nursery.cancel_scope.cancel()
    assert live.close_reason == REVOKED_REASON
    assert other.close_code == CloseReason.NORMAL_CLOSURE  # another token's connection stays open
    assert latency < 1.0


async def test_a_missed_notification_is_caught_by_the_periodic_reconcile(
    postgres_url: str, replicas: tuple[PostgresTokens, PostgresTokens]
) -> None:
    first, _second = replicas
    digest = hash_token(generate_token())
    first.import_digests([digest])
    registry = ConnectionRegistry()
    watched = SharedTokens(first, registry, reconcile_interval_secs=0.2)
    live = _live_connection(registry, digest)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(watched.watch)
            with psycopg.connect(postgres_url, autocommit=True) as conn:  # no NOTIFY
                conn.execute("UPDATE acp_paired_tokens SET revoked_at = 'now'")
            await poll_until(lambda: live.close_code == CloseReason.POLICY_VIOLATION, within=5.0)
            nursery.cancel_scope.cancel()


@given(st.lists(st.text(HEX, min_size=64, max_size=64), min_size=1, max_size=5, unique=True))
def test_a_prefix_of_one_digest_revokes_exactly_that_digest(digests: list[str]) -> None:
    for digest in digests:
        length = next(
            n for n in range(8, 65) if sum(d.startswith(digest[:n]) for d in digests) == 1
        )
        assert digests_to_revoke(digests, digest[:length].upper()) == [digest]
        shared = [d for d in digests if d.startswith(digest[:8])]
        if len(shared) > 1:
            with pytest.raises(RevokeRefused) as ambiguous:
                digests_to_revoke(digests, digest[:8])
            assert ambiguous.value.status == 409


def test_a_token_or_a_bad_prefix_as_the_selector() -> None:
    token = generate_token()
    assert digests_to_revoke([hash_token(token)], token) == [hash_token(token)]
    for selector, status in (("abc", 400), ("xyz12345678", 400), ("f" * 10, 404), (token, 404)):
        with pytest.raises(RevokeRefused) as refused:
            digests_to_revoke(["0" * 64], selector)
        assert refused.value.status == status


async def test_without_a_listening_connection_the_reconcile_still_closes_revoked_tokens(
    replicas: tuple[PostgresTokens, PostgresTokens], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = replicas
    digest = hash_token(generate_token())
    first.import_digests([digest])

    def no_new_connections(**_options: object) -> object:
        raise StoreError("The PostgreSQL session store is unreachable: refused")

    monkeypatch.setattr(first.store, "connect", no_new_connections)
    registry = ConnectionRegistry()
    watched = SharedTokens(first, registry, reconcile_interval_secs=0.2)
    live = _live_connection(registry, digest)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(watched.watch)  # starts, warning, instead of failing
            assert second.revoke_matching(lambda paired: list(paired)) == [digest]
            await poll_until(lambda: live.close_code == CloseReason.POLICY_VIOLATION, within=5.0)
            nursery.cancel_scope.cancel()
