"""What reading a tool call's arguments costs: one msgspec Struct per tool
(acp_server/agent/tools/arguments.py) next to the hand-written checks it replaced, in the
same run.

Run: ``uv run python bench/tool_arguments.py [--runs N]`` (a benchmark, not a test: it
prints figures, exits 0). ``hand`` is the old reading, kept here as it was (a
``required_str`` / ``optional_int`` … call per argument, each string searched for a lone
surrogate, todo_write's items checked one by one); ``struct`` is ``parse_arguments``: the
lone-surrogate walk, then ``msgspec.convert`` into the tool's Struct. Both read the same
typical arguments of five tools; each sample times ``BATCH`` calls and the two alternate
sample by sample, so drift on a shared machine hits both alike. What follows the reading
(the policy, the tool's work) is the same for both and left out.

A second table times the runtime's own lone-surrogate check on the same arguments
(``_args.unreadable_argument``, run for every call before any tool): ``walk`` is how it
was (every string searched), ``encode`` is how it is (one ``msgspec.json.encode``, which
fails on a lone surrogate; the walk then only says where).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from acp_server.agent.tools._args import unreadable_argument
from acp_server.agent.tools._text import LONE_SURROGATE
from acp_server.agent.tools.arguments import ToolArguments, parse_arguments
from acp_server.agent.tools.files import FileReadArguments
from acp_server.agent.tools.interaction import TodoWriteArguments
from acp_server.agent.tools.search import ContentSearchArguments
from acp_server.agent.tools.shell import ShellArguments
from acp_server.agent.tools.web import HttpRequestArguments

DEFAULT_RUNS: Final = 2_000
WARM_UP: Final = 200
BATCH: Final = 100
"""Calls per sample (one call is below the clock's useful resolution)."""


class Refused(Exception):
    pass


# --- the hand-written reading, as it was ----------------------------------------------------


def checked_text(key: str, value: str) -> str:
    found = LONE_SURROGATE.search(value)
    if found is not None:
        raise Refused(f"Invalid '{key}': unpaired surrogate at {found.start()}")
    return value


def required_str(arguments: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        raise Refused(f"Missing or invalid '{key}': expected a string")
    if not allow_empty and not value:
        raise Refused(f"'{key}' must not be empty")
    return checked_text(key, value)


def optional_str(arguments: Mapping[str, Any], key: str) -> str | None:
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Refused(f"Invalid '{key}': expected a string")
    return checked_text(key, value)


def optional_int(
    arguments: Mapping[str, Any], key: str, *, minimum: int, maximum: int | None = None
) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"Invalid '{key}': expected an integer")
    if value < minimum:
        raise Refused(f"Invalid '{key}': must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise Refused(f"Invalid '{key}': must be at most {maximum}")
    return value


def optional_bool(arguments: Mapping[str, Any], key: str) -> bool | None:
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise Refused(f"Invalid '{key}': expected true or false")
    return value


def walked_unreadable(value: Any, where: str = "") -> str | None:
    """The runtime's surrogate check as it was: every string and name searched."""
    if isinstance(value, str):
        return where if LONE_SURROGATE.search(value) is not None else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            name = str(key)
            if LONE_SURROGATE.search(name) is not None:
                return name
            problem = walked_unreadable(item, f"{where}.{name}" if where else name)
            if problem is not None:
                return problem
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = walked_unreadable(item, f"{where}[{index}]")
            if problem is not None:
                return problem
    return None


def hand_file_read(arguments: Mapping[str, Any]) -> object:
    return (
        required_str(arguments, "path"),
        optional_int(arguments, "offset", minimum=1),
        optional_int(arguments, "limit", minimum=1),
    )


def hand_shell(arguments: Mapping[str, Any]) -> object:
    return required_str(arguments, "command")


def hand_content_search(arguments: Mapping[str, Any]) -> object:
    return (
        required_str(arguments, "pattern"),
        optional_str(arguments, "path"),
        optional_str(arguments, "include"),
        optional_bool(arguments, "case_sensitive"),
        optional_int(arguments, "max_results", minimum=1, maximum=1000),
    )


def hand_todo_write(arguments: Mapping[str, Any]) -> object:
    todos = arguments.get("todos")
    if not isinstance(todos, list) or len(todos) > 100:
        raise Refused("todos")
    entries = []
    for index, raw in enumerate(todos):
        if not isinstance(raw, dict):
            raise Refused(f"todos[{index}]")
        content = raw.get("content")
        if not isinstance(content, str) or not content.strip() or len(content) > 1000:
            raise Refused(f"todos[{index}].content")
        status = raw.get("status", "pending")
        if status not in ("pending", "in_progress", "completed"):
            raise Refused(f"todos[{index}].status")
        priority = raw.get("priority", "medium")
        if priority not in ("high", "medium", "low"):
            raise Refused(f"todos[{index}].priority")
        active_form = raw.get("activeForm")
        if active_form is not None and not isinstance(active_form, str):
            raise Refused(f"todos[{index}].activeForm")
        entries.append((content.strip(), status, priority, active_form))
    return entries


def hand_http_request(arguments: Mapping[str, Any]) -> object:
    url = required_str(arguments, "url")
    method = (optional_str(arguments, "method") or "GET").upper()
    if method not in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
        raise Refused("method")
    headers = arguments.get("headers")
    if headers is not None and (
        not isinstance(headers, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise Refused("headers")
    return url, method, headers, optional_str(arguments, "body")


# --- the calls read --------------------------------------------------------------------------

Reader = Callable[[Mapping[str, Any]], object]
CASES: Final[list[tuple[str, Reader, type[ToolArguments], dict[str, Any]]]] = [
    (
        "file_read",
        hand_file_read,
        FileReadArguments,
        {
            "path": "packages/acp-server/src/acp_server/agent/runtime/turn.py",
            "offset": 120,
            "limit": 80,
        },
    ),
    ("shell", hand_shell, ShellArguments, {"command": "uv run pytest -q tests/server -x"}),
    (
        "content_search",
        hand_content_search,
        ContentSearchArguments,
        {
            "pattern": r"def \w+_arguments",
            "path": "packages",
            "include": "*.py",
            "case_sensitive": False,
            "max_results": 50,
        },
    ),
    (
        "todo_write",
        hand_todo_write,
        TodoWriteArguments,
        {
            "todos": [
                {"content": f"Step {n}: do the thing", "status": "pending", "activeForm": "Doing"}
                for n in range(5)
            ]
        },
    ),
    (
        "http_request",
        hand_http_request,
        HttpRequestArguments,
        {
            "url": "https://api.example.com/v1/items?limit=10",
            "method": "POST",
            "headers": {"Content-Type": "application/json", "Accept": "application/json"},
            "body": '{"name": "widget", "count": 3}',
        },
    ),
]


def sample(read: Callable[[], object]) -> float:
    """µs per call, over ``BATCH`` calls."""
    started = time.perf_counter()
    for _ in range(BATCH):
        read()
    return (time.perf_counter() - started) * 1_000_000 / BATCH


Variant = tuple[str, Callable[[], object]]


def side_by_side(runs: int, name: str, variants: tuple[Variant, Variant]) -> None:
    """One row: the two variants' median and p90, alternating sample by sample."""
    for _, read in variants:
        read()
    timings: dict[str, list[float]] = {variant: [] for variant, _ in variants}
    for index in range(runs + WARM_UP):
        for variant, read in variants if index % 2 else variants[::-1]:
            elapsed = sample(read)
            if index >= WARM_UP:
                timings[variant].append(elapsed)
    old, new = (timings[variant] for variant, _ in variants)
    o, n = statistics.median(old), statistics.median(new)
    p90_o, p90_n = (statistics.quantiles(values, n=10)[-1] for values in (old, new))
    print(f"{name:<15} {o:>7.2f} {n:>7.2f} {n / o:>5.2f}x {p90_o:>9.2f} {p90_n:>9.2f}")


def main(runs: int) -> None:
    reading = [
        (name, partial(hand, arguments), partial(parse_arguments, struct, arguments))
        for name, hand, struct, arguments in CASES
    ]
    checking = [
        (name, partial(walked_unreadable, arguments), partial(unreadable_argument, arguments))
        for name, _, _, arguments in CASES
    ]
    tables = (
        (f"reading one call's arguments, {runs} samples of {BATCH} calls each", "hand", "struct", reading),
        ("the runtime's lone-surrogate check of the same arguments", "walk", "encode", checking),
    )  # fmt: skip
    for title, old, new, rows in tables:
        print(f"{title} (µs per call)")
        print(f"{'tool':<15} {old:>7} {new:>7} {'ratio':>6} {'p90 ' + old:>9} {'p90 new':>9}")
        for name, before, after in rows:
            side_by_side(runs, name, ((old, before), (new, after)))
        print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="samples per variant")
    main(parser.parse_args().runs)
