"""The gateway's paired tokens and the principals they name, written once for both backends.

``acp_paired_tokens`` (storage/sqlite/schema.py, storage/postgres/schema.py): one row per
token digest (SHA-256 hex, never a token) with the ``principal`` it belongs to (the name
given at pairing, or ``token-<digest prefix>`` for a token paired before tokens had
names), where it came from (``source``: ``pair``, ``admin``, ``config.toml``), when it
was paired, when it was last used (written at most once a minute per token by the
gateway, never per request) and ``revoked_at`` once revoked. A revoked row stays, so
importing an old config.toml never brings the token back. At most one live token per
principal (a partial unique index): a second pairing under a name in use is refused with
``PrincipalTaken`` rather than handing the newcomer that principal's sessions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import msgspec

from acp_server.storage.dialect import Connection, Dialect
from acp_server.storage.records import StoreError

IMPORTED_PRINCIPAL_PREFIX: Final = "token-"
IMPORTED_DIGEST_CHARS: Final = 12
"""A token paired before tokens had names is ``token-<first 12 digest digits>``."""

_TOKEN_COLUMNS: Final = "digest, principal, source, paired_at, last_used_at, revoked_at"


class PrincipalTaken(StoreError):
    """Another live token already belongs to that principal."""


class PairedToken(msgspec.Struct, frozen=True):
    """One row of ``acp_paired_tokens`` (times are ISO 8601 UTC text)."""

    digest: str
    principal: str
    source: str
    paired_at: str
    last_used_at: str | None
    revoked_at: str | None


def imported_principal(digest: str) -> str:
    """The name a token paired before tokens had names is listed under."""
    return f"{IMPORTED_PRINCIPAL_PREFIX}{digest[:IMPORTED_DIGEST_CHARS]}"


def _normalized(digest: str) -> str:
    return digest.strip().lower()


def import_digests(conn: Connection, dialect: Dialect, digests: Iterable[str], now: str) -> int:
    """Add the digests the store does not know yet (paired or revoked), each under its
    imported name; how many were added."""
    p = dialect.placeholder
    added = 0
    for digest in dict.fromkeys(_normalized(d) for d in digests if d.strip()):
        cursor = conn.execute(
            f"INSERT INTO acp_paired_tokens ({_TOKEN_COLUMNS}) VALUES ({p}, {p}, 'config.toml',"
            f" {p}, NULL, NULL) ON CONFLICT DO NOTHING",
            (digest, imported_principal(digest), now),
        )
        added += max(cursor.rowcount, 0)
    return added


def insert_token(
    conn: Connection, dialect: Dialect, digest: str, principal: str, source: str, now: str
) -> None:
    """Pair ``digest`` as ``principal``; ``PrincipalTaken`` (nothing written) when a live
    token already has that name."""
    p = dialect.placeholder
    taken = conn.execute(
        f"SELECT 1 FROM acp_paired_tokens WHERE principal = {p} AND revoked_at IS NULL",
        (dialect.text(principal),),
    ).fetchone()
    if taken is not None:
        raise PrincipalTaken(f"a live token is already named {principal!r}")
    conn.execute(
        f"INSERT INTO acp_paired_tokens ({_TOKEN_COLUMNS}) VALUES ({p}, {p}, {p}, {p}, NULL, NULL)",
        (_normalized(digest), dialect.text(principal), source, now),
    )


def principal_of(conn: Connection, dialect: Dialect, digest: str) -> str | None:
    """The principal of a live (paired, unrevoked) token, else None."""
    row = conn.execute(
        "SELECT principal FROM acp_paired_tokens"
        f" WHERE digest = {dialect.placeholder} AND revoked_at IS NULL",
        (_normalized(digest),),
    ).fetchone()
    return None if row is None else dialect.read_text(row[0])


def live_tokens(conn: Connection, dialect: Dialect) -> dict[str, str]:
    """Every live token: digest -> principal."""
    rows = conn.execute(
        "SELECT digest, principal FROM acp_paired_tokens WHERE revoked_at IS NULL ORDER BY digest",
        (),
    ).fetchall()
    return {str(row[0]): dialect.read_text(row[1]) for row in rows}


def list_tokens(conn: Connection, dialect: Dialect) -> list[PairedToken]:
    """Every token the store knows, live ones first, then by principal and pairing time."""
    rows = conn.execute(
        f"SELECT {_TOKEN_COLUMNS} FROM acp_paired_tokens"
        " ORDER BY revoked_at IS NOT NULL, principal, paired_at",
        (),
    ).fetchall()
    return [
        PairedToken(
            digest=str(row[0]),
            principal=dialect.read_text(row[1]),
            source=str(row[2]),
            paired_at=str(row[3]),
            last_used_at=None if row[4] is None else str(row[4]),
            revoked_at=None if row[5] is None else str(row[5]),
        )
        for row in rows
    ]


def revoke(conn: Connection, dialect: Dialect, digests: Sequence[str], now: str) -> None:
    """Mark ``digests`` revoked (those revoked already keep their first time)."""
    p = dialect.placeholder
    for digest in digests:
        conn.execute(
            f"UPDATE acp_paired_tokens SET revoked_at = {p}"
            f" WHERE digest = {p} AND revoked_at IS NULL",
            (now, _normalized(digest)),
        )


def record_use(conn: Connection, dialect: Dialect, last_used: Mapping[str, str]) -> None:
    """Write each token's last-use time (never moving it back)."""
    p = dialect.placeholder
    for digest, when in last_used.items():
        conn.execute(
            f"UPDATE acp_paired_tokens SET last_used_at = {p} WHERE digest = {p}"
            f" AND (last_used_at IS NULL OR last_used_at < {p})",
            (when, _normalized(digest), when),
        )
