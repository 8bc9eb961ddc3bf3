"""What web_fetch's HTML → Markdown costs per 500 KB page, next to the html.parser text
reduction it replaced, in the same run.

Run: ``uv run python bench/web_html.py [--samples N] [--old-rev REV]`` (a benchmark, not a
test: it prints figures, exits 0). ``old`` is ``html_to_text`` from
``acp_server/agent/tools/_html.py`` as it was at ``REV`` (by default the last commit that
had it), loaded from git; ``new`` is ``html_to_markdown`` (lxml, Beautiful Soup and
markdownify under the limits of ``_html.py``). Both run in this process, alternating
sample by sample so drift on a shared machine hits both alike; the first, untimed call
of each pays its imports.

Pages, each cut to 500,000 bytes: a generated documentation page (navigation, headings,
paragraphs with inline code and links, lists, tables, highlighted code: about one element
per 45 bytes, like the rustdoc and mdBook pages of a Rust toolchain), then hostile pages.
``"<a "`` repeated is quadratic in html.parser (``old`` is measured on smaller pages to
show the growth), ``"<!["`` repeated makes it raise.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Final, cast

from acp_server.agent.tools._html import html_to_markdown

PAGE_BYTES: Final = 500_000
DEFAULT_SAMPLES: Final = 5
OLD_PATH: Final = "packages/acp-server/src/acp_server/agent/tools/_html.py"
QUADRATIC_SIZES: Final = (5_000, 10_000, 20_000)
"""Sizes of the ``"<a "`` page at which ``old`` is measured (500 KB would take hours)."""
_WORDS: Final = [
    "the",
    "server",
    "reads",
    "each",
    "request",
    "and",
    "returns",
    "a",
    "response",
    "stream",
    "with",
    "the",
    "session",
    "state",
    "while",
    "the",
    "client",
    "keeps",
    "its",
    "own",
    "copy",
    "of",
    "every",
    "tool",
    "call",
    "and",
    "permission",
]


def documentation_page(rng_seed: int = 7) -> str:
    """A documentation page of about ``PAGE_BYTES``, the same for every run."""
    rng = random.Random(rng_seed)

    def words(count: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(count))

    def paragraph() -> str:
        parts = []
        for _ in range(rng.randint(3, 6)):
            kind = rng.random()
            if kind < 0.3:
                parts.append(f"<code>{rng.choice(_WORDS)}_{rng.randint(1, 99)}()</code>")
            elif kind < 0.55:
                parts.append(f'<a href="../api/{rng.choice(_WORDS)}.html#x">{words(2)}</a>')
            elif kind < 0.7:
                parts.append(f"<em>{words(2)}</em>")
            parts.append(words(rng.randint(6, 14)))
        return f"<p>{' '.join(parts)}.</p>\n"

    def code_block() -> str:
        lines = []
        for _ in range(rng.randint(4, 10)):
            name, value = rng.choice(_WORDS), rng.randint(0, 999)
            lines.append(
                f'<span class="k">let</span> <span class="n">{name}</span> '
                f'<span class="o">=</span> <span class="mi">{value}</span>;'
            )
        return f'<div class="highlight"><pre><code>{chr(10).join(lines)}</code></pre></div>\n'

    def table() -> str:
        rows = "".join(
            f"<tr><td><code>{rng.choice(_WORDS)}</code></td><td>{words(5)}</td></tr>"
            for _ in range(rng.randint(3, 8))
        )
        return f"<table><thead><tr><th>Name</th><th>Meaning</th></tr></thead>{rows}</table>\n"

    def bullet_list() -> str:
        items = "".join(f"<li>{words(rng.randint(4, 10))}</li>" for _ in range(rng.randint(3, 7)))
        return f"<ul>{items}</ul>\n"

    navigation = "".join(
        f'<li><a href="/docs/{index}/{rng.choice(_WORDS)}.html">{words(2)}</a></li>'
        for index in range(150)
    )
    parts = [
        "<!DOCTYPE html><html><head><title>Guide</title><style>body{margin:0}</style>"
        '<script src="/search.js"></script></head><body>'
        f'<nav class="sidebar"><ul>{navigation}</ul></nav><main>'
    ]
    size = len(parts[0])
    section = 0
    while size < PAGE_BYTES:
        section += 1
        block = f'<h2 id="s{section}">{section}. {words(3)}</h2>\n' + "".join(
            rng.choice((paragraph, paragraph, paragraph, code_block, table, bullet_list))()
            for _ in range(6)
        )
        parts.append(block)
        size += len(block)
    return "".join(parts)[:PAGE_BYTES]


def repeated(unit: str, size: int = PAGE_BYTES, head: str = "") -> str:
    return head + unit * ((size - len(head)) // len(unit))


HOSTILE_PAGES: Final = {
    "nested <div> (100,000 deep)": repeated("<div>"),
    "nested <b>x": repeated("<b>x"),
    "unclosed <li>x": repeated("<li>x"),
    "<br> in 8 nested lists": repeated("<br>x", head="<ol>" + "<li><ol>" * 8),
    "<td colspan=99>": repeated("<td colspan=99>x"),
    "entities": repeated("&amp;&#x5b;&bogus;"),
    '"<![" (html.parser raises)': repeated("<!["),
}


def old_converter(rev: str | None) -> tuple[str, Callable[[str], str]]:
    """(revision, ``html_to_text``) loaded from git: at ``rev``, or else at the newest
    commit whose ``_html.py`` still has it."""
    root = Path(__file__).resolve().parent.parent

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=root, capture_output=True, text=True, check=True
        ).stdout

    candidates = [rev] if rev else git("log", "--format=%h", "--", OLD_PATH).split()
    for candidate in candidates:
        source = git("show", f"{candidate}:{OLD_PATH}")
        if "def html_to_text" in source:
            module = types.ModuleType("old_html")
            exec(compile(source, f"{candidate}:{OLD_PATH}", "exec"), module.__dict__)
            return candidate, cast(Callable[[str], str], module.__dict__["html_to_text"])
    raise SystemExit(f"no html_to_text in {OLD_PATH} at {', '.join(candidates)}")


def milliseconds(convert: Callable[[str], str], page: str) -> float:
    started = time.perf_counter()
    try:
        convert(page)
    except Exception:  # html.parser's AssertionError: the failure is the figure
        return float("nan")
    return (time.perf_counter() - started) * 1000


def compare(
    name: str, page: str, converters: dict[str, Callable[[str], str]], samples: int
) -> None:
    timings: dict[str, list[float]] = {label: [] for label in converters}
    order = list(converters.items())
    for index in range(samples):
        for label, convert in order if index % 2 else order[::-1]:
            timings[label].append(milliseconds(convert, page))
    figures = "  ".join(
        f"{label} {statistics.median(values):>8.0f}" for label, values in timings.items()
    )
    print(f"{name:<32} {len(page):>8,} B  {figures}")


def main(samples: int, rev: str | None) -> None:
    old_rev, old = old_converter(rev)
    new: Callable[[str], str] = html_to_markdown
    converters = {"old": old, "new": new}
    for convert in converters.values():
        convert("<p>warm</p>")  # imports
    print(
        f"median ms of {samples} samples; old = html_to_text at {old_rev}, new = html_to_markdown"
    )
    compare("documentation page", documentation_page(), converters, samples)
    for name, page in HOSTILE_PAGES.items():
        compare(name, page, converters, samples)
    for size in QUADRATIC_SIZES:
        compare('"<a " repeated', repeated("<a ", size), converters, max(1, samples // 2))
    compare('"<a " repeated (new only)', repeated("<a "), {"new": new}, samples)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="samples per page")
    parser.add_argument("--old-rev", help="git revision of the old _html.py (default: last one)")
    arguments = parser.parse_args()
    main(arguments.samples, arguments.old_rev)
