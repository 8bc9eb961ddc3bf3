"""The PostgreSQL backend: one database that several processes and replicas share.

Selected by ``[storage] url`` (or ``ZEROCLAW_STORAGE_URL``); needs the ``postgres`` extra
(psycopg 3). Docs: docs/persistence.md, "A shared store: PostgreSQL".

* ``store.py``: ``PostgresSessionStore``, the contract (storage/contract.py) on one psycopg
  connection that is opened again after it broke, with batched turn inserts;
* ``schema.py``: the tables and their numbered migrations (``acp_schema_version``), run
  under an advisory lock so replicas starting together migrate once;
* ``leases.py``: one live copy of a session across replicas (advisory locks, takeover
  notifications);
* ``tokens.py``: the gateway's paired token digests and pairing code, shared by replicas;
* ``importer.py``: sessions copied in from an SQLite store.

The statements a session's history, settings and spending share with SQLite are in
storage/sql_store.py; nothing here imports the SQLite backend.
"""

from acp_server.storage.postgres.schema import PG_SCHEMA_VERSION
from acp_server.storage.postgres.store import PostgresSessionStore, describe_url

__all__ = ["PG_SCHEMA_VERSION", "PostgresSessionStore", "describe_url"]
