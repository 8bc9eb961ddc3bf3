"""A session's settings in the store, beside its history, each read and written on its
own so that a change is kept the moment a client makes it: the extra jail roots
(``acp_sessions.additional_dirs_json``, a JSON array; SQLite schema step 6) and the config
option choices (``acp_sessions.config_json``, a JSON object ``{configId: value}``; step 7).
PostgreSQL stores both the same way (its schema step 3)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence


def write_choices(conn: sqlite3.Connection, session_id: str, choices: Mapping[str, str]) -> bool:
    """Replace the stored choices of ``session_id``; False when it is not stored."""
    cursor = conn.execute(
        "UPDATE acp_sessions SET config_json = ? WHERE session_uuid = ?",
        (encode_choices(choices), session_id),
    )
    return cursor.rowcount > 0


def read_choices(conn: sqlite3.Connection, session_id: str) -> dict[str, str]:
    """The stored choices of ``session_id``; empty when none were made (or the row's text
    is not a JSON object of strings, which only a hand-edited database can hold)."""
    row = conn.execute(
        "SELECT config_json FROM acp_sessions WHERE session_uuid = ?", (session_id,)
    ).fetchone()
    return decode_choices(row[0] if row is not None else None)


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
