"""Paired tokens and the pairing code in a PostgreSQL store, shared by every gateway replica.

Blocking (psycopg 3, sync): the gateway calls these through ``trio.to_thread``
(gateway/shared_tokens.py). Every call is one transaction on the store's connection
(``PostgresSessionStore.transaction``), so its errors are the store's ``StoreError``.

* ``acp_paired_tokens``: one row per token digest and the principal it belongs to, the
  statements every store shares (storage/tokens.py). A revoked row stays, so the import
  of config.toml's ``[gateway] paired_tokens`` at every start never brings it back.
* ``acp_pairing``: one row holding the ``PairingState`` (security/pairing.py). A pairing
  attempt takes it ``FOR UPDATE``, decides with ``decide_attempt`` at the database's clock
  and writes it back in the same transaction that stores the new digest, so one code pairs
  once however many replicas are asked at the same moment, and the lockout and rate limit
  count every replica's attempts.
* A revocation commits and sends ``NOTIFY zeroclaw_token_revoked`` (payload: the digest, or
  ``*`` for every token) in the same transaction; PostgreSQL delivers it at commit to every
  replica's ``RevocationListener``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import psycopg

from acp_server.security.pairing import (
    PairAccepted,
    PairingLimits,
    PairingState,
    PairOutcome,
    decide_attempt,
    with_fresh_code,
)
from acp_server.storage import tokens as paired_tokens
from acp_server.storage.codec import now_text
from acp_server.storage.dialect import POSTGRES
from acp_server.storage.postgres.schema import REVOKED_CHANNEL, Connection
from acp_server.storage.postgres.store import PostgresSessionStore
from acp_server.storage.records import StoreError

logger = logging.getLogger(__name__)

ALL_TOKENS: Final = "*"
"""The notification payload that means "every token was revoked"."""
_LISTEN_POLL_SECS: Final = 0.25
_RECONNECT_SECS: Final = 1.0
_PAIRING_COLUMNS: Final = "code, discoverable, failures, locked_until, attempts"


@dataclass(frozen=True, slots=True)
class PairingStatus:
    """What the admin routes and ``GET /pair/code`` show."""

    state: PairingState
    paired_tokens: int


def _state_of(row: tuple[object, ...]) -> PairingState:
    code, discoverable, failures, locked_until, attempts = row
    assert isinstance(attempts, list)
    return PairingState(
        code=None if code is None else str(code),
        discoverable=bool(discoverable),
        failures=int(str(failures)),
        locked_until=None if locked_until is None else float(str(locked_until)),
        attempts=tuple(float(at) for at in attempts),
    )


def _locked_state(conn: Connection) -> PairingState:
    row = conn.execute(f"SELECT {_PAIRING_COLUMNS} FROM acp_pairing FOR UPDATE").fetchone()
    if row is None:
        raise StoreError("The shared store has no pairing row (run `zeroclaw storage migrate`)")
    return _state_of(row)


def _write_state(conn: Connection, state: PairingState) -> None:
    conn.execute(
        "UPDATE acp_pairing SET code = %s, discoverable = %s, failures = %s,"
        " locked_until = %s, attempts = %s::double precision[]",
        (state.code, state.discoverable, state.failures, state.locked_until, list(state.attempts)),
    )


def _active_count(conn: Connection) -> int:
    row = conn.execute("SELECT count(*) FROM acp_paired_tokens WHERE revoked_at IS NULL").fetchone()
    return int(row[0]) if row else 0


def _notify(conn: Connection, payload: str) -> None:
    conn.execute("SELECT pg_notify(%s, %s)", (REVOKED_CHANNEL, payload))


class PostgresTokens:
    """Token digests and the pairing code of one shared store. Thread-safe."""

    def __init__(self, store: PostgresSessionStore) -> None:
        self.store = store

    @property
    def location(self) -> str:
        return self.store.location

    def import_digests(self, digests: Iterable[str]) -> int:
        """Add the digests the store does not know yet (paired or revoked); how many."""
        return self.store.import_tokens(list(digests))

    def principal_of(self, digest: str) -> str | None:
        """The principal of a paired, unrevoked token, else None."""
        return self.store.token_principal(digest)

    def still_paired(self, digests: Sequence[str]) -> set[str]:
        """Those of ``digests`` that are still paired (the rest were revoked)."""
        if not digests:
            return set()
        rows = self.store.transaction(
            lambda conn: conn.execute(
                "SELECT digest FROM acp_paired_tokens WHERE digest = ANY(%s)"
                " AND revoked_at IS NULL",
                (list(digests),),
            ).fetchall()
        )
        return {str(row[0]) for row in rows}

    def status(self) -> PairingStatus:
        def read(conn: Connection) -> PairingStatus:
            row = conn.execute(f"SELECT {_PAIRING_COLUMNS} FROM acp_pairing").fetchone()
            state = PairingState() if row is None else _state_of(row)
            return PairingStatus(state, _active_count(conn))

        return self.store.transaction(read)

    def startup_code(self) -> str | None:
        """The code a starting replica announces while no token is paired: the one already
        active (another replica issued it), else a fresh discoverable one. None once paired."""

        def take(conn: Connection) -> str | None:
            state = _locked_state(conn)
            if _active_count(conn):
                return None
            if state.code is None:
                state = with_fresh_code(state, discoverable=True)
                _write_state(conn, state)
            return state.code

        return self.store.transaction(take)

    def issue_code(self, *, discoverable: bool) -> str:
        """A fresh code for every replica (replaces any active one, lifts a lockout)."""

        def replace_code(conn: Connection) -> str:
            state = with_fresh_code(_locked_state(conn), discoverable=discoverable)
            _write_state(conn, state)
            assert state.code is not None
            return state.code

        return self.store.transaction(replace_code)

    def attempt(
        self, presented: str | None, limits: PairingLimits, new_digest: str, principal: str
    ) -> PairOutcome:
        """One ``POST /pair`` on any replica; on success ``new_digest`` is paired as
        ``principal`` in the same transaction that consumes the code. A name in use
        (``PrincipalTaken``) rolls the whole attempt back: the code stays usable."""

        def attempt(conn: Connection) -> PairOutcome:
            state = _locked_state(conn)
            now_row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
            assert now_row is not None
            state, outcome = decide_attempt(state, presented, now=float(now_row[0]), limits=limits)
            if isinstance(outcome, PairAccepted):
                paired_tokens.insert_token(
                    conn, POSTGRES, new_digest, principal, "pair", now_text()
                )
            _write_state(conn, state)
            return outcome

        return self.store.transaction(attempt)

    def revoke_matching(self, matches: Callable[[Mapping[str, str]], list[str]]) -> list[str]:
        """Revoke the digests ``matches`` picks from every live token (digest -> principal,
        by digest); the picked ones, each announced to every replica."""

        def revoke(conn: Connection) -> list[str]:
            rows = conn.execute(
                "SELECT digest, principal FROM acp_paired_tokens WHERE revoked_at IS NULL"
                " ORDER BY digest FOR UPDATE"
            ).fetchall()
            chosen = matches({str(row[0]): POSTGRES.read_text(row[1]) for row in rows})
            if chosen:
                paired_tokens.revoke(conn, POSTGRES, chosen, now_text())
                for digest in chosen:
                    _notify(conn, digest)
            return chosen

        return self.store.transaction(revoke)

    def rotate(self) -> tuple[int, str]:
        """Revoke every token and issue a fresh (not discoverable) code, in one transaction;
        (tokens revoked, the code)."""

        def rotate(conn: Connection) -> tuple[int, str]:
            state = with_fresh_code(_locked_state(conn), discoverable=False)
            revoked = conn.execute(
                "UPDATE acp_paired_tokens SET revoked_at = %s WHERE revoked_at IS NULL",
                (now_text(),),
            ).rowcount
            _write_state(conn, state)
            _notify(conn, ALL_TOKENS)
            assert state.code is not None
            return revoked, state.code

        return self.store.transaction(rotate)


class RevocationListener:
    """``LISTEN zeroclaw_token_revoked`` on a connection of its own, in a thread.

    ``on_revoked(payload)`` runs on the listener thread for every notification (a digest, or
    ``ALL_TOKENS``); ``on_reconnected()`` after the connection was lost and opened again
    (notifications sent meanwhile were missed: reconcile). ``close`` stops the thread."""

    def __init__(
        self,
        store: PostgresSessionStore,
        on_revoked: Callable[[str], None],
        on_reconnected: Callable[[], None],
    ) -> None:
        self._store = store
        self._on_revoked = on_revoked
        self._on_reconnected = on_reconnected
        self._stopping = threading.Event()
        self._conn: Connection = self._listening_connection()
        self._thread = threading.Thread(
            target=self._run, name="zeroclaw-token-revocations", daemon=True
        )
        self._thread.start()

    def _listening_connection(self) -> Connection:
        return self._store.listen(REVOKED_CHANNEL, "Cannot listen for token revocations")

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                for note in self._conn.notifies(timeout=_LISTEN_POLL_SECS):
                    self._on_revoked(note.payload)
            except psycopg.Error as exc:
                if self._stopping.is_set():
                    return
                logger.warning("token revocation notifications lost (%s); reconnecting", exc)
                self._reconnect()

    def _reconnect(self) -> None:
        self._conn.close()
        while not self._stopping.wait(_RECONNECT_SECS):
            try:
                self._conn = self._listening_connection()
            except StoreError as exc:
                logger.warning("%s", exc)
                continue
            self._on_reconnected()
            return

    def close(self) -> None:
        self._stopping.set()
        self._thread.join(_LISTEN_POLL_SECS * 8)
        self._conn.close()
