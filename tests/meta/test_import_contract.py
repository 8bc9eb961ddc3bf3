"""The import contract (``[tool.importlinter]`` in pyproject.toml, docs/architecture.md) holds on
the sources, and breaks when a wrong import is planted into a copy of them.

Each case copies the three packages' sources and the repository's pyproject.toml into a
scratch directory, plants one module there and runs import-linter on the copy in a fresh
interpreter (``sys.executable``, so nothing depends on PATH). ``PYTHONPATH`` puts the copy
ahead of the editable installs, so the planted tree is the one analysed. The clean copy must
pass, so a planted case cannot fail for an unrelated reason; each planted case must fail,
naming the contract it broke and the import that broke it, so the contract cannot pass
vacuously.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # runs import-linter in a fresh interpreter process

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_SOURCES = (
    "acp-core/src/acp_core",
    "acp-server/src/acp_server",
    "acp-bridge/src/acp_bridge",
)
LINT = (
    "import sys; from importlinter.cli import lint_imports_command; "
    "lint_imports_command(['--no-cache', '--no-logo'])"
)


def _copy_sources(destination: Path) -> Path:
    for relative in PACKAGE_SOURCES:
        source = ROOT / "packages" / relative
        shutil.copytree(
            source, destination / "src" / source.name, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", destination / "pyproject.toml")
    return destination


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    # cwd=tree: import-linter reads tree/pyproject.toml.
    env = {
        **os.environ,
        "PYTHONPATH": str(tree / "src"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "COLUMNS": "400",
    }
    return subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_sources(tmp_path_factory.mktemp("pristine"))


def test_the_contracts_hold_on_a_copy_of_the_sources(pristine: Path) -> None:
    result = _lint(pristine)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@dataclass(frozen=True)
class Plant:
    path: str  # under src/: a new module, or an existing one the import is added to
    source: str
    contract: str  # the contract's name as import-linter reports it broken
    reported: str  # what the report names: the import, or the unplaced module


SERVER_LAYERS = "acp_server: each layer imports only the layers below it"
AGENT_ROOMS = "acp_server.agent: runtime > prompt > skills > limits > tools > providers > io"
PROTOCOL_ROOMS = "acp_server.protocol: connection > router > services > presentation > outbound"

PLANTS = {
    "storage imports the gateway": Plant(
        "acp_server/storage/_planted.py",
        "from acp_server.gateway import service\n",
        SERVER_LAYERS,
        "acp_server.storage._planted -> acp_server.gateway.service",
    ),
    "the agent imports the protocol, lazily": Plant(
        "acp_server/agent/tools/_planted.py",
        "def late() -> None:\n    from acp_server.protocol import connection\n",
        SERVER_LAYERS,
        "acp_server.agent.tools._planted -> acp_server.protocol.connection",
    ),
    "the protocol imports the composition root for typing only": Plant(
        "acp_server/protocol/_planted.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from acp_server import app\n",
        SERVER_LAYERS,
        "acp_server.protocol._planted -> acp_server.app",
    ),
    "the model imports storage": Plant(
        "acp_server/model.py",
        "from acp_server.storage import records\n",
        SERVER_LAYERS,
        "acp_server.model -> acp_server.storage.records",
    ),
    "config imports the model": Plant(
        "acp_server/config/_planted.py",
        "from acp_server import model\n",
        SERVER_LAYERS,
        "acp_server.config._planted -> acp_server.model",
    ),
    "the protocol imports the test kit": Plant(
        "acp_server/protocol/_planted.py",
        "from acp_server.testing import StubTool\n",
        SERVER_LAYERS,
        "acp_server.protocol._planted -> acp_server.testing",
    ),
    "the CLI imports the test kit beside it": Plant(
        "acp_server/cli/_planted.py",
        "from acp_server import testing\n",
        SERVER_LAYERS,
        "acp_server.cli._planted -> acp_server.testing",
    ),
    "a top-level module in no layer": Plant(
        "acp_server/_planted.py",
        "",
        SERVER_LAYERS,
        "acp_server._planted",
    ),
    "a tool imports the turn that runs it": Plant(
        "acp_server/agent/tools/_planted.py",
        "from acp_server.agent.runtime import turn\n",
        AGENT_ROOMS,
        "acp_server.agent.tools._planted -> acp_server.agent.runtime.turn",
    ),
    "the skills read the system prompt for typing only": Plant(
        "acp_server/agent/skills/_planted.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from acp_server.agent.prompt import system_prompt\n",
        AGENT_ROOMS,
        "acp_server.agent.skills._planted -> acp_server.agent.prompt.system_prompt",
    ),
    "the shared I/O imports a provider": Plant(
        "acp_server/agent/io/_planted.py",
        "from acp_server.agent.providers import base\n",
        AGENT_ROOMS,
        "acp_server.agent.io._planted -> acp_server.agent.providers.base",
    ),
    "a module at the agent's root, in no room": Plant(
        "acp_server/agent/_planted.py",
        "",
        AGENT_ROOMS,
        "acp_server.agent._planted",
    ),
    "a service imports the connection, for typing only": Plant(
        "acp_server/protocol/services/_planted.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from acp_server.protocol.connection import AcpConnection\n",
        PROTOCOL_ROOMS,
        "acp_server.protocol.services._planted -> acp_server.protocol.connection",
    ),
    "a service imports the router": Plant(
        "acp_server/protocol/services/_planted.py",
        "def late() -> None:\n    from acp_server.protocol import router\n",
        PROTOCOL_ROOMS,
        "acp_server.protocol.services._planted -> acp_server.protocol.router",
    ),
    "the presentation reads the session table": Plant(
        "acp_server/protocol/presentation/_planted.py",
        "from acp_server.protocol.services import session_table\n",
        PROTOCOL_ROOMS,
        "acp_server.protocol.presentation._planted -> acp_server.protocol.services.session_table",
    ),
    "a module at the protocol's root, in no room": Plant(
        "acp_server/protocol/_planted.py",
        "",
        PROTOCOL_ROOMS,
        "acp_server.protocol._planted",
    ),
    "the SQLite backend imports the PostgreSQL one": Plant(
        "acp_server/storage/sqlite/_planted.py",
        "from acp_server.storage.postgres import store\n",
        "the SQLite and PostgreSQL backends never import each other",
        "acp_server.storage.sqlite._planted -> acp_server.storage.postgres.store",
    ),
    "acp_core imports the server": Plant(
        "acp_core/_planted.py",
        "import acp_server.errors\n",
        "acp_core imports neither the server nor the bridge",
        "acp_core._planted -> acp_server.errors",
    ),
    "the bridge imports the server": Plant(
        "acp_bridge/_planted.py",
        "import acp_server.errors\n",
        "the bridge never imports the server (an IDE installs it alone)",
        "acp_bridge._planted -> acp_server.errors",
    ),
}


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_a_wrong_import_breaks_the_contract(pristine: Path, tmp_path: Path, plant: Plant) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(pristine, tree)
    planted = tree / "src" / plant.path
    existing = planted.read_text() if planted.exists() else ""
    planted.write_text(existing + plant.source)  # an existing module gains the import

    result = _lint(tree)

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{plant.contract} BROKEN" in result.stdout
    assert plant.reported in result.stdout


def test_an_ignore_line_that_matches_no_import_breaks_the_run(
    pristine: Path, tmp_path: Path
) -> None:
    # The ratchet: a step that removes an import must delete its ignore line too.
    tree = tmp_path / "tree"
    shutil.copytree(pristine, tree)
    pyproject = tree / "pyproject.toml"
    text = pyproject.read_text()
    contract_start = text.index('id = "server-layers"')
    stale = '"acp_server.storage.codec -> acp_server.gateway.service"'
    if "ignore_imports = [" in text[contract_start:]:
        at = text.index("ignore_imports = [", contract_start) + len("ignore_imports = [")
        text = f"{text[:at]}\n    {stale},{text[at:]}"
    else:
        at = text.index("\n\n", contract_start)
        text = f"{text[:at]}\nignore_imports = [{stale}]{text[at:]}"
    pyproject.write_text(text)

    result = _lint(tree)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "acp_server.storage.codec -> acp_server.gateway.service" in result.stdout + result.stderr
