"""A session's settings in the store, beside its history, each read and written on its
own so that a change is kept the moment a client makes it: the extra jail roots
(``acp_sessions.additional_dirs_json``, a JSON array; ACP ``additionalDirectories``) and
the config option choices (``acp_sessions.config_json``, a JSON object ``{configId:
value}``; ACP ``session/set_config_option``). Both backends store them the same way
(SQLite schema steps 6 and 7, PostgreSQL step 3) with the statements below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal

from acp_server.storage.dialect import Connection, Dialect
from acp_server.storage.history import read_column

SettingColumn = Literal["additional_dirs_json", "config_json"]


def write_setting(
    conn: Connection, dialect: Dialect, column: SettingColumn, session_id: str, value: str | None
) -> bool:
    """Replace one stored setting of ``session_id``; False when it is not stored."""
    p = dialect.placeholder
    cursor = conn.execute(
        f"UPDATE acp_sessions SET {column} = {p} WHERE session_uuid = {p}",
        (value, dialect.text(session_id)),
    )
    return cursor.rowcount > 0


def read_setting(
    conn: Connection, dialect: Dialect, column: SettingColumn, session_id: str
) -> str | None:
    """One stored setting of ``session_id`` (None: not set, or not stored)."""
    row = read_column(conn, dialect, column, session_id)
    return None if row is None or row[0] is None else str(row[0])


def write_choices(
    conn: Connection, dialect: Dialect, session_id: str, choices: Mapping[str, str]
) -> bool:
    """Replace the stored choices of ``session_id``; False when it is not stored."""
    return write_setting(conn, dialect, "config_json", session_id, encode_choices(choices))


def read_choices(conn: Connection, dialect: Dialect, session_id: str) -> dict[str, str]:
    """The stored choices of ``session_id``; empty when none were made (or the row's text
    is not a JSON object of strings, which only a hand-edited database can hold)."""
    return decode_choices(read_setting(conn, dialect, "config_json", session_id))


def write_directories(
    conn: Connection, dialect: Dialect, session_id: str, directories: Sequence[str]
) -> bool:
    """Replace the stored extra jail roots of ``session_id``; False when it is not stored."""
    encoded = encode_directories(directories)
    return write_setting(conn, dialect, "additional_dirs_json", session_id, encoded)


def read_directories(conn: Connection, dialect: Dialect, session_id: str) -> tuple[str, ...]:
    """The stored extra jail roots of ``session_id`` (none for an unknown session)."""
    return decode_directories(read_setting(conn, dialect, "additional_dirs_json", session_id))


def encode_choices(choices: Mapping[str, str]) -> str:
    return json.dumps(dict(choices), sort_keys=True)


def decode_choices(encoded: str | None) -> dict[str, str]:
    """A stored ``config_json`` value; anything but a JSON object reads as no choices."""
    if encoded is None:
        return {}
    try:
        decoded = json.loads(encoded)
    except ValueError:
        return {}
    if not isinstance(decoded, dict):
        return {}
    return {key: value for key, value in decoded.items() if isinstance(value, str)}


def encode_directories(directories: Sequence[str]) -> str | None:
    return json.dumps(list(directories)) if directories else None


def decode_directories(encoded: str | None) -> tuple[str, ...]:
    """A stored ``additional_dirs_json`` value; anything but a list of strings reads as none."""
    if not encoded:
        return ()
    try:
        value = json.loads(encoded)
    except ValueError:
        return ()
    if not isinstance(value, list):
        return ()
    return tuple(entry for entry in value if isinstance(entry, str))
