"""The SQLite session store (``<workspace_dir>/sessions/acp-sessions.db``).

Contract used by the ACP server; implementation owned by the persistence work (issue 5).
``SessionStore`` is plain synchronous code (testable without trio);
``AsyncSessionStore`` runs every call on a worker thread, one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from acp_server.conversation import ChatMessage, CompletedTurn, PlanEntry


class StoreError(Exception):
    """A store operation failed (SQLite error, I/O error)."""


class StoreUnavailable(StoreError):
    """The store could not be opened; the server runs with in-memory sessions only."""


@dataclass(frozen=True, slots=True)
class StoredSessionInfo:
    session_id: str
    agent_alias: str
    workspace_dir: str
    created_at: datetime
    last_activity: datetime
    message_count: int


@dataclass(frozen=True, slots=True)
class StoredSession:
    info: StoredSessionInfo
    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanEntry, ...] | None


class SessionStore:
    @classmethod
    def open(cls, path: Path) -> SessionStore:
        raise NotImplementedError

    def create_session(self, session_id: str, agent_alias: str, workspace_dir: str) -> None:
        raise NotImplementedError

    def append_turn(self, session_id: str, turn: CompletedTurn) -> None:
        """Write one completed turn in one transaction (all or nothing)."""
        raise NotImplementedError

    def load_session(self, session_id: str) -> StoredSession | None:
        raise NotImplementedError

    def touch(self, session_id: str) -> None:
        raise NotImplementedError

    def list_sessions(self) -> list[StoredSessionInfo]:
        raise NotImplementedError

    def delete_session(self, session_id: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class AsyncSessionStore:
    """Runs a ``SessionStore`` on a worker thread, one call at a time (trio)."""

    def __init__(self, store: SessionStore) -> None:
        self.sync = store

    async def create_session(self, session_id: str, agent_alias: str, workspace_dir: str) -> None:
        raise NotImplementedError

    async def append_turn(self, session_id: str, turn: CompletedTurn) -> None:
        raise NotImplementedError

    async def load_session(self, session_id: str) -> StoredSession | None:
        raise NotImplementedError

    async def touch(self, session_id: str) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError
