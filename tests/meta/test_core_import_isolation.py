"""acp_core is sans-IO: importing it must not pull in any I/O or concurrency machinery."""

from __future__ import annotations

import pytest

from tests.meta.fresh_interpreter import modules_loaded_by

pytestmark = pytest.mark.e2e  # imports acp_core in a fresh interpreter process

FORBIDDEN = ("trio", "asyncio", "socket", "sqlite3", "subprocess", "threading", "logging")


def test_importing_acp_core_loads_no_io_modules() -> None:
    imports = (
        "import acp_core, acp_core.schema, acp_core.methods, acp_core.aliases, acp_core.blobs, "
        "acp_core.tools"
    )
    assert modules_loaded_by(imports, FORBIDDEN) == []
