"""HTML reduced to Markdown for web_fetch (markdownify over Beautiful Soup and lxml).

A page is hostile input, so the conversion runs under limits the libraries lack:

- the parse is lxml's (libxml2: linear time, implicit end tags, never raises on
  malformed markup). The standard library's ``html.parser`` takes quadratic time on
  some malformed input (``"<a " * n``) and raises ``AssertionError`` on others
  (``"<!["``) in the Python 3.11 releases this project supports;
- elements nested deeper than ``MAX_HTML_DEPTH`` are flattened while the tree is built
  (their text is kept, their tags are not), because markdownify converts recursively
  and would raise ``RecursionError``; so are the elements after the first
  ``MAX_HTML_ELEMENTS``, which bounds the work per page;
- list items, block quotes and definitions nested deeper than ``MAX_INDENT_NESTING``
  become plain blocks: each level indents every line below it again;
- scripts, styles, frames, embedded objects, media and elements marked ``hidden`` are
  dropped with their content; every attribute is dropped except a link's address, an
  image's alt text and a table cell's ``colspan`` (clamped to ``MAX_TABLE_COLSPAN``);
- links stay Markdown links only to http, https and mailto addresses, resolved against
  the page's URL and at most ``MAX_LINK_CHARS`` long (``javascript:``, ``data:`` and the
  rest keep their text only); images become their alt text; page text is escaped so it
  cannot form links, autolinks or HTML of its own (code keeps its text as it is);
- the result is cut at ``MAX_MARKDOWN_BYTES``.

The libraries are imported on the first conversion, not when the tool is loaded: server
start-up does not pay for them.
"""

from __future__ import annotations

import re
import threading
from typing import Final
from urllib.parse import urljoin, urlsplit

MAX_HTML_DEPTH: Final = 128
"""Deepest element nesting converted; deeper elements are flattened into their ancestor
at this depth. Four Python frames per level on 3.11 (markdownify's three and the stop
check) keep the conversion well inside the interpreter's default 1,000-frame recursion
limit; pages rarely nest past 32 (the depth Lighthouse's DOM-size audit reports as
excessive)."""
MAX_HTML_ELEMENTS: Final = 25_000
"""Most elements converted per page; later ones are flattened like deep ones (their text
is kept). Conversion costs tens of microseconds per element: a 500 KB page of ``<b>x</b>``
holds 60,000, the densest 500 KB documentation pages measured about 12,000."""
MAX_INDENT_NESTING: Final = 8
"""Most nested list items, block quotes and definitions indented; deeper ones become
plain blocks. Each level re-indents every line below it (work and output grow with
lines times levels)."""
MAX_TABLE_COLSPAN: Final = 8
"""Largest ``colspan`` honoured: markdownify writes a cell per spanned column, and the
header line under a table's first row one ``--- |`` per column (``<td colspan=32>x``
would make 16 times its size in Markdown)."""
MAX_LIST_START: Final = 999_999
"""Largest ``<ol start>`` honoured (a list item's number is this plus its position)."""
MAX_LINK_CHARS: Final = 2048
"""Longest link address kept as a Markdown link (longer ones keep their text only)."""
MAX_MARKDOWN_BYTES: Final = 500_000
"""Most UTF-8 bytes of Markdown returned for one page; more is cut with a notice."""
LINK_SCHEMES: Final = frozenset({"http", "https", "mailto"})
"""Schemes kept as links: what web_fetch can follow, and mail addresses."""
STOP_CHECK_INTERVAL: Final = 512
"""Elements parsed or converted between two looks at the stop flag."""

LINK_MARK: Final = "\ue000"
"""Put before each Markdown link while converting (a private-use character, removed from
the page first): a ``!`` of the page's text right before a link would make it an image,
which a Markdown viewer loads without a click. ``tidy_markdown`` parts the two."""
_BLANK_LINES: Final = re.compile(r"\n{3,}")
_URL_SPECIALS: Final = str.maketrans(
    {" ": "%20", "(": "%28", ")": "%29", "<": "%3C", ">": "%3E", "\\": "%5C"}
)
_URL_CONTROLS: Final = re.compile(r"[\x00-\x1f\x7f]")


class ConversionStopped(Exception):
    """Raised inside a conversion once its ``stop`` flag is set (the call was cancelled)."""


def safe_link(href: str | None, base_url: str | None) -> str | None:
    """``href`` resolved against ``base_url`` when it may be a Markdown link, else None.

    Spaces around it and control characters in it are removed first, as browsers do
    (the WHATWG URL parser drops tabs and newlines anywhere), so that
    ``"java\\nscript:"`` is judged as ``javascript:``. Links to a place on the same page
    (``#part``) are dropped: they lead nowhere web_fetch can go."""
    if href is None:
        return None
    cleaned = _URL_CONTROLS.sub("", href).strip(" ")
    if not cleaned or cleaned.startswith("#") or len(cleaned) > MAX_LINK_CHARS:
        return None
    try:
        resolved = urljoin(base_url, cleaned) if base_url else cleaned
        scheme = urlsplit(resolved).scheme.lower()
    except ValueError:  # an unbalanced "[" in the host part, for one
        return None
    if scheme and scheme not in LINK_SCHEMES:
        return None
    if not scheme and ":" in resolved.split("/", 1)[0]:
        return None  # "javascript&colon;x" that urlsplit could not name is no link
    if len(resolved) > MAX_LINK_CHARS:
        return None
    return resolved.translate(_URL_SPECIALS)


def cut_to_bytes(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (whole characters), and whether it was."""
    if len(text) * 4 <= limit:
        return text, False
    encoded = text.encode("utf-8", errors="replace")
    if len(encoded) <= limit:
        return text, False
    return encoded[:limit].decode("utf-8", errors="ignore"), True


_SEAL_TRIES: Final = 8
"""How often a cut page is shortened again to make room for what sealing it adds."""
_FENCE_LINE: Final = re.compile(r" *(`{3,}|~{3,})")
_ESCAPE_OR_ACTIVE: Final = re.compile(r"\\.|[<`\[]", re.DOTALL)


def seal_cut_markdown(kept: str) -> str:
    """Markdown cut short made safe to read on its own: a code fence left open is closed,
    and in the text after the last paragraph break outside code every backtick, ``<`` and
    ``[`` not already escaped is escaped. A cut inside an inline code span would otherwise
    leave the span open, and its literal ``<`` or ``[x](javascript:…)`` (code is not
    escaped) would read as HTML or a link (CommonMark: a code span needs its closing
    backtick string; HTML starts at any unescaped ``<``, a link at an unescaped ``[``)."""
    open_fence = ""
    tail_start = 0
    offset = 0
    for line in kept.split("\n"):
        fence = _FENCE_LINE.match(line)
        if fence and not open_fence:
            open_fence = fence.group(1)
        elif (
            fence
            and fence.group(1)[0] == open_fence[0]
            and len(fence.group(1)) >= len(open_fence)
            and not line[fence.end() :].strip()
        ):
            open_fence = ""
            tail_start = offset + len(line) + 1
        elif not open_fence and not line.strip():
            tail_start = offset + len(line) + 1
        offset += len(line) + 1
    if open_fence:
        return f"{kept}\n{open_fence}"
    tail = _ESCAPE_OR_ACTIVE.sub(
        lambda match: match.group() if len(match.group()) == 2 else "\\" + match.group(),
        kept[tail_start:],
    )
    return kept[:tail_start] + tail


def _sealed_within(kept: str, limit: int) -> str:
    """``seal_cut_markdown(kept)``, cut further until the escapes and the closing fence it
    adds fit in ``limit`` bytes (a shorter text needs at most a few more tries)."""
    sealed = seal_cut_markdown(kept)
    for _ in range(_SEAL_TRIES):
        excess = len(sealed.encode("utf-8", errors="replace")) - limit
        if excess <= 0:
            return sealed
        kept, _cut = cut_to_bytes(
            kept, max(0, len(kept.encode("utf-8", errors="replace")) - excess)
        )
        sealed = seal_cut_markdown(kept)
    return ""


def tidy_markdown(markdown: str) -> str:
    """Trailing spaces off every line (markdownify ends a ``<br>`` line with two), runs of
    blank lines down to one, no blank lines around the whole, and no link right after a
    ``!`` (see ``LINK_MARK``)."""
    markdown = markdown.replace("!" + LINK_MARK, "! ").replace(LINK_MARK, "")
    # rstrip per line, not a "[ \t]+$" pattern: that backtracks quadratically over a long
    # run of spaces inside a line (code keeps its spaces).
    lines = "\n".join(line.rstrip(" \t") for line in markdown.split("\n"))
    return _BLANK_LINES.sub("\n\n", lines).strip()


def html_to_markdown(
    markup: str, base_url: str | None = None, stop: threading.Event | None = None
) -> str:
    """The Markdown of an HTML page (see the module docstring); links are resolved against
    ``base_url``. Blocking, CPU-bound work: run it in a worker thread. Raises
    ``ConversionStopped`` once ``stop`` is set."""
    from acp_server.agent.tools._html_markdown import convert_html  # lazy: see module doc

    markdown = tidy_markdown(convert_html(markup, base_url, stop or threading.Event()))
    kept, cut = cut_to_bytes(markdown, MAX_MARKDOWN_BYTES)
    if cut:
        kept = _sealed_within(kept, MAX_MARKDOWN_BYTES).rstrip() + (
            f"\n\n[truncated: the page's Markdown is larger than {MAX_MARKDOWN_BYTES} bytes]"
        )
    return kept
