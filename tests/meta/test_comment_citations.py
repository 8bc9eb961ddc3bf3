"""Comments cite the behaviour, a file in this repository or a public spec by name: never a
tracker issue or a research note that lives outside the repository (a reader of the code
cannot follow either)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    [
        *ROOT.glob("packages/*/src/**/*.py"),
        *ROOT.glob("tests/**/*.py"),
        *ROOT.glob("bench/**/*.py"),
        ROOT / "noxfile.py",
    ]
)
OUTSIDE_REFERENCE = re.compile(
    r"\bissues? \d+|\(issue|#\d{2,}\b(?!\w)|research notes|research/"
    r"|\b(?:zeroclaw|acp-spec|peers|editors|aesthetics|tooling|sandbox|scale-out|identity-skills)\.md\b",
    re.IGNORECASE,
)
THIS_FILE = Path(__file__).resolve()


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_comment_cites_an_issue_or_a_note_outside_the_repository(path: Path) -> None:
    if path.resolve() == THIS_FILE:
        return
    offending = [
        f"{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_REFERENCE.search(line)
    ]
    assert not offending, "\n".join(offending)


def test_the_scan_sees_the_sources() -> None:
    assert len(SOURCES) > 100
    assert OUTSIDE_REFERENCE.search("see zeroclaw.md §2")
    assert OUTSIDE_REFERENCE.search("(issue 7 §2)")
    assert not OUTSIDE_REFERENCE.search("JSON-RPC 2.0, section 5")
