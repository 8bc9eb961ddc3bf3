"""What tells the two SQL backends apart in the statements they share.

The session tables have the same names and columns in SQLite and PostgreSQL
(storage/sqlite/schema.py, storage/postgres/schema.py), so one statement serves both once
its placeholders are the driver's: ``?`` for sqlite3, ``%s`` for psycopg (both DB-API
"paramstyles", PEP 249). The other difference is NUL: PostgreSQL ``text`` cannot hold
U+0000, so text a client, a model or a tool wrote goes through ``codec.escape_nul`` on
the way in and ``unescape_nul`` on the way out there, and through nothing in SQLite.

``Connection`` is the part of a DB-API connection the shared statements use; sqlite3's and
psycopg's connections both have it (``execute`` returns a cursor).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, Protocol

import msgspec

from acp_server.storage.codec import escape_nul, unescape_nul


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, query: str, params: Sequence[Any], /) -> Cursor: ...


class Dialect(msgspec.Struct, frozen=True):
    name: str
    placeholder: str
    """The driver's parameter marker."""
    escapes_nul: bool
    """Whether text columns need ``escape_nul`` (they cannot hold U+0000)."""

    def params(self, count: int) -> str:
        """``count`` placeholders, comma-separated (for a VALUES list)."""
        return ", ".join([self.placeholder] * count)

    def text(self, value: str) -> str:
        """A client's text as this backend stores it."""
        return escape_nul(value) if self.escapes_nul else value

    def optional_text(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def read_text(self, stored: str) -> str:
        """Stored text as the client wrote it."""
        return unescape_nul(stored) if self.escapes_nul else stored

    def read_optional_text(self, stored: str | None) -> str | None:
        return None if stored is None else self.read_text(stored)


SQLITE: Final = Dialect("sqlite", "?", escapes_nul=False)
POSTGRES: Final = Dialect("postgres", "%s", escapes_nul=True)
