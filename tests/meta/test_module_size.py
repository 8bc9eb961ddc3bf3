"""Module size, as docs/architecture.md states it: the import contract is the structural
test; size is a warning. A module under packages/*/src past 600 lines is reported as a
warning (split it along a concept it holds when you next touch it); one past 800 lines fails,
since by then it holds several concepts whatever its imports say. A generated module
(acp_core/schema/generated.py, ACP's types) follows its schema, not this rule."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

WARN_MODULE_LINES = 600
MAX_MODULE_LINES = 800
GENERATED_HEADER = "# Generated from "
PACKAGES = Path(__file__).resolve().parents[2] / "packages"


class LongModuleWarning(UserWarning):
    """A hand-written module past the size warning."""


def module_lengths() -> dict[str, int]:
    sources = sorted(PACKAGES.glob("*/src/**/*.py"))
    assert len(sources) > 50  # the glob found the packages
    lengths = {}
    for path in sources:
        text = path.read_text(encoding="utf-8")
        if not text.startswith(GENERATED_HEADER):
            lengths[str(path.relative_to(PACKAGES))] = len(text.splitlines())
    return lengths


# Shown in the warnings summary, never turned into an error by the suite's filterwarnings.
@pytest.mark.filterwarnings("default::tests.meta.test_module_size.LongModuleWarning")
def test_no_source_module_is_over_the_line_limit() -> None:
    lengths = module_lengths()
    for name, lines in sorted(lengths.items()):
        if lines > WARN_MODULE_LINES:
            warnings.warn(f"{name}: {lines} lines", LongModuleWarning, stacklevel=1)
    assert {name: lines for name, lines in lengths.items() if lines > MAX_MODULE_LINES} == {}
