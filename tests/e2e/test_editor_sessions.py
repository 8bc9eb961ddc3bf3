"""Sessions an editor can list, name and delete, through a real `zeroclaw acp`.

ACP ``session/list`` and ``session/delete`` (``sessionCapabilities.list`` / ``.delete``),
the ``session_info_update`` title from the first prompt, and ``session/resume`` sending
nothing before its answer.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.storage.sqlite import MIGRATIONS, SessionStore
from tests.e2e.helpers import (
    JsonDict,
    RpcPipeClient,
    child_env,
    console_script,
    open_session,
    spawn_acp,
)
from tests.e2e.test_store_e2e import store_file
from tests.helpers import echo_config, poll_until, write_config

pytestmark = pytest.mark.e2e

SESSION_NOT_FOUND = -32000
INVALID_PARAMS = -32602


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    return write_config(tmp_path / "cfg", echo_config(max_sessions=4))


def workspace(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return path


async def prompt(client: RpcPipeClient, session_id: str, text: str) -> JsonDict:
    response = await client.call("session/prompt", {"sessionId": session_id, "prompt": text})
    assert response["result"]["stopReason"] == "end_turn", response
    return response


async def list_all(client: RpcPipeClient, **params: Any) -> list[JsonDict]:
    """Every page of session/list, following nextCursor."""
    sessions: list[JsonDict] = []
    cursor: str | None = None
    for _ in range(100):
        page_params = dict(params) if cursor is None else {**params, "cursor": cursor}
        response = await client.call("session/list", page_params)
        page = response["result"]
        sessions += page["sessions"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return sessions
    raise AssertionError("session/list never ended")


def cli_sessions(config_dir: Path) -> list[JsonDict]:
    completed = subprocess.run(
        [str(console_script("zeroclaw")), "sessions", "list", "--json"],
        capture_output=True,
        env=child_env(config_dir),
        timeout=30,
        check=True,
    )
    listed: list[JsonDict] = json.loads(completed.stdout)
    return listed


async def test_list_is_advertised_newest_first_filtered_by_cwd_with_titles(
    tmp_path: Path, config_dir: Path
) -> None:
    one, two = workspace(tmp_path, "one"), workspace(tmp_path, "two")
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            init = await client.call("initialize", {"protocolVersion": 1})
            capabilities = init["result"]["agentCapabilities"]["sessionCapabilities"]
            assert capabilities["list"] == {}
            assert capabilities["delete"] == {}
            first = (await client.call("session/new", {"cwd": str(one)}))["result"]["sessionId"]
            second = (await client.call("session/new", {"cwd": str(two)}))["result"]["sessionId"]
            third = (await client.call("session/new", {"cwd": str(one)}))["result"]["sessionId"]
            await prompt(client, first, "  Fix the   login bug\t \nand more detail below")
            listed = await list_all(client)
            in_one = await list_all(client, cwd=str(one))
            bad = await client.call("session/list", {"cursor": "not-a-cursor"})
    # The prompted session was active last, then the newest of the others.
    assert [s["sessionId"] for s in listed] == [first, third, second]
    assert listed[0] == {
        "sessionId": first,
        "cwd": str(one.resolve()),
        "title": "Fix the login bug",
        "updatedAt": listed[0]["updatedAt"],
    }
    assert datetime.fromisoformat(listed[0]["updatedAt"]).tzinfo is not None
    # Never prompted: no title key at all (a null one crashes CodeCompanion.nvim's /resume:
    # Lua decodes null to a truthy value, lua/.../slash_commands/builtin/resume.lua).
    assert "title" not in listed[1]
    assert "title" not in listed[2]
    assert [s["sessionId"] for s in in_one] == [first, third]
    assert bad["error"]["code"] == INVALID_PARAMS


async def test_list_pages_through_a_large_store_without_repeats(
    tmp_path: Path, config_dir: Path
) -> None:
    ws = workspace(tmp_path, "ws")
    store_path = store_file(config_dir)
    store_path.parent.mkdir(parents=True)
    store = SessionStore.open(store_path)
    ids = [f"stored-{index:03}" for index in range(123)]
    try:
        for session_id in ids:
            store.create_session(session_id, "echo", str(ws))
    finally:
        store.close()
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            first_page = (await client.call("session/list", {}))["result"]
            listed = await list_all(client)
    assert 0 < len(first_page["sessions"]) < len(ids)
    assert isinstance(first_page["nextCursor"], str)
    assert [s["sessionId"] for s in listed] == list(reversed(ids))  # newest first, once each


async def test_title_is_announced_stored_listed_by_the_cli_and_replayed_by_load(
    tmp_path: Path, config_dir: Path
) -> None:
    ws = workspace(tmp_path, "ws")
    long_prompt = "word " * 100
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, ws)
            await prompt(client, session_id, "\n\n  Rename the parser module  \nplease")
            await prompt(client, session_id, "a second prompt keeps the title")
            titles = client.titles(session_id)
            other = (await client.call("session/new", {"cwd": str(ws)}))["result"]["sessionId"]
            await prompt(client, other, long_prompt)
            long_title = [u["title"] for u in client.titles(other)]
        assert titles == [
            {"sessionUpdate": "session_info_update", "title": "Rename the parser module"}
        ]
        assert len(long_title) == 1
        assert len(long_title[0]) <= 80
        assert long_title[0].endswith("…")
        assert "\n" not in long_title[0]

        cli = {s["sessionId"]: s["title"] for s in cli_sessions(config_dir)}
        assert cli == {session_id: "Rename the parser module", other: long_title[0]}

        async with spawn_acp(config_dir) as again:
            await again.call("initialize", {"protocolVersion": 1})
            loaded = await again.call("session/load", {"sessionId": session_id})
            replayed = again.titles(session_id)
            await prompt(again, session_id, "after the restart")
            after = again.titles(session_id)
    assert loaded["result"].keys() == {"modes", "configOptions"}
    assert replayed == titles  # load sends the stored title
    assert after == titles  # a later prompt does not rename the session


async def test_a_store_written_before_titles_opens_and_names_its_session_on_the_next_prompt(
    tmp_path: Path, config_dir: Path
) -> None:
    ws = workspace(tmp_path, "ws").resolve()
    store_path = store_file(config_dir)
    store_path.parent.mkdir(parents=True)
    with sqlite3.connect(store_path) as conn:
        for step in MIGRATIONS[:3]:
            step(conn)
        conn.execute("PRAGMA user_version = 3")
        conn.execute(
            "INSERT INTO acp_sessions (session_uuid, agent_alias, workspace_dir, created_at,"
            " last_activity) VALUES ('old-one', 'echo', ?, '2025-01-01T00:00:00+00:00',"
            " '2025-01-01T00:00:00+00:00')",
            (str(ws),),
        )
    conn.close()
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            before = await list_all(client)
            assert (await client.call("session/resume", {"sessionId": "old-one"}))[
                "result"
            ].keys() == {"modes", "configOptions"}
            await prompt(client, "old-one", "Named at last")
            after = await list_all(client)
    assert before == [
        {
            "sessionId": "old-one",
            "cwd": str(ws),
            "updatedAt": "2025-01-01T00:00:00+00:00",
        }
    ]
    assert after[0]["title"] == "Named at last"


async def test_delete_closes_an_active_session_and_removes_it_from_the_store(
    tmp_path: Path, config_dir: Path
) -> None:
    ws = workspace(tmp_path, "ws")
    (ws / "uploads").mkdir()
    (ws / "uploads" / "shared.bin").write_bytes(b"kept")
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            active = await open_session(client, ws)
            await prompt(client, active, "remember me")
            idle = (await client.call("session/new", {"cwd": str(ws)}))["result"]["sessionId"]
            assert (await client.call("session/close", {"sessionId": idle}))["result"] == {}
            deleted_active = await client.call("session/delete", {"sessionId": active})
            deleted_idle = await client.call("session/delete", {"sessionId": idle})
            prompt_after = await client.call(
                "session/prompt", {"sessionId": active, "prompt": "still there?"}
            )
            load_after = await client.call("session/load", {"sessionId": active})
            again = await client.call("session/delete", {"sessionId": active})
            listed = await list_all(client)
    assert deleted_active["result"] == {}
    assert deleted_idle["result"] == {}
    assert prompt_after["error"]["code"] == SESSION_NOT_FOUND
    assert load_after["error"]["code"] == SESSION_NOT_FOUND
    assert again["error"]["code"] == SESSION_NOT_FOUND
    assert listed == []
    assert cli_sessions(config_dir) == []
    with sqlite3.connect(store_file(config_dir)) as conn:
        assert conn.execute("SELECT count(*) FROM acp_messages").fetchone() == (0,)
    conn.close()
    assert (ws / "uploads" / "shared.bin").read_bytes() == b"kept"


async def test_resume_sends_no_session_update_before_answering(
    tmp_path: Path, config_dir: Path
) -> None:
    ws = workspace(tmp_path, "ws")
    todo = (
        '/tool todo_write {"todos": [{"content": "Read", "status": "in_progress",'
        ' "priority": "high"}]}'
    )
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, ws)
            await prompt(client, session_id, todo)
        async with spawn_acp(config_dir) as again:
            await again.call("initialize", {"protocolVersion": 1})
            resumed = await again.call("session/resume", {"sessionId": session_id})
            before_answer = again.updates(session_id) + again.titles(session_id)
    assert resumed["result"].keys() == {"modes", "configOptions"}
    assert before_answer == []


@pytest.mark.parametrize(
    ("style", "expected"), [(None, -32000), ("zeroclaw", -32000), ("acp", -32002)]
)
async def test_error_codes_setting_picks_the_session_not_found_code(
    tmp_path: Path, style: str | None, expected: int
) -> None:
    document = echo_config()
    if style is not None:
        document["acp"] = {"error_codes": style}
    config_dir = write_config(tmp_path / "cfg", document)
    ws = workspace(tmp_path, "ws")
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, ws)
            errors = [
                await client.call("session/prompt", {"sessionId": "nope", "prompt": "x"}),
                await client.call("session/load", {"sessionId": "nope"}),
                await client.call("session/resume", {"sessionId": "nope"}),
                await client.call("session/close", {"sessionId": "nope"}),
                await client.call("session/delete", {"sessionId": "nope"}),
            ]
            busy_free = await client.call("session/close", {"sessionId": session_id})
    assert [e["error"]["code"] for e in errors] == [expected] * 5
    assert all(e["error"]["message"] == "Session not found: nope" for e in errors)
    assert busy_free["result"] == {}


def test_an_unknown_error_codes_style_is_a_config_error(tmp_path: Path) -> None:
    document = echo_config()
    document["acp"] = {"error_codes": "jsonrpc"}
    config_dir = write_config(tmp_path / "cfg", document)
    completed = subprocess.run(
        [str(console_script("zeroclaw")), "acp"],
        capture_output=True,
        input=b"",
        env=child_env(config_dir),
        timeout=30,
        check=False,
    )
    assert completed.returncode == 2
    assert b"acp.error_codes" in completed.stderr


async def test_a_prompt_for_a_session_the_idle_reaper_dropped_restores_it(
    tmp_path: Path,
) -> None:
    document = echo_config()
    document["acp"] = {"idle_session_timeout_secs": 1}
    config_dir = write_config(tmp_path / "cfg", document)
    ws = workspace(tmp_path, "ws")
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            reaped = await open_session(client, ws)
            await prompt(client, reaped, "before the night")
            probe = (await client.call("session/new", {"cwd": str(ws)}))["result"]["sessionId"]

            async def probe_was_reaped() -> bool:
                # While live, a load is refused as already active; once reaped it loads.
                loaded = await client.call("session/load", {"sessionId": probe})
                return "result" in loaded

            await poll_until(probe_was_reaped, within=30)
            # The older session went in the same sweep; its prompt brings it back.
            answer = await client.call(
                "session/prompt", {"sessionId": reaped, "prompt": "good morning"}
            )
            replayed = client.updates(reaped)
    assert answer["result"]["stopReason"] == "end_turn", answer
    assert answer["result"]["content"] == "good morning"
    assert not [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]  # no replay
