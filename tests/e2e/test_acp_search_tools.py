"""Search and file tools against hostile input, through a real `zeroclaw acp` (the echo
provider's ``/tool`` directive scripts the calls): a catastrophic regex, file names that
are not UTF-8, and tool arguments holding lone surrogates."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import allow_once, open_session, spawn_acp
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


def _tool_outputs(updates: list[dict[str, Any]]) -> list[Any]:
    return [
        update["rawOutput"]
        for update in updates
        if update["sessionUpdate"] == "tool_call_update" and "rawOutput" in update
    ]


async def test_a_catastrophic_regex_leaves_the_server_answering(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # Python's backtracking engine needs ~2^40 steps per line for this pattern.
    (workspace / "haystack.txt").write_text(("a" * 40 + "\n") * 20)
    search = '/tool content_search {"pattern": "(.*.*)*ZZZ"}'
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            first = await open_session(client, workspace)
            searching = await client.prompt_request(first, search)
            second = await client.call("session/new", {"cwd": str(workspace)})
            assert "result" in second, second
            other = second["result"]["sessionId"]
            reply = await client.prompt(other, "still there?", within=10.0)
            assert reply["result"]["stopReason"] == "end_turn"
            searched = await client.wait_response(searching, within=10.0)
    assert searched["result"]["stopReason"] == "end_turn"
    assert _tool_outputs(client.updates(first)) == ["No matches for '(.*.*)*ZZZ'"]


async def test_non_utf8_names_and_lone_surrogates_are_tool_results(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"needle\n")
    prompt = "\n".join(
        [
            '/tool glob_search {"pattern": "*.txt"}',
            '/tool content_search {"pattern": "needle"}',
            "/tool file_write " + json.dumps({"path": "x.txt", "content": "\\ud800"}),
            "/tool content_search " + json.dumps({"pattern": "\\udfff"}),
        ]
    ).replace("\\\\u", "\\u")
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(session_id, prompt, on_request=allow_once)
    assert response["result"]["stopReason"] == "end_turn", response
    listed, found, written, searched = _tool_outputs(client.updates(session_id))
    assert listed == "caf\\xe9.txt"
    assert found == "caf\\xe9.txt:1: needle"
    assert written.startswith("Error: Invalid 'content'")
    assert searched.startswith("Error: Invalid 'pattern'")
    assert not (workspace / "x.txt").exists()


async def test_a_lone_surrogate_in_any_argument_is_a_failed_call_and_the_turn_is_kept(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    prompt = "\n".join(
        [
            '/tool file_read {"path": "\\ud800"}',
            '/tool deliver_file {"path": "a\\udfffb.txt"}',
            '/tool todo_write {"todos": [{"content": "\\udc00", "status": "pending"}]}',
            '/tool http_request {"url": "http://127.0.0.1:9/", "headers": {"X-A": "\\ud801"}}',
        ]
    )
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(session_id, prompt, on_request=allow_once)
        async with spawn_acp(config_dir) as again:
            await again.call("initialize", {"protocolVersion": 1})
            loaded = await again.call("session/load", {"sessionId": session_id})
    assert response["result"]["stopReason"] == "end_turn", response
    outputs = _tool_outputs(client.updates(session_id))
    assert [output.split(":")[1].strip() for output in outputs] == [
        "Invalid 'path'",
        "Invalid 'path'",
        "Invalid 'todos[0].content'",
        "Invalid 'headers.X-A'",
    ]
    assert all("unpaired surrogate" in output for output in outputs)
    # The turn was stored: a new process loads and replays it, calls and all.
    assert "result" in loaded, loaded
    assert _tool_outputs(again.updates(session_id)) == outputs
