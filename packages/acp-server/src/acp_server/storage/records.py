"""What the session store hands out, whichever backend holds it: its errors, the
stored-session records, and the figures every backend applies the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Final

import msgspec

from acp_server.errors import SessionFenced as SessionFenced
from acp_server.errors import StoreError as StoreError
from acp_server.model import ChatMessage, PlanStep

CREATOR_EPOCH: Final = 1
"""The fencing epoch a new session's row starts at, and its creator holds."""

DEFAULT_MAX_RESTORED_MESSAGES: Final = 20_000
"""Most messages ``load_session`` returns. Older whole turns beyond it stay in the store but
are not restored, so a restore's memory and replay time stay bounded however long a
session grew; the caller learns how many were left out (``StoredSession.dropped_messages``)."""


class StoreUnavailable(StoreError):
    """The store could not be opened; the server runs with in-memory sessions only."""


class UnknownSession(StoreError):
    """The session id has no row in the store (nothing was written)."""


class DuplicateSession(StoreError):
    """``create_session`` was given an id that is already stored."""


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


class StoredSessionInfo(msgspec.Struct, frozen=True):
    session_id: str
    agent_alias: str
    workspace_dir: str
    created_at: datetime
    last_activity: datetime
    message_count: int
    token_count: int = 0
    turn_count: int = 0
    title: str | None = None
    principal: str | None = None
    """Who the session belongs to: a gateway principal's name, None for the local operator."""


class StoredSession(msgspec.Struct, frozen=True):
    info: StoredSessionInfo
    messages: tuple[ChatMessage, ...]
    plan: tuple[PlanStep, ...] | None
    dropped_messages: int = 0
    """Stored messages left out by ``load_session``'s ``max_messages`` (oldest whole turns)."""

    @property
    def kept_turns(self) -> int:
        """Turns in ``messages`` (each turn starts with the user's prompt)."""
        return sum(message.role == "user" for message in self.messages)
