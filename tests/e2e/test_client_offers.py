"""What the agent does with what an editor offers, through a real `zeroclaw acp`: extra
roots (``additionalDirectories``), elicitation, the client's files and terminals, images.

The client here advertises the capabilities a test names and answers the agent's outbound
calls (``elicitation/create``, ``fs/*``, ``terminal/*``) as Zed does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import JsonDict, RpcPipeClient, allow_once, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

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


async def initialize(client: RpcPipeClient, capabilities: JsonDict | None = None) -> JsonDict:
    params: JsonDict = {"protocolVersion": 1, "clientCapabilities": capabilities or {}}
    result: JsonDict = await client.result("initialize", params)
    return result


# --------------------------------------------------------------------------- extra roots


async def test_additional_directories_are_extra_roots_that_load_and_resume_restore(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace, library, elsewhere = tmp_path / "ws", tmp_path / "lib", tmp_path / "elsewhere"
    for directory in (workspace, library, elsewhere):
        directory.mkdir()
    (library / "notes.txt").write_text("from the library\n")
    (elsewhere / "other.txt").write_text("not a root\n")
    (workspace / "lib-link").symlink_to(library)
    read_library = tool_line("file_read", {"path": str(library / "notes.txt")})
    read_elsewhere = tool_line("file_read", {"path": str(elsewhere / "other.txt")})
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            init = await initialize(client)
            caps = init["agentCapabilities"]["sessionCapabilities"]
            assert caps["additionalDirectories"] == {}
            # Checked like cwd: a missing directory or a file is refused, naming the entry.
            missing = await client.error(
                "session/new",
                {"cwd": str(workspace), "additionalDirectories": [str(tmp_path / "nope")]},
            )
            assert missing["code"] == -32602
            assert "additionalDirectories[0] is not a usable directory" in missing["message"]
            not_dir = await client.error(
                "session/new",
                {
                    "cwd": str(workspace),
                    "additionalDirectories": [str(library), str(library / "notes.txt")],
                },
            )
            assert "additionalDirectories[1] is not a usable directory" in not_dir["message"]
            assert "Not a directory" in not_dir["message"]
            new = await client.result(
                "session/new",
                {"cwd": str(workspace), "additionalDirectories": ["lib-link"]},
            )
            session_id = new["sessionId"]
            inside, outside = await run_tools(client, session_id, read_library, read_elsewhere)
    assert inside["status"] == "completed"
    assert "from the library" in output_text(inside)
    assert outside["status"] == "failed"
    assert "escapes workspace directory" in output_text(outside)

    # A new process: load restores the stored roots (the canonical path of the link).
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await initialize(client)
            await client.result("session/load", {"sessionId": session_id, "cwd": str(workspace)})
            [again] = await run_tools(client, session_id, read_library)
            await client.result("session/close", {"sessionId": session_id})
            # A resume that sends its own list replaces the stored one.
            await client.result(
                "session/resume",
                {
                    "sessionId": session_id,
                    "cwd": str(workspace),
                    "additionalDirectories": [str(elsewhere)],
                },
            )
            swapped_out, swapped_in = await run_tools(
                client, session_id, read_library, read_elsewhere
            )
    assert again["status"] == "completed"
    assert "from the library" in output_text(again)
    assert swapped_out["status"] == "failed"
    assert swapped_in["status"] == "completed"
    assert "not a root" in output_text(swapped_in)
