"""`zeroclaw storage migrate` and `zeroclaw storage import-sqlite PATH`."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
from click.testing import CliRunner, Result

from acp_server.cli.main import cli
from acp_server.model import ChatMessage, CompletedTurn, PlanStep, ToolCall, Usage
from acp_server.storage.postgres import PG_SCHEMA_VERSION, PostgresSessionStore
from acp_server.storage.sqlite import SessionStore


def run(config_dir: Path, *args: str, url: str | None = None) -> Result:
    env = {"ZEROCLAW_STORAGE_URL": url or ""}
    return CliRunner().invoke(
        cli, ["--config-dir", str(config_dir), "storage", *args], env=env, catch_exceptions=False
    )


def sqlite_store_with_two_sessions(path: Path) -> None:
    store = SessionStore.open(path)
    store.create_session("one", "default", "/proj/one")
    store.create_session("two", "coder", "/proj/two")
    for n in range(2):
        store.append_turn(
            "two",
            CompletedTurn(
                messages=(
                    ChatMessage(role="user", content=f"read the binary {n}"),
                    ChatMessage(
                        role="assistant",
                        content="",
                        reasoning="use the shell",
                        tool_calls=(
                            ToolCall(id=f"c{n}", name="shell", arguments={"command": "cat b"}),
                        ),
                    ),
                    ChatMessage(role="tool", content="\x7fELF\x00\x01\x00", tool_call_id=f"c{n}"),
                    ChatMessage(role="assistant", content="A binary file ✓"),
                ),
                plan=(PlanStep(content=f"step {n}", status="completed"),),
                usage=Usage(input_tokens=3, output_tokens=4),
            ),
        )
    store.set_title("two", "binary\x00files")
    store.close()


def test_import_copies_every_session_once(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "acp-sessions.db"
    sqlite_store_with_two_sessions(source)

    first = run(tmp_path / "cfg", "import-sqlite", str(source), url=postgres_url)
    assert first.exit_code == 0, first.output
    assert "2 sessions copied (8 messages), 0 already there" in first.output
    again = run(tmp_path / "cfg", "import-sqlite", str(source), url=postgres_url)
    assert again.exit_code == 0, again.output
    assert "0 sessions copied (0 messages), 2 already there" in again.output

    sqlite, pg = SessionStore.open(source), PostgresSessionStore.open(postgres_url)
    try:
        for session_id in ("one", "two"):
            assert pg.load_session(session_id) == sqlite.load_session(session_id)
        with psycopg.connect(postgres_url) as conn:
            counts = [
                conn.execute(f"SELECT count(*) FROM {table}").fetchone()
                for table in ("acp_sessions", "acp_messages", "acp_tool_calls")
            ]
        assert counts == [(2,), (8,), (4,)]
        # The copied session goes on where it was: its next turn is its third.
        pg.append_turn("two", CompletedTurn(messages=(ChatMessage(role="user", content="go"),)))
        loaded = pg.load_session("two", max_messages=1)
        assert loaded is not None
        assert (loaded.info.turn_count, loaded.dropped_messages) == (3, 8)
    finally:
        sqlite.close()
        pg.close()


def test_import_needs_a_postgres_store(tmp_path: Path) -> None:
    source = tmp_path / "acp-sessions.db"
    SessionStore.open(source).close()
    result = run(tmp_path / "cfg", "import-sqlite", str(source))
    assert result.exit_code == 2
    assert "[storage] url" in result.output


def test_import_of_a_missing_file_is_refused(tmp_path: Path) -> None:
    result = run(tmp_path / "cfg", "import-sqlite", str(tmp_path / "nope.db"))
    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert not (tmp_path / "nope.db").exists()


def test_migrate_on_postgres_then_up_to_date(tmp_path: Path, postgres_url: str) -> None:
    first = run(tmp_path / "cfg", "migrate", url=postgres_url)
    assert first.exit_code == 0, first.output
    assert f"migrated from schema 0 to {PG_SCHEMA_VERSION}" in first.output
    second = run(tmp_path / "cfg", "migrate", url=postgres_url)
    assert f"schema {PG_SCHEMA_VERSION}, up to date" in second.output


def test_migrate_without_a_url_migrates_the_sqlite_file(tmp_path: Path) -> None:
    result = run(tmp_path / "cfg", "migrate")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cfg" / "data" / "sessions" / "acp-sessions.db").is_file()
    assert "acp-sessions.db: schema" in result.output


def test_sessions_commands_read_the_postgres_store(tmp_path: Path, postgres_url: str) -> None:
    store = PostgresSessionStore.open(postgres_url)
    store.create_session("pg-1", "default", "/proj")
    store.append_turn("pg-1", CompletedTurn(messages=(ChatMessage(role="user", content="hi"),)))
    store.close()
    env = {"ZEROCLAW_STORAGE_URL": postgres_url}
    runner = CliRunner()
    base = ["--config-dir", str(tmp_path / "cfg"), "sessions"]
    listed = runner.invoke(cli, [*base, "list", "--json"], env=env, catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    assert [entry["sessionId"] for entry in json.loads(listed.output)] == ["pg-1"]
    shown = runner.invoke(cli, [*base, "show", "pg-1"], env=env, catch_exceptions=False)
    assert "[user] hi" in shown.output
    deleted = runner.invoke(cli, [*base, "delete", "pg-1"], env=env, catch_exceptions=False)
    assert deleted.exit_code == 0, deleted.output
    missing = runner.invoke(cli, [*base, "show", "pg-1"], env=env, catch_exceptions=False)
    assert missing.exit_code == 1
    assert not (tmp_path / "cfg" / "data").exists()  # no SQLite file was made
