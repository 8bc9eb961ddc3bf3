"""Real `zeroclaw acp` processes on the PostgreSQL store ([storage] url).

Turns survive a restart and replay as the client saw them; `ZEROCLAW_STORAGE_URL` selects
the same store; an unreachable database stops the start with a clear message instead of
running with sessions nobody else can see.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import JsonDict, child_env, console_script, open_session, spawn_acp
from tests.e2e.test_store_e2e import TURN_PROMPTS, as_replayed, config_and_workspace, prompt_turn
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


def postgres_config(tmp_path: Path, url: str) -> tuple[Path, Path]:
    config_dir, workspace = config_and_workspace(tmp_path)
    write_config(config_dir, {**echo_config(), "storage": {"url": url}})
    return config_dir, workspace


async def test_turns_survive_a_restart_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    config_dir, workspace = postgres_config(tmp_path, postgres_url)
    expected: list[JsonDict] = []
    with trio.fail_after(90):
        async with spawn_acp(config_dir) as first:
            session_id = await open_session(first, workspace)
            for prompt in TURN_PROMPTS[:3]:
                expected += as_replayed(prompt, await prompt_turn(first, session_id, prompt))
        assert first.process.returncode == 0

        async with spawn_acp(config_dir) as second:
            await second.call("initialize", {"protocolVersion": 1})
            loaded = await second.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}
            assert second.updates(session_id) == expected
            await prompt_turn(second, session_id, "one more after the restart")
            listed = await second.call("session/list", {})
            sessions = listed["result"]["sessions"]
            assert [entry["sessionId"] for entry in sessions] == [session_id]
    # Nothing went to the SQLite file: the database is the store.
    assert not (config_dir / "data" / "sessions" / "acp-sessions.db").exists()


async def test_the_environment_variable_selects_the_same_store(
    tmp_path: Path, postgres_url: str
) -> None:
    config_dir, workspace = postgres_config(tmp_path, postgres_url)
    plain_dir = write_config(tmp_path / "plain", echo_config())  # no [storage] table
    with trio.fail_after(90):
        async with spawn_acp(config_dir) as writer:
            session_id = await open_session(writer, workspace)
            await prompt_turn(writer, session_id, "stored in PostgreSQL")
        env = {"ZEROCLAW_STORAGE_URL": postgres_url}
        async with spawn_acp(plain_dir, env=env) as reader:
            await reader.call("initialize", {"protocolVersion": 1})
            loaded = await reader.call("session/load", {"sessionId": session_id})
            assert loaded["result"].keys() == {"modes", "configOptions"}
            texts = [
                update["content"]["text"]
                for update in reader.updates(session_id)
                if update["sessionUpdate"] == "user_message_chunk"
            ]
            assert texts == ["stored in PostgreSQL"]


def test_an_unreachable_database_stops_the_start_with_a_clear_message(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    url = f"postgresql://zeroclaw:hunter2-secret@127.0.0.1:{port}/sessions?connect_timeout=2"
    config_dir, _workspace = postgres_config(tmp_path, url)
    for command in ("acp", "gateway"):
        finished = subprocess.run(
            [str(console_script("zeroclaw")), command],
            env=child_env(config_dir),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert finished.returncode == 1, finished.stderr
        assert "not starting without the session store" in finished.stderr
        assert f"127.0.0.1:{port}" in finished.stderr
        assert "hunter2-secret" not in finished.stderr
        assert finished.stdout == ""
