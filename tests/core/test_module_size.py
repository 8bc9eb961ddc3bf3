"""The layout rule docs/architecture.md states: no module under packages/*/src is over
600 lines; a module that grows past it is split along a seam it already has."""

from __future__ import annotations

from pathlib import Path

MAX_MODULE_LINES = 600
PACKAGES = Path(__file__).resolve().parents[2] / "packages"


def test_no_source_module_is_over_the_line_limit() -> None:
    sources = sorted(PACKAGES.glob("*/src/**/*.py"))
    assert len(sources) > 50  # the glob found the packages
    too_long = {
        str(path.relative_to(PACKAGES)): lines
        for path in sources
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert too_long == {}
