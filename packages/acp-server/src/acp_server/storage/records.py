"""What the session store hands out: its errors and the stored-session records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from acp_server.agent.conversation import ChatMessage, PlanStep
from acp_server.errors import ZeroclawError


class StoreError(ZeroclawError):
    """A store operation failed (SQLite error, I/O error)."""


class StoreUnavailable(StoreError):
    """The store could not be opened; the server runs with in-memory sessions only."""


class UnknownSession(StoreError):
    """The session id has no row in the store (nothing was written)."""


class DuplicateSession(StoreError):
    """``create_session`` was given an id that is already stored."""


class SessionFenced(StoreError):
    """A turn commit carried a fencing epoch the session row no longer has: another copy
    claimed the session since (``claim_session``), and nothing was written."""

    def __init__(self, session_id: str, *, epoch: int, current: int) -> None:
        super().__init__(
            f"Session {session_id} is held by epoch {current}; a commit of epoch {epoch}"
            " was refused"
        )
        self.session_id = session_id
        self.epoch = epoch
        self.current = current


class TurnUnsaved(StoreError):
    """A completed turn could not be written.

    ``kept``: the turn is held in memory and is written, after the session's earlier unsaved
    turns and in order, with the next commit that succeeds (``pending`` turns of the session
    are waiting now); otherwise it is lost (too many unsaved turns, or the session is no
    longer in the store).
    """

    def __init__(self, message: str, *, kept: bool, pending: int) -> None:
        super().__init__(message)
        self.kept = kept
        self.pending = pending


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
    title: str | None = None


@dataclass(frozen=True, slots=True)
class StoredSession:
    info: StoredSessionInfo
    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanStep, ...] | None
    dropped_messages: int = 0
    """Stored messages left out by ``load_session``'s ``max_messages`` (oldest whole turns)."""

    @property
    def kept_turns(self) -> int:
        """Turns in ``messages`` (each turn starts with the user's prompt)."""
        return sum(message.role == "user" for message in self.messages)
