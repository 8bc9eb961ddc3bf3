"""``zeroclaw-acp-bridge --shared-filesystem`` against a real `zeroclaw gateway`: the
gateway uses the editor's files (``fs/read_text_file``) only through a bridge started with
the flag, and its own disk otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.gateway_harness import run_gateway
from tests.e2e.helpers import JsonDict, spawn_zeroclaw
from tests.e2e.offers_helpers import (
    CEILING_SECS,
    gateway_with_a_file,
    output_text,
    run_tools,
    tool_line,
)

pytestmark = pytest.mark.e2e

FILES: JsonDict = {"fs": {"readTextFile": True, "writeTextFile": True}}


async def read_through_bridge(
    config_dir: Path, url: str, workspace: Path, *flags: str
) -> tuple[str, list[tuple[str, Any]]]:
    """One file_read of ``a.txt`` through a bridge started with ``flags``, by an editor
    whose buffer of it differs from the disk: the output and the editor's requests seen."""
    seen: list[tuple[str, Any]] = []
    buffer = str(workspace / "a.txt")

    def editor(request: JsonDict) -> JsonDict:
        seen.append((request["method"], request["params"].get("path")))
        assert request["method"] == "fs/read_text_file", request
        assert request["params"]["path"] == buffer
        return {"content": "editor buffer\n"}

    args = ["--url", url, *flags]
    async with spawn_zeroclaw(args, config_dir=config_dir, script="zeroclaw-acp-bridge") as ide:
        await ide.result("initialize", {"protocolVersion": 1, "clientCapabilities": FILES})
        new = await ide.result("session/new", {"cwd": str(workspace)})
        [read] = await run_tools(
            ide, new["sessionId"], tool_line("file_read", {"path": "a.txt"}), on_request=editor
        )
    assert read["status"] == "completed", read
    return output_text(read), seen


async def test_only_a_shared_filesystem_bridge_lets_the_gateway_read_the_editors_files(
    tmp_path: Path,
) -> None:
    config_dir, workspace = gateway_with_a_file(tmp_path)
    with trio.fail_after(CEILING_SECS):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            plain = await read_through_bridge(config_dir, url, workspace)
            shared = await read_through_bridge(config_dir, url, workspace, "--shared-filesystem")
    assert plain == ("     1\tgateway disk", [])
    assert shared == ("     1\teditor buffer", [("fs/read_text_file", str(workspace / "a.txt"))])
