"""Tool card titles: what a call does and to what, on one line (``Edit `src/app.py```).

ACP clients show a tool call by its ``title`` and nothing else on the line: Zed renders it
as Markdown, CodeCompanion.nvim builds its one-line label from it and takes a command from
a leading backticked span (lua/codecompanion/interactions/chat/acp/formatters.lua,
``parse_title``), acpx prints it in its permission question (``Allow <title> [kind]?``).
A permission request's ``toolCall.title`` is the same text (the request updates the
call's card), so what is approved is named where the person looks.

A command or a path is shown as a Markdown code span, verbatim but for what cannot be
shown on one line: a line break is ``⏎``, a run of ``DEFAULT_MIN_SHOWN_BLANKS`` or more
spaces or tabs is ``⟨N blanks⟩`` (padding cannot push the rest out of sight), control and
format characters (bidirectional overrides included) are ``\\xNN`` / ``\\uNNNN`` escapes.
Over ``DEFAULT_MAX_TITLE_CHARS`` the middle is cut and says how much: the head and the
tail both stay visible. The full text is in the call's ``rawInput`` (and, for approvals,
in the request's content).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from acp_server.agent.tools._text import encodable
from acp_server.patterns import LazyPattern

DEFAULT_MAX_TITLE_CHARS: Final = 160
"""Characters of a command, path or question a title shows before its middle is cut."""
DEFAULT_MIN_SHOWN_BLANKS: Final = 8
_BLANK_RUN: Final = LazyPattern(f"[ \t]{{{DEFAULT_MIN_SHOWN_BLANKS},}}")
_BACKTICK_RUN: Final = LazyPattern("`+")

TitleOf: TypeAlias = Callable[[Mapping[str, Any]], "str | None"]
"""A call's arguments → its card title; None when they do not name a target."""


def _shown_char(char: str) -> str:
    if char == "\n":
        return "⏎"
    if char == "\t" or not unicodedata.category(char).startswith("C"):
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str, *, limit: int = DEFAULT_MAX_TITLE_CHARS) -> str:
    """``text`` shown on one line: every character accounted for (see the module), the
    middle cut visibly when it is longer than ``limit``."""
    text = str(encodable(text)).replace("\r\n", "\n")
    shown = _BLANK_RUN.sub(lambda run: f"⟨{len(run.group())} blanks⟩", text)
    shown = "".join(_shown_char(char) for char in shown)
    if len(shown) <= limit:
        return shown
    head = limit * 2 // 3
    tail = limit - head
    left_out = len(shown) - head - tail
    return f"{shown[:head]} … ⟨{left_out} more characters⟩ … {shown[-tail:]}"


def code_span(text: str) -> str:
    """``text`` as one Markdown code span that reads back as ``text`` (CommonMark: a fence
    longer than any run of backticks inside; one space of padding on each side when the
    text starts or ends with a backtick, or with a space at both ends, since a reader
    strips one such pair)."""
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    fence = "`" * (longest + 1)
    spaced = text.startswith(" ") and text.endswith(" ") and bool(text.strip(" "))
    if text.startswith("`") or text.endswith("`") or spaced:
        return f"{fence} {text} {fence}"
    return f"{fence}{text}{fence}"


def command_title(command: str) -> str:
    """A shell command's title: the command itself, as code."""
    return code_span(one_line(command))


def target_title(verb: str, argument: str) -> TitleOf:
    """``<verb> `<target>```, the target being the string argument ``argument``."""

    def title(arguments: Mapping[str, Any]) -> str | None:
        target = arguments.get(argument)
        if not isinstance(target, str) or not target.strip():
            return None
        return f"{verb} {code_span(one_line(target))}"

    return title


def prose_title(argument: str, *, prefix: str = "") -> TitleOf:
    """The string argument ``argument`` as words on one line (a question, a summary):
    runs of whitespace become one space."""

    def title(arguments: Mapping[str, Any]) -> str | None:
        text = arguments.get(argument)
        if not isinstance(text, str) or not text.strip():
            return None
        return prefix + one_line(" ".join(text.split()))

    return title
