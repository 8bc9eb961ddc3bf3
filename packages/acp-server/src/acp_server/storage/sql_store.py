"""``SqlSessionStore``: the session store's contract (storage/contract.py) over SQL, once.

Both backends keep the same tables and run the same statements (storage/history.py,
settings.py, spend.py, session_list.py); what differs is how a transaction is run on their
driver (SQLite: ``BEGIN IMMEDIATE`` retried while the file is busy; PostgreSQL: one
connection that is opened again after it broke) and how a turn's messages are inserted.
A backend subclasses this with its connection type and supplies those parts:

* ``_write(body)`` / ``_read(body)``: run ``body(conn)`` in one read-write / one read-only
  transaction (a snapshot: every SELECT of a load sees the same state), turning driver
  errors into ``StoreError``; ``_read_statement`` and ``_write_waited_on`` when a cheaper
  or shorter-waiting way exists for a single read or a write a client waits on;
* ``_insert_messages``: a turn's encoded messages and tool rows, inside ``_write``;
* ``close`` and ``location``.

Everything that can fail on a turn's content (a role, arguments that are not JSON or too
large) fails while encoding it, before any transaction (storage/codec.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Generic, TypeVar

from acp_server.model import CompletedTurn
from acp_server.storage import history, settings
from acp_server.storage import tokens as paired_tokens
from acp_server.storage.codec import EncodedMessage, encode_message, now_text, plan_to_json
from acp_server.storage.dialect import Connection, Dialect
from acp_server.storage.records import (
    DEFAULT_MAX_RESTORED_MESSAGES,
    StoredSession,
    StoredSessionInfo,
)
from acp_server.storage.session_list import DEFAULT_PAGE_SIZE, SessionPage, read_page
from acp_server.storage.spend import (
    SpendEntry,
    SpendRow,
    SpendTotals,
    insert_spend,
    read_summary,
    read_totals,
)

ConnectionT = TypeVar("ConnectionT", bound=Connection)
T = TypeVar("T")


class SqlSessionStore(ABC, Generic[ConnectionT]):
    """The contract's methods for a backend that supplies transactions (module docstring).
    Thread-safe as far as the backend's ``_write`` and ``_read`` are (calls serialized)."""

    dialect: ClassVar[Dialect]

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is, for messages (never a password)."""

    @abstractmethod
    def _write(self, body: Callable[[ConnectionT], T]) -> T:
        """``body`` in one read-write transaction."""

    @abstractmethod
    def _read(self, body: Callable[[ConnectionT], T]) -> T:
        """``body`` in one read-only transaction (one snapshot)."""

    def _read_statement(self, body: Callable[[ConnectionT], T]) -> T:
        """``body`` that runs one SELECT, which sees one snapshot on its own: a backend may
        run it without opening a read-only transaction first (the fencing-epoch read a
        prompt makes before every turn)."""
        return self._read(body)

    def _write_waited_on(self, body: Callable[[ConnectionT], T]) -> T:
        """A write a client is waiting on before it can go on (``session/new``): a backend
        whose writes can queue behind another process's lock waits less for it."""
        return self._write(body)

    @abstractmethod
    def _insert_messages(
        self,
        conn: ConnectionT,
        session_row_id: int,
        turn_seq: int,
        messages: Sequence[EncodedMessage],
        now: str,
    ) -> None:
        """Insert a turn's messages and their tool rows, in order."""

    @abstractmethod
    def close(self) -> None:
        """Release the connections; idempotent. Later calls raise ``StoreError``."""

    # -- history (storage/history.py)

    def create_session(
        self,
        session_id: str,
        agent_alias: str,
        workspace_dir: str,
        *,
        principal: str | None = None,
    ) -> None:
        """Store a new session of ``principal`` (None: the local operator); its creator
        holds it at ``CREATOR_EPOCH``."""
        now = now_text()
        self._write_waited_on(
            lambda conn: history.insert_session(
                conn, self.dialect, session_id, agent_alias, workspace_dir, now, principal
            )
        )

    def session_owned_by(self, session_id: str, principal: str) -> bool:
        """Whether the session is stored and belongs to ``principal``."""
        return self._read_statement(
            lambda conn: history.owned_by(conn, self.dialect, session_id, principal)
        )

    def claim_session(self, session_id: str) -> int | None:
        """Make the caller the session's one live copy: bump its fencing epoch, in one
        write transaction, and return the new value (None when there is no such session).
        Commits carrying an earlier epoch are refused from now on (``SessionFenced``). A
        claim always succeeds, so a holder that died never keeps a session from loading."""
        return self._write(lambda conn: history.claim(conn, self.dialect, session_id))

    def current_epoch(self, session_id: str) -> int | None:
        """The session's fencing epoch (None: not stored)."""
        return self._read_statement(
            lambda conn: history.session_number(conn, self.dialect, "owner_epoch", session_id)
        )

    def append_turn(
        self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
    ) -> None:
        """Write one completed turn in one transaction (all or nothing).

        ``turn.messages`` is everything the turn added to the history, the user's message
        first. With ``epoch``, the session must still be held at that epoch (see
        ``claim_session``). Raises ``UnknownSession`` or ``SessionFenced`` (nothing
        written) or ``StoreError``; after any failure the database holds exactly what it
        held before the call.
        """
        self.append_turns(session_id, (turn,), epoch=epoch)

    def append_turns(
        self, session_id: str, turns: Sequence[CompletedTurn], *, epoch: int | None = None
    ) -> None:
        """Write ``turns`` in order, in one transaction (all or nothing), as ``append_turn``."""
        encoded = [
            (
                [encode_message(message) for message in turn.messages],
                plan_to_json(turn.plan) if turn.plan is not None else None,
                turn.usage.total_tokens,
            )
            for turn in turns
        ]
        now = now_text()
        dialect = self.dialect

        def write(conn: ConnectionT) -> None:
            for messages, plan_json, tokens in encoded:
                session_row_id, turn_seq = history.count_turn(
                    conn,
                    dialect,
                    session_id,
                    tokens=tokens,
                    plan_json=plan_json,
                    epoch=epoch,
                    now=now,
                )
                if messages:
                    self._insert_messages(conn, session_row_id, turn_seq, messages, now)

        self._write(write)

    def load_session(
        self, session_id: str, *, max_messages: int | None = DEFAULT_MAX_RESTORED_MESSAGES
    ) -> StoredSession | None:
        """The stored session and its conversation, or None when no such session.

        With ``max_messages``, only the newest whole turns that fit are returned (always at
        least the newest turn); ``dropped_messages`` says how many older ones were left out.
        """
        return self._read(lambda conn: history.load(conn, self.dialect, session_id, max_messages))

    def touch(self, session_id: str) -> None:
        """Record activity on a session without a turn (inbound session/update)."""
        now = now_text()
        self._write(lambda conn: history.touch(conn, self.dialect, session_id, now))

    def list_sessions(self) -> list[StoredSessionInfo]:
        """Every stored session, most recently active first."""
        return self._read(lambda conn: history.list_all(conn, self.dialect))

    def list_page(
        self,
        *,
        workspace_dir: str | None,
        cursor: str | None,
        page_size: int = DEFAULT_PAGE_SIZE,
        principal: str | None = None,
    ) -> SessionPage:
        """One ``session/list`` page (storage/session_list.py), only ``principal``'s
        sessions when given; raises ``BadCursor``."""
        return self._read(
            lambda conn: read_page(
                conn,
                self.dialect,
                workspace_dir=workspace_dir,
                cursor=cursor,
                page_size=page_size,
                principal=principal,
            )
        )

    def set_title(self, session_id: str, title: str) -> bool:
        """Name a session that has no title yet; False when it had one (or is not stored)."""
        return self._write(lambda conn: history.set_title(conn, self.dialect, session_id, title))

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its conversation; False when there was no such session."""
        return self._write(lambda conn: history.delete(conn, self.dialect, session_id))

    # -- settings (storage/settings.py)

    def set_additional_dirs(self, session_id: str, directories: Sequence[str]) -> bool:
        """Store the session's extra jail roots (ACP ``additionalDirectories``), replacing
        the ones stored before; False when the session is not stored."""
        return self._write(
            lambda conn: settings.write_directories(conn, self.dialect, session_id, directories)
        )

    def additional_dirs(self, session_id: str) -> tuple[str, ...]:
        """The session's stored extra jail roots (none for an unknown session)."""
        return self._read(lambda conn: settings.read_directories(conn, self.dialect, session_id))

    def set_config_choices(self, session_id: str, choices: Mapping[str, str]) -> bool:
        """Replace the session's config option choices; False when it is not stored."""
        return self._write(
            lambda conn: settings.write_choices(conn, self.dialect, session_id, choices)
        )

    def config_choices(self, session_id: str) -> dict[str, str]:
        """The session's stored config option choices (empty: the agent's defaults)."""
        return self._read(lambda conn: settings.read_choices(conn, self.dialect, session_id))

    # -- the spending ledger (storage/spend.py)

    def record_spend(self, entry: SpendEntry) -> None:
        """Add one priced model call to the spending ledger."""
        self._write(lambda conn: insert_spend(conn, self.dialect, entry))

    def spend_totals(self, day: str, agent_alias: str, principal: str | None = None) -> SpendTotals:
        """What was spent on ``day`` (UTC ``YYYY-MM-DD``), in its month, by the agent and by
        ``principal`` (when given)."""
        return self._read(lambda conn: read_totals(conn, self.dialect, day, agent_alias, principal))

    def spend_summary(self, since_day: str) -> list[SpendRow]:
        """Spend per UTC day and agent from ``since_day`` on, newest first."""
        return self._read(lambda conn: read_summary(conn, self.dialect, since_day))

    # -- the gateway's paired tokens and their principals (storage/tokens.py)

    def import_tokens(self, digests: Sequence[str]) -> int:
        """Add config.toml's digests the store does not know yet; how many."""
        now = now_text()
        return self._write(
            lambda conn: paired_tokens.import_digests(conn, self.dialect, digests, now)
        )

    def add_token(self, digest: str, principal: str, source: str) -> None:
        """Pair ``digest`` as ``principal``; ``PrincipalTaken`` when the name is in use."""
        now = now_text()
        self._write(
            lambda conn: paired_tokens.insert_token(
                conn, self.dialect, digest, principal, source, now
            )
        )

    def token_principal(self, digest: str) -> str | None:
        """The principal of a live token, else None."""
        return self._read_statement(
            lambda conn: paired_tokens.principal_of(conn, self.dialect, digest)
        )

    def live_tokens(self) -> dict[str, str]:
        """Every live token: digest -> principal."""
        return self._read(lambda conn: paired_tokens.live_tokens(conn, self.dialect))

    def list_tokens(self) -> list[paired_tokens.PairedToken]:
        """Every token the store knows, live ones first."""
        return self._read(lambda conn: paired_tokens.list_tokens(conn, self.dialect))

    def revoke_tokens(self, digests: Sequence[str]) -> None:
        """Revoke ``digests``, announced to every process sharing the store."""
        now = now_text()

        def write(conn: ConnectionT) -> None:
            paired_tokens.revoke(conn, self.dialect, digests, now)
            self._announce_revoked(conn, digests)

        self._write(write)

    def _announce_revoked(self, conn: ConnectionT, digests: Sequence[str]) -> None:
        """Tell the other processes sharing the store, inside the revoking transaction
        (nothing to do for a store one process serves)."""

    def record_token_use(self, last_used: Mapping[str, str]) -> None:
        """Write the tokens' last-use times (digest -> ISO 8601 UTC)."""
        if last_used:
            self._write(lambda conn: paired_tokens.record_use(conn, self.dialect, last_used))
