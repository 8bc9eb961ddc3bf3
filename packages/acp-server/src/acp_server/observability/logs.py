"""The context of a log line, and the two formats a server writes its log in.

Who and what a line is about (the connection's principal, the session, the turn, the
correlation id of the connection) lives in ``contextvars``: a trio task starts with a copy of
the context of the task that spawned it, so whatever the connection set before it started
its request tasks, and a turn set for itself, is on every line logged below it, without
passing it down by hand.

``human`` (the default): ``zeroclaw: LEVEL: message``. ``json``: one JSON object per line
with ``time`` (UTC, RFC 3339), ``level``, ``logger``, ``event`` (the message) and, when known,
``principal``, ``session``, ``turn`` and ``correlation``; an exception's traceback is in
``exception``. Either goes to stderr only: in stdio mode stdout carries protocol frames.
"""

from __future__ import annotations

import contextvars
import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Final, Literal

LogFormat = Literal["human", "json"]
LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("human", "json")
HUMAN_FORMAT: Final = "zeroclaw: %(levelname)s: %(message)s"
CORRELATION_ID_BYTES: Final = 6
TURN_ID_BYTES: Final = 6

log_principal: Final = contextvars.ContextVar[str | None]("log_principal", default=None)
log_session: Final = contextvars.ContextVar[str | None]("log_session", default=None)
log_turn: Final = contextvars.ContextVar[str | None]("log_turn", default=None)
log_correlation: Final = contextvars.ContextVar[str | None]("log_correlation", default=None)

_CONTEXT_FIELDS: Final = (
    ("principal", log_principal),
    ("session", log_session),
    ("turn", log_turn),
    ("correlation", log_correlation),
)


def new_correlation_id() -> str:
    """A short random id for one client connection (on its log lines and in its metrics
    never: it is unbounded)."""
    return secrets.token_hex(CORRELATION_ID_BYTES)


def new_turn_id() -> str:
    return secrets.token_hex(TURN_ID_BYTES)


@contextmanager
def log_context(
    *,
    principal: str | None = None,
    session: str | None = None,
    turn: str | None = None,
    correlation: str | None = None,
) -> Iterator[None]:
    """Tag every line logged inside (and in tasks started inside) with these fields; the
    ones given as None keep what the surrounding context has. Restored on the way out."""
    tokens: list[tuple[contextvars.ContextVar[str | None], contextvars.Token[str | None]]] = []
    for var, value in (
        (log_principal, principal),
        (log_session, session),
        (log_turn, turn),
        (log_correlation, correlation),
    ):
        if value is not None:
            tokens.append((var, var.set(value)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def tag_this_task(*, principal: str | None = None, correlation: str | None = None) -> None:
    """Set these fields for the rest of the calling task and the tasks it starts from now
    on. Only for a task that serves one connection and ends with it (each connection's
    task starts from a copy of its parent's context, so nothing leaks to the next one),
    where a ``with log_context(...)`` would indent the whole body."""
    if principal is not None:
        log_principal.set(principal)
    if correlation is not None:
        log_correlation.set(correlation)


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for name, var in _CONTEXT_FIELDS:
            value = var.get()
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # ensure_ascii keeps the line one line of ASCII whatever a message holds.
        return json.dumps(entry, ensure_ascii=True, default=str)


def formatter_for(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else logging.Formatter(HUMAN_FORMAT)


def use_log_format(log_format: LogFormat) -> None:
    """Switch every handler of the root logger (the CLI's one stderr handler) to
    ``log_format``."""
    formatter = formatter_for(log_format)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
