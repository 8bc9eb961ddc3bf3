"""The session store: every answered turn of every session, kept so a session can be loaded
again (the ZeroClaw ACP documentation, "Session persistence"; docs/persistence.md).

This module is what the rest of the server imports: the trio-facing ``AsyncSessionStore``,
the opener that picks a backend from a configuration's location, the records and errors
the store hands out. Layout:

* ``contract.py``: ``SessionBackend``, the blocking interface every backend implements;
* ``async_store.py``: ``AsyncSessionStore``, any backend on one worker thread, keeping the
  turns it could not write;
* ``opener.py``: ``open_store`` / ``open_backend`` by location (a PostgreSQL URL, else the
  SQLite file);
* ``sql_store.py`` with ``history.py``, ``settings.py``, ``spend.py``, ``session_list.py``:
  the statements both SQL backends share, written once (``dialect.py``: placeholders and
  NUL escaping), by concept;
* ``codec.py``: messages, plans and tool records as column values;
* ``records.py``: what the store hands out; ``transfer.py``: rows copied between stores;
* ``sqlite/`` and ``postgres/``: the two backends, each with its own schema and
  transactions (PostgreSQL also: replica leases, shared gateway tokens, the SQLite import).

Below the store: the conversation model it keeps (acp_server/model.py), ``errors``,
``procfs`` and the pairing rules (security/pairing.py); it never imports the agent, the
protocol, the gateway or the CLI (tests/meta/test_storage_layout.py and the import contract
in pyproject.toml).
"""

from acp_server.storage.async_store import (
    DEFAULT_MAX_UNSAVED_TURNS,
    DEFAULT_STORE_THREAD_IDLE_SECS,
    AsyncSessionStore,
)
from acp_server.storage.codec import DEFAULT_MAX_TOOL_ARGUMENTS_BYTES, plan_entries_json
from acp_server.storage.contract import HealthCheckedBackend, SessionBackend
from acp_server.storage.opener import (
    StoreLocation,
    describe_location,
    open_backend,
    open_store,
)
from acp_server.storage.records import (
    CREATOR_EPOCH,
    DEFAULT_MAX_RESTORED_MESSAGES,
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
from acp_server.storage.spend import SpendEntry, SpendRow, SpendTotals
from acp_server.storage.tokens import PairedToken, PrincipalTaken, imported_principal

__all__ = [
    "CREATOR_EPOCH",
    "DEFAULT_MAX_RESTORED_MESSAGES",
    "DEFAULT_MAX_TOOL_ARGUMENTS_BYTES",
    "DEFAULT_MAX_UNSAVED_TURNS",
    "DEFAULT_STORE_THREAD_IDLE_SECS",
    "AsyncSessionStore",
    "BadCursor",
    "DuplicateSession",
    "HealthCheckedBackend",
    "PairedToken",
    "PrincipalTaken",
    "SessionBackend",
    "SessionFenced",
    "SessionPage",
    "SpendEntry",
    "SpendRow",
    "SpendTotals",
    "StoreError",
    "StoreLocation",
    "StoreUnavailable",
    "StoredSession",
    "StoredSessionInfo",
    "TurnUnsaved",
    "UnknownSession",
    "describe_location",
    "imported_principal",
    "open_backend",
    "open_store",
    "plan_entries_json",
]
