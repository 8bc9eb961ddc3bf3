"""The session store's rooms and which way their imports point (docs/architecture.md,
"The session store"): storage sits below the agent, the protocol and the gateway; each
backend is a subpackage; what both share knows neither; the PostgreSQL driver is loaded
only when a URL asks for it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "packages" / "acp-server" / "src"
STORAGE = SRC / "acp_server" / "storage"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(STORAGE.rglob("*.py"))}


def imports(path: Path, *, top_level_only: bool = False) -> Iterator[str]:
    """Every module ``path`` imports (``from x import y`` yields ``x`` and ``x.y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def test_the_scan_sees_both_backends() -> None:
    assert "acp_server.storage.sqlite.store" in MODULES
    assert "acp_server.storage.postgres.store" in MODULES
    assert any(within(name, "acp_server.storage.codec") for name in imports(STORAGE / "history.py"))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_storage_imports_no_layer_above_it(module: str) -> None:
    above = ("acp_server.gateway", "acp_server.protocol", "acp_server.cli", "acp_server.app")
    wrong = [name for name in imports(MODULES[module]) if any(within(name, a) for a in above)]
    assert wrong == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_storage_imports_nothing_of_the_agent(module: str) -> None:
    """The conversation model it stores sits below it (acp_server/model.py)."""
    agent = [name for name in imports(MODULES[module]) if within(name, "acp_server.agent")]
    assert agent == []


@pytest.mark.parametrize(
    "module", sorted(name for name in MODULES if within(name, "acp_server.storage.postgres"))
)
def test_postgres_never_imports_the_sqlite_backend(module: str) -> None:
    assert not [
        name for name in imports(MODULES[module]) if within(name, "acp_server.storage.sqlite")
    ]


@pytest.mark.parametrize(
    "module",
    sorted(
        name
        for name in MODULES
        if not within(name, "acp_server.storage.sqlite")
        and not within(name, "acp_server.storage.postgres")
        and name not in ("acp_server.storage", "acp_server.storage.opener")
    ),
)
def test_only_the_opener_names_a_backend(module: str) -> None:
    backends = ("acp_server.storage.sqlite", "acp_server.storage.postgres")
    assert not [name for name in imports(MODULES[module]) if any(within(name, b) for b in backends)]


def test_importing_the_store_loads_no_postgresql_driver() -> None:
    """``import acp_server.storage`` (what every server process does) must work without the
    optional ``postgres`` extra: nothing it imports at module level reaches psycopg."""
    seen: set[str] = set()
    pending = ["acp_server.storage"]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        path = MODULES.get(module)
        if path is None:
            continue
        for name in imports(path, top_level_only=True):
            if name in MODULES:
                pending.append(name)
            assert not within(name, "psycopg"), f"{module} imports {name}"
            assert not within(name, "acp_server.storage.postgres"), f"{module} imports {name}"
    assert "acp_server.storage.sqlite.store" in seen  # the walk followed the opener
