"""Pattern matching for the search tools in time linear in the text searched.

content_search patterns and glob patterns (glob_search, content_search's ``include``) are
matched with RE2 (the ``google-re2`` binding), whose automata never backtrack: a pattern
such as ``(.*.*)*ZZZ`` costs one pass over each line instead of pinning the CPU.

RE2 syntax is Python's ``re`` syntax without the features that need backtracking, and a few
classes are narrower:

- no lookahead/lookbehind (``(?=…)``, ``(?!…)``, ``(?<=…)``, ``(?<!…)``), no backreferences
  (``\\1``, ``(?P=name)``), no possessive or atomic groups, no conditionals; ``\\Z`` is
  spelled ``\\z``. Such a pattern is refused with RE2's reason.
- ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII-only (Python's are Unicode-aware); case-
  insensitive matching still folds Unicode letters.

Glob patterns are translated here (``*``, ``?``, ``[…]``, ``[!…]`` as ``fnmatch`` reads
them), never through ``fnmatch.translate``, whose output RE2 cannot run.
"""

from __future__ import annotations

from typing import Any, Final

from acp_server.agent.tools.base import RefusedCall

MAX_PATTERN_CHARS: Final = 4096
"""Longest regular expression or glob pattern accepted."""
_EMPTY_CLASS: Final = r"[^\x00-\x{10FFFF}]"


def _options(*, case_sensitive: bool) -> Any:
    import re2  # type: ignore[import-untyped]  # on the first search, not at start-up

    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.log_errors = False
    options.never_capture = True
    options.dot_nl = True
    return options


def _compile(pattern: str, *, case_sensitive: bool) -> Any:
    import re2

    try:
        return re2.compile(pattern, _options(case_sensitive=case_sensitive))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise ValueError(str(reason)) from None


class LinePattern:
    """A content_search regular expression, matched one line at a time."""

    def __init__(self, pattern: str, *, case_sensitive: bool) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise RefusedCall(
                f"Pattern too long: {len(pattern)} characters (limit: {MAX_PATTERN_CHARS})"
            )
        try:
            self._regexp = _compile(pattern, case_sensitive=case_sensitive)
        except ValueError as exc:
            raise RefusedCall(
                f"Invalid regular expression {pattern!r}: {exc} (RE2 syntax: no lookaround "
                "or backreferences)"
            ) from None

    def found_in(self, line: str) -> bool:
        return self._regexp.search(line) is not None


def _escaped(char: str) -> str:
    """One literal character in RE2 syntax: ASCII punctuation and controls as hex escapes."""
    if char.isalnum() or ord(char) > 0x7F:
        return char
    return f"\\x{{{ord(char):02x}}}"


def _class_body(body: str) -> str:
    """The inside of a glob ``[…]`` (after any ``!``) as an RE2 class body; ranges whose
    ends are reversed match nothing, as in ``fnmatch``."""
    parts: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if index + 2 < len(body) and body[index + 1] == "-":
            low, high = char, body[index + 2]
            if low <= high:
                parts.append(f"{_escaped(low)}-{_escaped(high)}")
            index += 3
            continue
        parts.append(_escaped(char))
        index += 1
    return "".join(parts)


def glob_to_regex(pattern: str) -> str:
    """The RE2 expression matching the whole of a string against a glob pattern, with
    ``fnmatch`` semantics: ``*`` is any run (``/`` included), ``?`` one character."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = index
            if end < len(pattern) and pattern[end] == "!":
                end += 1
            if end < len(pattern) and pattern[end] == "]":
                end += 1
            end = pattern.find("]", end)
            if end < 0:
                out.append(_escaped("["))
                continue
            body = pattern[index:end]
            index = end + 1
            negated = body.startswith("!")
            inner = _class_body(body[1:] if negated else body)
            if inner:
                out.append(f"[^{inner}]" if negated else f"[{inner}]")
            else:
                out.append("." if negated else _EMPTY_CLASS)
        else:
            out.append(_escaped(char))
    return "^" + "".join(out) + r"\z"


def readable_name(name: str) -> str:
    """A file name as text that always encodes: bytes that were not UTF-8 (kept by Python
    as lone surrogates) become U+FFFD, which only ``?``, ``*`` or ``[!…]`` match."""
    return name.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


class GlobPattern:
    """A glob pattern compiled once, matched against names or relative paths."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN_CHARS:
            raise RefusedCall(
                f"Pattern too long: {len(pattern)} characters (limit: {MAX_PATTERN_CHARS})"
            )
        try:
            self._regexp = _compile(glob_to_regex(pattern), case_sensitive=True)
        except ValueError as exc:
            raise RefusedCall(f"Invalid glob pattern {pattern!r}: {exc}") from None

    def matches(self, name: str) -> bool:
        return self._regexp.search(readable_name(name)) is not None


def has_wildcards(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")
