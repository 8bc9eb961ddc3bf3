"""Shared by the end-to-end tests of what the agent does with what an editor offers
(tests/e2e/test_client_offers.py, tests/e2e/test_client_shell_images.py): a client that
advertises the capabilities a test names and answers the agent's outbound calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.helpers import JsonDict, RpcPipeClient, allow_once
from tests.helpers import echo_config, write_config

CEILING_SECS = 60


def tool_line(name: str, arguments: dict[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


def finished_calls(client: RpcPipeClient, session_id: str) -> list[JsonDict]:
    """The closing ``tool_call_update`` of every call of the session, in order."""
    return [
        update
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "tool_call_update"
        and update.get("status") in ("completed", "failed")
    ]


def output_text(update: JsonDict) -> str:
    return "".join(
        item["content"]["text"]
        for item in update.get("content", [])
        if item["type"] == "content" and item["content"]["type"] == "text"
    )


async def run_tools(
    client: RpcPipeClient, session_id: str, *lines: str, on_request: Any = allow_once
) -> list[JsonDict]:
    """One turn of ``/tool`` lines; the closing update of each call."""
    seen = len(finished_calls(client, session_id))
    response = await client.prompt(session_id, "\n".join(lines), on_request=on_request)
    assert response["result"]["stopReason"] == "end_turn", response
    return finished_calls(client, session_id)[seen:]


async def initialize(
    client: RpcPipeClient,
    capabilities: JsonDict | None = None,
    client_info: JsonDict | None = None,
) -> JsonDict:
    params: JsonDict = {"protocolVersion": 1, "clientCapabilities": capabilities or {}}
    if client_info is not None:
        params["clientInfo"] = client_info
    result: JsonDict = await client.result("initialize", params)
    return result


async def offered_session(client: RpcPipeClient, cwd: Path, capabilities: JsonDict) -> str:
    """initialize with ``capabilities``, then session/new in ``cwd``; the session id."""
    await initialize(client, capabilities)
    new = await client.result("session/new", {"cwd": str(cwd)})
    session_id: str = new["sessionId"]
    return session_id


def gateway_with_a_file(tmp_path: Path) -> tuple[Path, Path]:
    """An echo gateway's config directory (no pairing) and a workspace whose ``a.txt``
    holds ``gateway disk``: ``(config_dir, workspace)``."""
    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (workspace / "a.txt").write_text("gateway disk\n")
    return config_dir, workspace
