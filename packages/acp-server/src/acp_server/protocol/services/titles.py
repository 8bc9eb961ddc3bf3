"""A session's title (ACP ``session_info_update``): the first line the user wrote in its
first prompt.

Editors show it in their thread list (``session/list``), so it is one line of the user's
own words: surrounding whitespace trimmed, inner runs of whitespace collapsed, control
characters dropped, and at most ``MAX_TITLE_CHARS`` characters (cut at a word where one is
near, with an ellipsis).

Some clients wrap what the user typed. avante.nvim sends earlier user messages as
``<previous_user_message>…</previous_user_message>`` text blocks and adds context blocks
such as ``<system_context>…</system_context>`` and ``<selected_code>…</selected_code>``
(lua/avante/llm.lua, ``_continue_stream_acp``). So a block that is one such element gives
its text only when it is the user's (``USER_WORDS_TAGS``) and is skipped otherwise, and
tags left in a line are dropped, as are a line's leading Markdown marks (``#``, ``>``,
list bullets) and its emphasis and code marks (``**``, ``__``, backticks). Resource links and other non-text blocks never give a title.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

MAX_TITLE_CHARS: Final = 80
ELLIPSIS: Final = "…"
USER_WORDS_TAGS: Final = frozenset({"previous_user_message", "user_message", "user"})
"""Wrapper elements whose text is what the user wrote."""
_WRAPPED: Final = re.compile(r"\A\s*<([A-Za-z_][\w.-]*)>(.*)</\1>\s*\Z", re.DOTALL)
_TAG: Final = re.compile(r"</?[A-Za-z_][\w.-]*(?:\s[^<>]*)?/?>")
_LEADING_MARKS: Final = re.compile(r"\A(?:(?:[#>]+|[-*+]|\d+[.)])\s+)+")
_EMPHASIS: Final = re.compile(r"\*\*|__|`")


def title_from_prompt(texts: Iterable[str]) -> str | None:
    """The title for a session whose first prompt has these text blocks; None when no
    block has a printable character of the user's own words."""
    for text in texts:
        words = _users_words(text)
        if words is None:
            continue
        for line in words.splitlines():
            plain = _EMPHASIS.sub("", _TAG.sub("", line)).strip()
            title = _one_line(_LEADING_MARKS.sub("", plain))
            if title:
                return _bounded(title)
    return None


def _users_words(text: str) -> str | None:
    """The user's part of a text block: the inside of a user wrapper element, None for
    a block that is wholly some other element (context a client added), else the text."""
    wrapped = _WRAPPED.match(text)
    if wrapped is None:
        return text
    if wrapped.group(1).lower() in USER_WORDS_TAGS:
        return _users_words(wrapped.group(2))
    return None


def _one_line(line: str) -> str:
    printable = "".join(
        " " if char.isspace() else char
        for char in line
        if char.isspace() or not unicodedata.category(char).startswith("C")
    )
    return " ".join(printable.split())


def _bounded(title: str) -> str:
    if len(title) <= MAX_TITLE_CHARS:
        return title
    cut = title[: MAX_TITLE_CHARS - len(ELLIPSIS)]
    space = cut.rfind(" ")
    if space >= MAX_TITLE_CHARS // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
