"""The SQLite backend: every session in one file, ``<workspace_dir>/sessions/acp-sessions.db``.

The zero-configuration store (the ZeroClaw ACP documentation, "Session persistence"):

* ``store.py``: ``SessionStore``, the contract (storage/contract.py) on one SQLite
  connection: opening and checking the file, WAL, busy retries, transactions;
* ``schema.py``: the tables and their numbered migrations (``PRAGMA user_version``);
* ``export.py``: every session's rows, for ``zeroclaw storage import-sqlite``.

The statements themselves are shared with PostgreSQL (storage/sql_store.py).
"""

from acp_server.storage.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from acp_server.storage.sqlite.store import (
    DEFAULT_BUSY_TIMEOUT_MS,
    DEFAULT_CREATE_LOCK_DEADLINE_SECS,
    DEFAULT_LOCK_RETRY_DEADLINE_SECS,
    SessionStore,
)

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_MS",
    "DEFAULT_CREATE_LOCK_DEADLINE_SECS",
    "DEFAULT_LOCK_RETRY_DEADLINE_SECS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SessionStore",
]
