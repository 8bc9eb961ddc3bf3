"""The bridge is a small local relay: it must never pull in the server or its HTTP/WebSocket stacks.

acp_bridge never imports acp_server: an IDE starts the bridge for every agent
session, so loading the server (and with it its WebSocket stack, wsproto and h11, httpx, sqlite)
would cost start time and would couple the two packages' releases.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import acp_bridge
from tests.meta.fresh_interpreter import modules_loaded_by

pytestmark = pytest.mark.e2e  # imports the bridge in a fresh interpreter process

FORBIDDEN_TOP_LEVEL = ("acp_server", "wsproto", "h11", "httpx")


def test_importing_the_bridge_cli_loads_neither_the_server_nor_its_stacks() -> None:
    assert modules_loaded_by("import acp_bridge.cli", FORBIDDEN_TOP_LEVEL) == []


def _imported_top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_bridge_module_imports_them_even_lazily() -> None:
    # The subprocess probe only sees module-level imports; a function-level import would slip
    # through it and fire at run time, so every statement in every module is checked too.
    package_dir = Path(acp_bridge.__file__).parent
    modules = sorted(package_dir.glob("*.py"))
    assert len(modules) > 5, f"expected the bridge's modules in {package_dir}"
    offenders = {
        module.name: sorted(
            _imported_top_level_names(module.read_text()) & set(FORBIDDEN_TOP_LEVEL)
        )
        for module in modules
    }
    assert {name: found for name, found in offenders.items() if found} == {}
