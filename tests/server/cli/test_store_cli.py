"""`zeroclaw sessions list|show|delete`: the administrator's view of the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from acp_server.cli.sessions import sessions_command
from acp_server.model import ChatMessage, CompletedTurn, PlanStep, ToolCall
from acp_server.storage.sqlite import SessionStore
from tests.helpers import write_config


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    """A config dir without config.toml: the store is <config_dir>/data/sessions/…"""
    return tmp_path / "zc"


def store_path(config_dir: Path) -> Path:
    return config_dir / "data" / "sessions" / "acp-sessions.db"


@pytest.fixture
def populated(config_dir: Path) -> Path:
    store = SessionStore.open(store_path(config_dir))
    store.create_session("11111111-aaaa", "default", "/proj/one")
    store.create_session("22222222-bbbb", "coder", "/proj/two")
    store.append_turn(
        "22222222-bbbb",
        CompletedTurn(
            messages=(
                ChatMessage(role="user", content="list files"),
                ChatMessage(
                    role="assistant",
                    content="",
                    reasoning="use the shell",
                    tool_calls=(ToolCall(id="c1", name="shell", arguments={"command": "ls"}),),
                ),
                ChatMessage(role="tool", content="a.txt", tool_call_id="c1", tool_name="shell"),
                ChatMessage(role="assistant", content="One file: a.txt"),
            ),
            plan=(PlanStep(content="look around", status="completed"),),
        ),
    )
    store.close()
    return config_dir


def run(*args: str) -> Result:
    return CliRunner().invoke(sessions_command, list(args), catch_exceptions=False)


def test_list_table(populated: Path) -> None:
    result = run("list", "--config-dir", str(populated))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "AGENT",
        "WORKSPACE",
        "CREATED",
        "LAST",
        "ACTIVITY",
        "MESSAGES",
        "OWNER",
        "TITLE",
    ]
    assert lines[1].split()[:3] == ["22222222-bbbb", "coder", "/proj/two"]
    assert lines[1].split()[-2:] == ["4", "(operator)"]  # stored by the local operator
    assert lines[2].split()[:3] == ["11111111-aaaa", "default", "/proj/one"]
    assert lines[2].split()[-2:] == ["0", "(operator)"]


def test_list_json(populated: Path) -> None:
    result = run("list", "--config-dir", str(populated), "--json")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert [(s["sessionId"], s["agent"], s["messageCount"]) for s in listed] == [
        ("22222222-bbbb", "coder", 4),
        ("11111111-aaaa", "default", 0),
    ]
    assert {"workspaceDir", "createdAt", "lastActivity"} <= set(listed[0])


def test_list_without_a_store_creates_nothing(config_dir: Path) -> None:
    result = run("list", "--config-dir", str(config_dir))
    assert result.exit_code == 0
    assert "No stored sessions" in result.stdout
    assert json.loads(run("list", "--config-dir", str(config_dir), "--json").stdout) == []
    assert not store_path(config_dir).exists()


def test_show(populated: Path) -> None:
    result = run("show", "22222222-bbbb", "--config-dir", str(populated))
    assert result.exit_code == 0
    out = result.stdout
    assert "coder" in out
    assert "/proj/two" in out
    assert "[user] list files" in out
    assert "[assistant thinking] use the shell" in out
    assert '[assistant calls shell c1] {"command": "ls"}' in out
    assert "[shell result c1] a.txt" in out
    assert "[assistant] One file: a.txt" in out
    assert "[completed] look around" in out


def test_show_json(populated: Path) -> None:
    result = run("show", "22222222-bbbb", "--config-dir", str(populated), "--json")
    document = json.loads(result.stdout)
    assert document["sessionId"] == "22222222-bbbb"
    assert document["messages"][1]["toolCalls"] == [
        {"id": "c1", "name": "shell", "arguments": {"command": "ls"}}
    ]
    assert document["messages"][2] == {
        "role": "tool",
        "content": "a.txt",
        "toolCallId": "c1",
        "toolName": "shell",
    }
    assert document["droppedMessages"] == 0
    assert document["plan"] == [
        {"content": "look around", "status": "completed", "priority": "medium"}
    ]


def test_show_unknown(populated: Path) -> None:
    result = run("show", "nope", "--config-dir", str(populated))
    assert result.exit_code == 1
    assert "No stored session nope" in result.stderr


def test_delete(populated: Path) -> None:
    result = run("delete", "22222222-bbbb", "--config-dir", str(populated))
    assert result.exit_code == 0
    assert "Deleted session 22222222-bbbb" in result.stdout
    listed = json.loads(run("list", "--config-dir", str(populated), "--json").stdout)
    assert [s["sessionId"] for s in listed] == ["11111111-aaaa"]
    again = run("delete", "22222222-bbbb", "--config-dir", str(populated), "--json")
    assert again.exit_code == 1
    assert json.loads(again.stdout) == {"sessionId": "22222222-bbbb", "deleted": False}


def test_corrupt_store_is_an_error_not_a_crash(config_dir: Path) -> None:
    path = store_path(config_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage" * 100)
    result = run("list", "--config-dir", str(config_dir))
    assert result.exit_code == 1
    assert str(path) in result.stderr
    assert path.read_bytes() == b"garbage" * 100


def test_bad_config_exits_2(config_dir: Path) -> None:
    config_dir.mkdir()
    write_config(config_dir, "this is = = not toml")
    result = run("list", "--config-dir", str(config_dir))
    assert result.exit_code == 2
    assert "config.toml" in result.stderr


def test_show_and_list_strip_terminal_control_sequences(config_dir: Path) -> None:
    store = SessionStore.open(store_path(config_dir))
    store.create_session("33333333-cccc", "x\x1b]0;agent\x07", "/proj/\x1b[2Jthree")
    store.append_turn(
        "33333333-cccc",
        CompletedTurn(
            messages=(
                ChatMessage(role="user", content="hi\x1b]52;c;aGk=\x07"),
                ChatMessage(role="assistant", content="fine\rFAKE", reasoning="\x9b2Jhm"),
            ),
            plan=(PlanStep(content="\x1bPdcs\x1b\\step", status="pending"),),
        ),
    )
    store.close()
    shown = run("show", "33333333-cccc", "--config-dir", str(config_dir))
    listed = run("list", "--config-dir", str(config_dir))
    for result in (shown, listed):
        assert result.exit_code == 0
        for control in ("\x1b", "\x07", "\r", "\x9b"):
            assert control not in result.output
    assert "[user] hi" in shown.output
    assert "[assistant] fineFAKE" in shown.output
    assert "step" in shown.output
    assert "/proj/three" in listed.output
