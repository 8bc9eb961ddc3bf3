"""The SQLite session store (``<workspace_dir>/sessions/acp-sessions.db``).

Seed, "Session persistence": every completed turn is written in one atomic transaction, a
session survives process restarts, and when the file cannot be created or opened the server
falls back to in-memory sessions (``StoreUnavailable``) without ever deleting that file. A
turn that cannot be written is kept in memory and written with the next commit that
succeeds (``AsyncSessionStore``, ``TurnUnsaved``).

``SessionStore`` is plain synchronous code (testable without trio, safe to call from several
threads); ``AsyncSessionStore`` runs every call on its own worker thread, one at a time, so
SQLite never blocks the event loop.

Schema (modelled on the reference server's, so a database the reference
created is adopted rather than rejected):

* ``acp_sessions``: one row per session (uuid, owner alias, workspace, timestamps,
  ``token_count``, ``plan_json`` = the latest plan, ``turn_count``, ``title``,
  ``owner_epoch`` = the fencing epoch of its one live copy: ``claim_session``).
* ``acp_messages``: one row per ``ChatMessage`` in conversation order (``id`` order),
  ``turn_seq`` = the turn that wrote it.
* ``acp_tool_calls``: ``'in'`` rows are the tool calls of a message (``payload`` = arguments
  JSON); an ``'out'`` row carries a tool result (``payload`` = result text) together with its
  ``tool_call_id`` and ``tool_name``. We attach ``'out'`` rows to the ``tool`` message that
  holds the result (so any message order round-trips exactly); the reference attached them to
  the preceding assistant message, and ``load_session`` reads that layout too.

Concurrency: WAL lets readers run beside one writer; every write is ``BEGIN IMMEDIATE``
(take the write lock up front, so a transaction never has to upgrade and fail half-way) under
SQLite's busy timeout, and is retried as a whole on SQLITE_BUSY until a bounded deadline, so
two processes sharing one file (two editor windows) never see "database is locked".

Modules: ``storage/migrations.py`` (the schema), ``storage/codec.py`` (messages and plans
as rows), ``storage/session_store.py`` (``SessionStore``), ``storage/async_store.py``
(``AsyncSessionStore`` and its worker thread), ``storage/records.py`` (errors and records),
``storage/session_list.py`` (``session/list`` paging);
this module re-exports their public names.
"""

from acp_server.storage.async_store import DEFAULT_STORE_THREAD_IDLE_SECS, AsyncSessionStore
from acp_server.storage.codec import DEFAULT_MAX_TOOL_ARGUMENTS_BYTES, plan_entries_json
from acp_server.storage.migrations import MIGRATIONS, SCHEMA_VERSION
from acp_server.storage.records import (
    DuplicateSession,
    SessionFenced,
    StoredSession,
    StoredSessionInfo,
    StoreError,
    StoreUnavailable,
    TurnUnsaved,
    UnknownSession,
)
from acp_server.storage.session_list import BadCursor, SessionPage
from acp_server.storage.session_store import (
    CREATOR_EPOCH,
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_LOCK_RETRY_DEADLINE_SECS,
    DEFAULT_MAX_RESTORED_MESSAGES,
    SessionStore,
)

__all__ = [
    "CREATOR_EPOCH",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_LOCK_RETRY_DEADLINE_SECS",
    "DEFAULT_MAX_RESTORED_MESSAGES",
    "DEFAULT_MAX_TOOL_ARGUMENTS_BYTES",
    "DEFAULT_STORE_THREAD_IDLE_SECS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "AsyncSessionStore",
    "BadCursor",
    "DuplicateSession",
    "SessionFenced",
    "SessionPage",
    "SessionStore",
    "StoreError",
    "StoreUnavailable",
    "StoredSession",
    "StoredSessionInfo",
    "TurnUnsaved",
    "UnknownSession",
    "plan_entries_json",
]
