"""What the session store hands out: its errors and the stored-session records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from acp_server.agent.conversation import ChatMessage, PlanEntry
from acp_server.errors import ZeroclawError


class StoreError(ZeroclawError):
    """A store operation failed (SQLite error, I/O error)."""


class StoreUnavailable(StoreError):
    """The store could not be opened; the server runs with in-memory sessions only."""


class UnknownSession(StoreError):
    """The session id has no row in the store (nothing was written)."""


class DuplicateSession(StoreError):
    """``create_session`` was given an id that is already stored."""


@dataclass(frozen=True, slots=True)
class StoredSessionInfo:
    session_id: str
    agent_alias: str
    workspace_dir: str
    created_at: datetime
    last_activity: datetime
    message_count: int
    token_count: int = 0
    turn_count: int = 0


@dataclass(frozen=True, slots=True)
class StoredSession:
    info: StoredSessionInfo
    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanEntry, ...] | None
    dropped_messages: int = 0
    """Stored messages left out by ``load_session``'s ``max_messages`` (oldest whole turns)."""

    @property
    def kept_turns(self) -> int:
        """Turns in ``messages`` (each turn starts with the user's prompt)."""
        return sum(message.role == "user" for message in self.messages)
