"""Every ACP method string lives in acp_core.methods; package code names methods
through its constants, so a renamed or added method is one edit, not a search."""

from __future__ import annotations

import ast
from pathlib import Path

from acp_core import methods

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
METHOD_NAMES = frozenset(
    value
    for name, value in vars(methods).items()
    if name.isupper() and isinstance(value, str) and ("/" in value or value == "initialize")
)


def method_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path.relative_to(PACKAGES)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in METHOD_NAMES
    ]


def test_the_table_knows_the_method_names() -> None:
    assert {"initialize", "session/prompt", "$/cancel_request"} <= METHOD_NAMES


def test_no_method_string_literals_outside_acp_core_methods() -> None:
    found: list[str] = []
    for path in sorted(PACKAGES.glob("*/src/**/*.py")):
        relative = path.relative_to(PACKAGES).as_posix()
        if relative == "acp-core/src/acp_core/methods.py":
            continue
        found += method_literals(path)
    assert found == []
