"""Principals in the store, on both backends (storage/tokens.py, storage/history.py): a
session belongs to the principal that created it, session/list pages one principal's
sessions, and the gateway's tokens carry their principal, pairing and last-use times."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from acp_server.storage import PrincipalTaken, SessionBackend, imported_principal
from acp_server.storage.postgres import PostgresSessionStore
from acp_server.storage.postgres.schema import PG_SCHEMA_VERSION
from acp_server.storage.sqlite import SCHEMA_VERSION, SessionStore
from tests.server.store_backends import Backend, backend, store

__all__ = ["backend", "store"]  # the fixtures, parametrized over both backends

DIGEST_A = "a" * 64
DIGEST_B = "b" * 64


def undo_principals_step(conn: sqlite3.Connection) -> None:
    """Take a SQLite store back to before the principals step (its schema step 9)."""
    conn.execute("DROP INDEX idx_acp_sessions_principal")
    conn.execute("ALTER TABLE acp_sessions DROP COLUMN principal")
    conn.execute("ALTER TABLE acp_spend DROP COLUMN principal")
    conn.execute("DROP TABLE acp_paired_tokens")


def test_a_session_belongs_to_its_creator_and_lists_only_for_them(
    store: SessionBackend,
) -> None:
    store.create_session("alice-1", "default", "/w", principal="alice")
    store.create_session("bob-1", "default", "/w", principal="bob")
    store.create_session("operator-1", "default", "/w")
    store.create_session("alice-2", "default", "/other", principal="alice")
    assert store.session_owned_by("alice-1", "alice")
    assert not store.session_owned_by("alice-1", "bob")
    assert not store.session_owned_by("operator-1", "alice")  # the operator's, nobody else's
    assert not store.session_owned_by("missing", "alice")

    def listed(principal: str | None, workspace: str | None = None) -> list[str]:
        page = store.list_page(workspace_dir=workspace, cursor=None, principal=principal)
        return sorted(info.session_id for info in page.sessions)

    assert listed("alice") == ["alice-1", "alice-2"]
    assert listed("alice", "/w") == ["alice-1"]
    assert listed("bob") == ["bob-1"]
    assert listed("carol") == []
    assert listed(None) == ["alice-1", "alice-2", "bob-1", "operator-1"]
    owners = {info.session_id: info.principal for info in store.list_sessions()}
    assert owners == {"alice-1": "alice", "alice-2": "alice", "bob-1": "bob", "operator-1": None}
    loaded = store.load_session("bob-1")
    assert loaded is not None
    assert loaded.info.principal == "bob"


def test_tokens_carry_their_principal_and_a_name_has_one_live_token(
    store: SessionBackend, backend: Backend
) -> None:
    assert store.import_tokens([DIGEST_A.upper(), DIGEST_A]) == 1
    assert store.token_principal(DIGEST_A) == imported_principal(DIGEST_A) == "token-aaaaaaaaaaaa"
    store.add_token(DIGEST_B, "alice", "pair")
    assert store.token_principal(DIGEST_B) == "alice"
    with pytest.raises(PrincipalTaken):
        store.add_token("c" * 64, "alice", "admin")
    assert store.live_tokens() == {DIGEST_A: "token-aaaaaaaaaaaa", DIGEST_B: "alice"}
    store.revoke_tokens([DIGEST_B])
    assert store.token_principal(DIGEST_B) is None
    store.add_token("c" * 64, "alice", "admin")  # the name is free again once revoked
    assert store.import_tokens([DIGEST_B]) == 0  # an old config.toml revives nothing
    listed = store.list_tokens()
    assert [(t.principal, t.source, t.revoked_at is None) for t in listed] == [
        ("alice", "admin", True),
        ("token-aaaaaaaaaaaa", "config.toml", True),
        ("alice", "pair", False),
    ]
    assert store.live_tokens() == {DIGEST_A: "token-aaaaaaaaaaaa", "c" * 64: "alice"}
    reopened = backend.open()
    try:
        assert reopened.token_principal("c" * 64) == "alice"
    finally:
        reopened.close()


def test_the_last_use_is_written_in_batches_and_never_moves_back(store: SessionBackend) -> None:
    store.add_token(DIGEST_A, "alice", "pair")
    store.add_token(DIGEST_B, "bob", "pair")
    assert {t.principal: t.last_used_at for t in store.list_tokens()} == {
        "alice": None,
        "bob": None,
    }
    store.record_token_use({DIGEST_A: "2026-12-06T10:00:00+00:00", DIGEST_B: "2026-12-06T09:00"})
    store.record_token_use({DIGEST_A: "2026-12-06T08:00:00+00:00"})  # older: ignored
    assert {t.principal: t.last_used_at for t in store.list_tokens()} == {
        "alice": "2026-12-06T10:00:00+00:00",
        "bob": "2026-12-06T09:00",
    }


def test_sqlite_sessions_stored_before_principals_are_the_operators(tmp_path: Path) -> None:
    path = tmp_path / "acp-sessions.db"
    SessionStore.open(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    undo_principals_step(conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    conn.execute(
        "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir, created_at,"
        " last_activity) VALUES ('old', 'default', '/w', '2026-01-01T00:00:00+00:00',"
        " '2026-01-01T00:00:00+00:00')"
    )
    conn.close()
    store = SessionStore.open(path)
    try:
        assert [info.principal for info in store.list_sessions()] == [None]
        assert not store.session_owned_by("old", "alice")
        page = store.list_page(workspace_dir=None, cursor=None, principal="alice")
        assert page.sessions == ()
    finally:
        store.close()


def test_postgres_tokens_paired_before_principals_are_named_after_their_digest(
    postgres_url: str,
) -> None:
    PostgresSessionStore.open(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP INDEX idx_acp_paired_tokens_live_principal")
        conn.execute("DROP INDEX idx_acp_sessions_principal")
        for table, column in (
            ("acp_paired_tokens", "principal"),
            ("acp_paired_tokens", "last_used_at"),
            ("acp_sessions", "principal"),
            ("acp_spend", "principal"),
        ):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.execute(
            "INSERT INTO acp_paired_tokens (digest, source, paired_at)"
            " VALUES (%s, 'pair', '2026-01-01T00:00:00+00:00')",
            (DIGEST_A,),
        )
        conn.execute(
            "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir, created_at,"
            " last_activity) VALUES ('old', 'default', '/w', '2026-01-01', '2026-01-01')"
        )
        conn.execute("UPDATE acp_schema_version SET version = %s", (PG_SCHEMA_VERSION - 1,))
    store = PostgresSessionStore.open(postgres_url)
    try:
        assert store.token_principal(DIGEST_A) == "token-aaaaaaaaaaaa"
        assert [info.principal for info in store.list_sessions()] == [None]
    finally:
        store.close()
