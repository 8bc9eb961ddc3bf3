"""The bridge is a small local relay: it must never pull in the server or its HTTP/WebSocket stacks.

The common brief: acp_bridge NEVER imports acp_server. An IDE starts the bridge for every agent
session, so loading the server (and with it trio-websocket, httpx, sqlite) would cost start time and
would couple the two packages' releases.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import acp_bridge

FORBIDDEN_TOP_LEVEL = ("acp_server", "trio_websocket", "httpx")

PROBE = f"""
import json, sys
before = set(sys.modules)
import acp_bridge.cli
loaded = set(sys.modules) - before
print(json.dumps(sorted(name for name in loaded if name.split(".")[0] in {FORBIDDEN_TOP_LEVEL!r})))
"""


def test_importing_the_bridge_cli_loads_neither_the_server_nor_its_stacks() -> None:
    # -I: isolated mode, so no site customisation or PYTHONSTARTUP can pre-load (or hide) modules.
    result = subprocess.run(
        [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []


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
