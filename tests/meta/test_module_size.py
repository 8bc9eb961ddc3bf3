"""The layout rule docs/architecture.md states: no module under packages/*/src is over
600 lines; a module that grows past it is split along a seam it already has. A generated
module (acp_core/schema/generated.py, ACP's types) follows its schema, not this rule."""

from __future__ import annotations

from pathlib import Path

MAX_MODULE_LINES = 600
GENERATED_HEADER = "# Generated from "
PACKAGES = Path(__file__).resolve().parents[2] / "packages"


def test_no_source_module_is_over_the_line_limit() -> None:
    sources = sorted(PACKAGES.glob("*/src/**/*.py"))
    assert len(sources) > 50  # the glob found the packages
    texts = {path: path.read_text(encoding="utf-8") for path in sources}
    too_long = {
        str(path.relative_to(PACKAGES)): lines
        for path, text in texts.items()
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES
        and not text.startswith(GENERATED_HEADER)
    }
    assert too_long == {}
