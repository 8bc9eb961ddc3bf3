"""The conversion behind ``_html.html_to_markdown``: a Beautiful Soup tree builder over
lxml that applies the limits while the tree is built, and a markdownify converter with
the conversions that must stay linear in the page's size or may not pass page text on
as live Markdown. Imported only when a page is converted (see ``_html``)."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from bs4 import BeautifulSoup, Tag
from bs4.builder._lxml import LXMLTreeBuilder  # bs4 registers it as "lxml"
from bs4.exceptions import ParserRejectedMarkup
from markdownify import ATX, MarkdownConverter

from acp_server.agent.tools._html import (
    LINK_MARK,
    MAX_HTML_DEPTH,
    MAX_HTML_ELEMENTS,
    MAX_INDENT_NESTING,
    MAX_LIST_START,
    MAX_TABLE_COLSPAN,
    STOP_CHECK_INTERVAL,
    ConversionStopped,
    safe_link,
)

DROPPED_ELEMENTS: Final = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "math", "iframe", "frame",
        "frameset", "object", "embed", "applet", "canvas", "video", "audio", "select",
        "textarea",
    }
)  # fmt: skip
"""Dropped with everything inside: code, styling, other documents and widgets, not text."""
CONVERTED_ELEMENTS: Final = frozenset(
    {
        "a", "b", "strong", "i", "em", "del", "s", "code", "kbd", "samp", "pre", "blockquote",
        "br", "div", "article", "section", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5",
        "h6", "hr", "img", "li", "ul", "ol", "p", "q", "sub", "sup", "table", "caption",
        "figcaption", "td", "th", "tr", "thead", "tbody", "tfoot", "span",
    }
)  # fmt: skip
"""Kept under their own name: markdownify has a conversion for each, except ``span``,
which stands for the elements converted as their text and is left out of the tree."""
RENAMED_ELEMENTS: Final = {
    "title": "p", "strike": "del", "tt": "code", "listing": "pre", "xmp": "pre",
    **dict.fromkeys(
        ("html", "body", "head", "main", "nav", "header", "footer", "aside", "figure",
         "details", "summary", "address", "form", "fieldset", "legend", "center", "dialog",
         "hgroup", "search", "menu"),
        "div",
    ),
}  # fmt: skip
"""Other HTML elements, kept as the converted element that renders like them; any other
name (custom elements, typos, ``h7``) becomes ``span``, which converts as its text."""
INDENTING_ELEMENTS: Final = frozenset({"li", "blockquote", "dd"})
LIST_ELEMENTS: Final = frozenset({"ul", "ol", "dl"})
INLINE_ELEMENTS: Final = frozenset(
    {"a", "b", "strong", "i", "em", "del", "s", "code", "kbd", "samp", "q", "sub", "sup",
     "span", "img"}
)  # fmt: skip
_SKIPPED: Final = "#skipped"
"""Marks an open element dropped with its content (no element name starts with ``#``)."""
_MARKDOWN_ACTIVE: Final = str.maketrans({"\\": "\\\\", "[": "\\[", "]": "\\]", "<": "\\<"})
"""Page text escaped so it cannot open a link, a link definition, an autolink or HTML."""
_BACKTICK_RUNS: Final = re.compile(r"`+")
_LEADING_BLANK_LINES: Final = re.compile(r"[ \n]*\n")


def _small_number(value: str | None, limit: int) -> int | None:
    """``value`` as an int when it is a few ASCII digits, at most ``limit``; else None.

    ``str.isdigit`` accepts "²" and ``int`` refuses it, and ``int`` refuses more than
    4,300 digits: markdownify raises on both in ``colspan`` and ``<ol start>``."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > 9 or not value.isascii() or not value.isdigit():
        return None
    return min(int(value), limit)


class _PageTag(Tag):
    """A ``Tag`` whose ``find_parent(name)`` walks up comparing names.

    markdownify asks each element's ``find_parent("pre")``; bs4 builds a ``SoupStrainer``
    for every such call, which made it the largest single cost of a conversion. The
    answer is the same, and the walk is bounded by ``MAX_HTML_DEPTH``."""

    def find_parent(self, name: Any = None, attrs: Any = None, **kwargs: Any) -> Tag | None:
        if not isinstance(name, str) or attrs is not None or kwargs:
            return super().find_parent(name, attrs, **kwargs)
        parent = self.parent
        while parent is not None and parent.name != name:
            parent = parent.parent
        return parent


class _PageTreeBuilder(LXMLTreeBuilder):
    """bs4's lxml tree builder, with the limits applied to lxml's events as they come.

    lxml's parser target receives balanced ``start``/``end`` events (libxml2 closes
    unclosed elements itself), so ``_open`` mirrors lxml's open elements: what became of
    each (its kept name, ``None`` when flattened, ``_SKIPPED`` when dropped) tells
    ``end`` what to do."""

    def __init__(self, base_url: str | None, stop: threading.Event) -> None:
        super().__init__()
        self._base_url = base_url
        self._stop = stop
        self._reset_limits()

    def _reset_limits(self) -> None:
        self._open: list[str | None] = []
        self._kept: list[str] = []
        self._skipping = 0
        self._indents = 0
        self._elements = 0
        self._kept_count = 0
        self._next_number: dict[int, int] = {}  # kept-stack index of an open <ol> → next

    def reset(self) -> None:
        super().reset()
        self._reset_limits()

    def prepare_markup(
        self,
        markup: str | bytes,
        user_specified_encoding: str | None = None,
        document_declared_encoding: str | None = None,
        exclude_encodings: Any = None,
    ) -> Any:
        # The text is decoded already (web.py, from the response's charset): UTF-8 for
        # lxml, whatever the page's <meta charset> claims, and none of bs4's guessing
        # (nor its warning when markup looks like XML, which tests turn into errors).
        if isinstance(markup, str):
            markup = markup.encode("utf-8", errors="replace")
        yield markup, "utf-8", None, False

    def start(self, tag: Any, attrib: Any, nsmap: Any = None) -> None:
        self._elements += 1
        if self._elements % STOP_CHECK_INTERVAL == 0 and self._stop.is_set():
            raise ConversionStopped
        name = tag.lower() if isinstance(tag, str) else ""
        if self._skipping or name in DROPPED_ELEMENTS or _is_hidden(attrib):
            self._skipping += 1
            self._open.append(_SKIPPED)
            return
        kept = name if name in CONVERTED_ELEMENTS else RENAMED_ELEMENTS.get(name, "span")
        if kept == "span":
            # markdownify converts a span as its text: leaving the element out of the tree
            # gives the same Markdown for much less work (highlighted code is mostly spans).
            self._open.append(None)
            return
        if len(self._kept) >= MAX_HTML_DEPTH or self._kept_count >= MAX_HTML_ELEMENTS:
            self._open.append(None)
            if kept not in INLINE_ELEMENTS:
                self.data("\n")  # keeps flattened blocks from running into each other
            return
        if self._indents >= MAX_INDENT_NESTING and kept in INDENTING_ELEMENTS | LIST_ELEMENTS:
            kept = "div"
        attributes = self._attributes(kept, attrib)
        if kept in INDENTING_ELEMENTS:
            self._indents += 1
        elif kept == "ol":
            start = _small_number(attrib.get("start"), MAX_LIST_START)
            self._next_number[len(self._kept)] = 1 if start is None else start
        self._open.append(kept)
        self._kept.append(kept)
        self._kept_count += 1
        super().start(kept, attributes, {})

    def _attributes(self, kept: str, attrib: Mapping[str, str]) -> dict[str | bytes, str | bytes]:
        """The attributes markdownify reads, made safe; every other one is dropped."""
        if kept == "a":
            href = safe_link(attrib.get("href"), self._base_url)
            return {"href": href} if href else {}
        if kept == "img":
            alt = " ".join((attrib.get("alt") or "").split())
            return {"alt": alt} if alt else {}
        if kept in ("td", "th"):
            span = _small_number(attrib.get("colspan"), MAX_TABLE_COLSPAN)
            return {"colspan": str(span)} if span and span > 1 else {}
        if kept == "li" and self._kept and self._kept[-1] == "ol":
            parent = len(self._kept) - 1
            number = self._next_number[parent]
            self._next_number[parent] = number + 1
            return {"value": str(number)}
        return {}

    def end(self, tag: Any) -> None:
        if not self._open:
            return
        entry = self._open.pop()
        if entry == _SKIPPED:
            self._skipping -= 1
            return
        if entry is None:
            return
        self._kept.pop()
        if entry in INDENTING_ELEMENTS:
            self._indents -= 1
        elif entry == "ol":
            self._next_number.pop(len(self._kept), None)
        super().end(entry)

    def data(self, data: Any) -> None:
        if not self._skipping:
            super().data(data)

    # Comments, processing instructions and doctypes carry no page text.
    def comment(self, text: Any) -> None:
        pass

    def pi(self, target: Any, data: Any) -> None:
        pass

    def doctype(self, name: Any, pubid: Any, system: Any) -> None:
        pass


def _is_hidden(attrib: Mapping[str, str]) -> bool:
    """``hidden`` or ``aria-hidden="true"``: not shown to a reader (text put there for a
    model to find, not for people, is dropped with it)."""
    return "hidden" in attrib or attrib.get("aria-hidden", "").strip().lower() == "true"


class _PageConverter(MarkdownConverter):
    """markdownify with ATX headings, ``-`` bullets, and these conversions of its own:
    list items numbered from the tree builder's count (markdownify counts the previous
    siblings of each item: quadratic), table rows whose header line is decided once per
    table (markdownify searches the whole table for each row), code fences longer than
    any backtick run inside, images as their alt text, and the minimal escaping that
    keeps page text from becoming links or HTML (but leaves ``*`` and ``_`` readable)."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(
            heading_style=ATX,
            bullets="-",
            escape_asterisks=False,
            escape_underscores=False,
            escape_misc=False,
            # Line breaks in the page's source are not the page's: collapse them (with
            # no width, "wrap" only collapses whitespace; <br> still breaks the line).
            wrap=True,
            wrap_width=None,
        )
        self._stop = stop
        self._converted = 0
        self._headed_tables: set[int] = set()

    def process_tag(self, node: Tag, parent_tags: set[str] | None = None) -> str:
        self._converted += 1
        if self._converted % STOP_CHECK_INTERVAL == 0 and self._stop.is_set():
            raise ConversionStopped
        converted: str = super().process_tag(node, parent_tags)  # type: ignore[misc]
        return converted  # (markdownify's stub declares only convert and convert_soup)

    def escape(self, text: str, parent_tags: set[str]) -> str:
        return text.translate(_MARKDOWN_ACTIVE)

    def convert_a(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        href = el.get("href")
        inner = text.strip()
        if "_noformat" in parent_tags or not isinstance(href, str) or not inner:
            return text
        before = " " if text[:1].isspace() else ""
        after = " " if text[-1:].isspace() else ""
        return f"{before}{LINK_MARK}[{' '.join(inner.split())}]({href}){after}"

    def convert_img(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        alt = el.get("alt")
        if not isinstance(alt, str):
            return ""
        return alt if "_noformat" in parent_tags else self.escape(alt, parent_tags)

    def convert_li(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        text = text.strip()
        if not text:
            return "\n"
        number = el.get("value")
        bullet = f"{number}. " if isinstance(number, str) else "- "
        indent = " " * len(bullet)
        lines = text.split("\n")
        rest = "".join(f"\n{indent}{line}" if line else "\n" for line in lines[1:])
        return f"{bullet}{lines[0]}{rest}\n"

    def convert_code(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        if "_noformat" not in parent_tags and "\n" in text:
            # A code span is inline (CommonMark): block content converted inside it (a
            # table row, a paragraph) would end the span at its blank line and leave the
            # code's unescaped "<" as raw HTML. Its lines become one.
            text = " ".join(line.strip(" \t") for line in text.split("\n") if line.strip(" \t"))
        converted: str = super().convert_code(el, text, parent_tags)  # type: ignore[misc]
        return converted

    def convert_pre(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        # Blank lines around the code go, its indentation stays. (Anchored matches and
        # rstrip: an unanchored "[ \n]*$" backtracks quadratically over a run of spaces.)
        text = text.rstrip(" \n")
        leading = _LEADING_BLANK_LINES.match(text)
        if leading:
            text = text[leading.end() :]
        if not text:
            return ""
        longest = max((len(run) for run in _BACKTICK_RUNS.findall(text)), default=0)
        fence = "`" * max(3, longest + 1)
        return f"\n\n{fence}\n{text}\n{fence}\n\n"

    def convert_tr(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        row = f"|{text}\n"
        group = el.parent
        table = group.parent if group is not None and group.name != "table" else group
        if id(table) in self._headed_tables:
            return row
        # The table's first row is its header, as GitHub Flavored Markdown requires one.
        self._headed_tables.add(id(table))
        width = 0
        for cell in el.children:
            if isinstance(cell, Tag) and cell.name in ("td", "th"):
                span = cell.get("colspan")
                width += int(span) if isinstance(span, str) else 1
        return row + "|" + " --- |" * max(width, 1) + "\n"


def convert_html(markup: str, base_url: str | None, stop: threading.Event) -> str:
    """Markdown of ``markup`` before tidying and the size cap (``_html.html_to_markdown``)."""
    # Bytes with a newline: bs4 warns about short markup without "<" or a newline (it
    # might be a file name), and tests turn warnings into errors.
    page = markup.replace("\x00", "").replace(LINK_MARK, "")
    payload = ("\n" + page).encode("utf-8", errors="replace")
    try:
        soup = BeautifulSoup(
            payload, builder=_PageTreeBuilder(base_url, stop), element_classes={Tag: _PageTag}
        )
    except ParserRejectedMarkup:  # lxml found no document at all (an empty page)
        return ""
    converted: str = _PageConverter(stop).convert_soup(soup)
    return converted
