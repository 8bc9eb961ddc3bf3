"""Comments cite the behaviour, a file in this repository or a public spec by name: never a
tracker issue or a research note that lives outside the repository (a reader of the code
cannot follow either), and never a nickname: the contract is "the ZeroClaw ACP
documentation" and ZeroClaw's own code is "ZeroClaw's implementation", not "the seed" or
"the reference"."""

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
        *ROOT.glob("scripts/**/*.py"),
        *ROOT.glob("packages/*/README.md"),
        ROOT / "noxfile.py",
    ]
)
OUTSIDE_REFERENCE = re.compile(
    r"\bissues? \d+|\(issue|#\d{2,}\b(?!\w)|research notes|research/"
    r"|\b(?:zeroclaw|acp-spec|peers|editors|aesthetics|tooling|sandbox|scale-out|identity-skills)\.md\b",
    re.IGNORECASE,
)
NICKNAME = re.compile(
    # "seed" as a word (not seeded, seed_persona_files or rng_seed) names the documentation;
    # "the reference" and its forms name ZeroClaw's implementation.
    r"\bseed\b|\bthe reference\b(?! the client)|\breference(?:'s| server)|\bzeroclaw reference\b"
    r"|\(reference:",
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
        if OUTSIDE_REFERENCE.search(line) or NICKNAME.search(line)
    ]
    assert not offending, "\n".join(offending)


def test_the_scan_sees_the_sources() -> None:
    assert len(SOURCES) > 100
    assert OUTSIDE_REFERENCE.search("see zeroclaw.md §2")
    assert OUTSIDE_REFERENCE.search("(issue 7 §2)")
    assert not OUTSIDE_REFERENCE.search("JSON-RPC 2.0, section 5")


@pytest.mark.parametrize(
    "phrase",
    [
        "# as the seed says",
        '"""Seed, "session/load": the client receives"""',
        "(seed: the five-step precedence)",
        "the ZeroClaw seed's -32000",
        "# as in the reference, every choice",
        "The reference's exact 401 body",
        "as the reference server does",
        "as the ZeroClaw reference renders it",
        "(reference: no decision)",
        "see shared/research/peers.md",
    ],
)
def test_a_planted_nickname_or_outside_note_is_caught(phrase: str) -> None:
    assert NICKNAME.search(phrase) or OUTSIDE_REFERENCE.search(phrase)


@pytest.mark.parametrize(
    "phrase",
    [
        'the ZeroClaw ACP documentation, "session/load"',
        "as ZeroClaw's implementation does",
        "seed_persona_files(workspace, alias)",
        "BOOTSTRAP.md is never seeded",
        "rng = random.Random(rng_seed)",
        "a resource_link becomes a reference line",
        "logged under the reference the client is given",
    ],
)
def test_plain_words_are_not_nicknames(phrase: str) -> None:
    assert not NICKNAME.search(phrase)
