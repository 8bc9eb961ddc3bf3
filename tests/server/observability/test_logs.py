"""The JSON log format: one object a line, with the context the task set."""

from __future__ import annotations

import json
import logging
import sys

import trio

from acp_server.observability.logs import (
    JsonFormatter,
    log_context,
    new_correlation_id,
    tag_this_task,
)


def _record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = sys.exc_info() if exc else None
    return logging.LogRecord(
        "acp_server.test", logging.WARNING, __file__, 1, message, args, exc_info
    )


def test_a_line_without_context_has_only_the_basic_fields() -> None:
    entry = json.loads(JsonFormatter().format(_record("hello %s", "world")))
    assert set(entry) == {"time", "level", "logger", "event"}
    assert entry["event"] == "hello world"
    assert entry["level"] == "warning"
    assert entry["time"].endswith("+00:00")


def test_the_context_is_written_and_restored() -> None:
    formatter = JsonFormatter()
    with log_context(principal="alice", correlation="c1"):
        with log_context(session="s1", turn="t1"):
            inner = json.loads(formatter.format(_record("in a turn")))
        outer = json.loads(formatter.format(_record("between turns")))
    after = json.loads(formatter.format(_record("after")))
    assert inner | {"time": ""} == {
        "time": "",
        "level": "warning",
        "logger": "acp_server.test",
        "event": "in a turn",
        "principal": "alice",
        "session": "s1",
        "turn": "t1",
        "correlation": "c1",
    }
    assert "session" not in outer
    assert outer["principal"] == "alice"
    assert "principal" not in after


def test_a_message_with_newlines_and_an_exception_stays_one_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        line = JsonFormatter().format(_record("two\nlines \u2028 and more", exc=True))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["event"] == "two\nlines \u2028 and more"
    assert "ValueError: bad" in entry["exception"]


async def test_tasks_started_by_a_tagged_task_carry_its_tags() -> None:
    seen: dict[str, str | None] = {}
    formatter = JsonFormatter()

    async def request_task(name: str) -> None:
        await trio.lowlevel.checkpoint()
        seen[name] = json.loads(formatter.format(_record(name))).get("correlation")

    async def connection(name: str, correlation: str) -> None:
        tag_this_task(correlation=correlation)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request_task, name)

    first, second = new_correlation_id(), new_correlation_id()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection, "first", first)
        nursery.start_soon(connection, "second", second)
    assert seen == {"first": first, "second": second}
    assert first != second
    assert "correlation" not in json.loads(formatter.format(_record("outside")))
