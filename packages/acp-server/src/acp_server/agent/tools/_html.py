"""HTML reduced to readable text for web_fetch, with the standard library's ``html.parser``.

Scripts, styles and other non-content elements are dropped; block elements start new
lines, list items get a ``- `` bullet, whitespace runs collapse (inside ``<pre>`` it is
kept), and character references are decoded. Malformed markup never raises: the parser
takes what it can.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Final

SKIPPED_ELEMENTS: Final = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas"}
)
BLOCK_ELEMENTS: Final = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5",
        "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary",
        "table", "tbody", "td", "th", "thead", "title", "tr", "ul",
    }
)  # fmt: skip
VOID_ELEMENTS: Final = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
LINE_ELEMENTS: Final = frozenset({"li", "tr", "dt", "dd", "td", "th"})
"""Block elements that end their line but open no paragraph."""
_SPACES: Final = re.compile(r"[ \t\r\f\v\n]+")
_BLANK_LINES: Final = re.compile(r"\n{3,}")


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping: list[str] = []
        self._pre_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED_ELEMENTS:
            self._skipping.append(tag)
            return
        if self._skipping:
            return
        if tag == "pre":
            self._pre_depth += 1
        if tag in BLOCK_ELEMENTS and tag not in ("td", "th"):
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._skipping and tag in BLOCK_ELEMENTS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping:
            if tag == self._skipping[-1]:
                self._skipping.pop()
            return
        if tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
        if tag in BLOCK_ELEMENTS and tag not in VOID_ELEMENTS and tag not in LINE_ELEMENTS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        data = data.replace("\x00", "")
        if self._pre_depth:
            self.parts.append(data.replace("\n", "\x00"))  # kept through the collapse
        else:
            self.parts.append(_SPACES.sub(" ", data))


def html_to_text(markup: str) -> str:
    """The readable text of an HTML document (see the module docstring)."""
    extractor = _TextExtractor()
    extractor.feed(markup)
    extractor.close()
    lines = [line.strip(" ") for line in "".join(extractor.parts).split("\n")]
    text = "\n".join(lines).replace("\x00", "\n")
    return _BLANK_LINES.sub("\n\n", text).strip()
