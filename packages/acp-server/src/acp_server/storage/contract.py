"""The session store's contract: what every backend (SQLite, PostgreSQL) offers the server.

``SessionBackend`` is the blocking interface both ``SessionStore`` (storage/sqlite/, one
SQLite file) and ``PostgresSessionStore`` (storage/postgres/, a shared database) implement,
with the statements they share (storage/sql_store.py); ``AsyncSessionStore``
(storage/async_store.py) runs any of them on its worker thread, so the protocol layer never
knows which one it talks to.

Every method may raise ``StoreError`` (storage/records.py); the finer errors it names are
part of the contract and are the same on every backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from acp_server.model import CompletedTurn
from acp_server.storage.records import StoredSession, StoredSessionInfo
from acp_server.storage.session_list import SessionPage
from acp_server.storage.spend import SpendEntry, SpendRow, SpendTotals
from acp_server.storage.tokens import PairedToken


class SessionBackend(Protocol):
    """Blocking, thread-safe access to stored sessions (calls may be serialized)."""

    @property
    def location(self) -> str:
        """Where the store is, for messages (a file's path; a database's URL without its
        password)."""

    def create_session(
        self,
        session_id: str,
        agent_alias: str,
        workspace_dir: str,
        *,
        principal: str | None = ...,
    ) -> None:
        """Store a new, empty session of ``principal`` (None: the local operator);
        ``DuplicateSession`` when the id is taken."""

    def session_owned_by(self, session_id: str, principal: str) -> bool:
        """Whether the session is stored and belongs to ``principal``."""

    def append_turn(
        self, session_id: str, turn: CompletedTurn, *, epoch: int | None = None
    ) -> None:
        """Write one completed turn, all or nothing; ``UnknownSession`` when not stored,
        ``SessionFenced`` (nothing written) when ``epoch`` is given and not current."""

    def append_turns(
        self, session_id: str, turns: Sequence[CompletedTurn], *, epoch: int | None = None
    ) -> None:
        """Write ``turns`` in order in one transaction, as ``append_turn``."""

    def claim_session(self, session_id: str) -> int | None:
        """Make the caller the session's one live copy: bump its fencing epoch (a new
        session starts at 1) and return it; None when not stored."""

    def current_epoch(self, session_id: str) -> int | None:
        """The session's fencing epoch (None: not stored)."""

    def load_session(
        self, session_id: str, *, max_messages: int | None = ...
    ) -> StoredSession | None:
        """The stored session (its newest whole turns within ``max_messages``), or None."""

    def touch(self, session_id: str) -> None:
        """Record activity without a turn; ``UnknownSession`` when not stored."""

    def list_sessions(self) -> list[StoredSessionInfo]:
        """Every stored session, most recently active first."""

    def list_page(
        self, *, workspace_dir: str | None, cursor: str | None, principal: str | None = ...
    ) -> SessionPage:
        """One ``session/list`` page (storage/session_list.py), only ``principal``'s
        sessions when given; raises ``BadCursor``."""

    def set_title(self, session_id: str, title: str) -> bool:
        """Name a session that has no title yet; False when it had one or is not stored."""

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and its conversation; False when there was none."""

    def set_additional_dirs(self, session_id: str, directories: Sequence[str]) -> bool:
        """Replace the session's extra jail roots; False when it is not stored."""

    def additional_dirs(self, session_id: str) -> tuple[str, ...]:
        """The session's stored extra jail roots (none for an unknown session)."""

    def set_config_choices(self, session_id: str, choices: Mapping[str, str]) -> bool:
        """Replace the session's config option choices; False when it is not stored."""

    def config_choices(self, session_id: str) -> dict[str, str]:
        """The session's stored config option choices (empty: the agent's defaults)."""

    def record_spend(self, entry: SpendEntry) -> None:
        """Add one priced model call to the spending ledger (storage/spend.py)."""

    def spend_totals(self, day: str, agent_alias: str, principal: str | None = ...) -> SpendTotals:
        """What was spent on ``day``, in its month, by ``agent_alias`` on ``day`` and by
        ``principal`` on ``day`` (when given)."""

    def spend_summary(self, since_day: str) -> list[SpendRow]:
        """Spend per day and agent from ``since_day`` on, newest day first."""

    def import_tokens(self, digests: Sequence[str]) -> int:
        """Add the token digests the store does not know yet (storage/tokens.py); how many."""

    def add_token(self, digest: str, principal: str, source: str) -> None:
        """Pair ``digest`` as ``principal``; ``PrincipalTaken`` when a live token has it."""

    def token_principal(self, digest: str) -> str | None:
        """The principal of a live token, else None."""

    def live_tokens(self) -> dict[str, str]:
        """Every live token: digest -> principal."""

    def list_tokens(self) -> list[PairedToken]:
        """Every token the store knows (revoked ones too), live ones first."""

    def revoke_tokens(self, digests: Sequence[str]) -> None:
        """Revoke ``digests`` (announced to every process sharing the store)."""

    def record_token_use(self, last_used: Mapping[str, str]) -> None:
        """Write the tokens' last-use times (digest -> ISO 8601 UTC), never moving one back."""

    def close(self) -> None:
        """Release the backend's connections; idempotent. Later calls raise ``StoreError``."""


@runtime_checkable
class HealthCheckedBackend(Protocol):
    """A backend that can lose its database while the process runs (a server over the
    network): ``ping`` raises ``StoreError`` while it cannot reach it."""

    def ping(self) -> None:
        """Reach the database once (reconnecting when needed) or raise ``StoreError``."""
