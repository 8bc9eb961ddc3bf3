"""A session's title (ACP ``session_info_update``): the first line of its first prompt.

Editors show it in their thread list (``session/list``), so it is one line of readable
text: surrounding whitespace trimmed, inner runs of whitespace collapsed, control
characters dropped, and at most ``MAX_TITLE_CHARS`` characters (cut at a word where one is
near, with an ellipsis).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Final

MAX_TITLE_CHARS: Final = 80
ELLIPSIS: Final = "…"


def title_from_prompt(texts: Iterable[str]) -> str | None:
    """The title for a session whose first prompt has these text blocks; None when no
    block has a printable character."""
    for text in texts:
        for line in text.splitlines():
            title = _one_line(line)
            if title:
                return _bounded(title)
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
