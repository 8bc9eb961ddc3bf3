"""The official TypeScript SDK's clients (npm ``@agentclientprotocol/sdk``), run by Node.

``install_ts_sdk`` installs the SDK and ``ws`` (Node 20 has no global WebSocket; the SDK's
WebSocket client takes a constructor) with npm into a cache directory outside the
repository (``ZEROCLAW_ACP_TS_SDK_CACHE``, default ``~/.cache/zeroclaw-tests``), as
tests/acp_schema.py does for the schema, and never copies anything into the repository.
Without node or npm the tests that need them skip, saying why; with
``ZEROCLAW_REQUIRE_SCHEMA_TESTS=1`` (set by ``.ci/run``) they fail instead.

``run_ts_client`` runs tests/e2e/acp_ts_client.mjs, which drives a gateway with the SDK's
Streamable HTTP or WebSocket client, and returns the JSON it prints.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Final

import trio

from tests.acp_schema import SDK_PACKAGE, SDK_VERSION, _unavailable, npm_install

WS_PACKAGE: Final = "ws@8.18.3"
CACHE_ENV: Final = "ZEROCLAW_ACP_TS_SDK_CACHE"
WHAT: Final = "the official TypeScript ACP SDK"
CLIENT_SCRIPT: Final = Path(__file__).parent / "e2e" / "acp_ts_client.mjs"
RUN_TIMEOUT_SECS: Final = 90


def install_ts_sdk() -> Path:
    """The installed package's directory (``.../node_modules/@agentclientprotocol/sdk``),
    installing it first when needed."""
    configured = os.environ.get(CACHE_ENV)
    cache = (
        Path(configured)
        if configured
        else Path.home() / ".cache" / "zeroclaw-tests" / f"acp-ts-clients-{SDK_VERSION}"
    )
    package = cache / "node_modules" / SDK_PACKAGE
    if shutil.which("node") is None:
        _unavailable("node is not on PATH (it runs the SDK's clients)", WHAT)
    npm_install(
        cache,
        [f"{SDK_PACKAGE}@{SDK_VERSION}", WS_PACKAGE],
        cache / "node_modules" / "ws" / "package.json",
        WHAT,
    )
    return package


async def run_ts_client(package: Path, **arguments: Any) -> dict[str, Any]:
    """Run the Node driver with ``arguments`` (JSON on its command line); what it prints."""
    node = shutil.which("node")
    assert node is not None
    with trio.fail_after(RUN_TIMEOUT_SECS):
        done = await trio.run_process(
            [node, str(CLIENT_SCRIPT), json.dumps({"sdk": str(package), **arguments})],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"node exited {done.returncode}:\n{stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result
