"""acp_core is sans-IO: importing it must not pull in any I/O or concurrency machinery."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e  # imports acp_core in a fresh interpreter process

FORBIDDEN = ("trio", "asyncio", "socket", "sqlite3", "subprocess", "threading", "logging")

PROBE = f"""
import json, sys
before = set(sys.modules)
import acp_core, acp_core.schema, acp_core.methods, acp_core.aliases, acp_core.blobs, acp_core.tools
loaded = set(sys.modules) - before
print(json.dumps(sorted(name for name in loaded if name.split(".")[0] in {FORBIDDEN!r})))
"""


def test_importing_acp_core_loads_no_io_modules() -> None:
    # -I: isolated mode, so no site customisation or PYTHONSTARTUP can pre-load modules.
    result = subprocess.run(
        [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(result.stdout) == []
