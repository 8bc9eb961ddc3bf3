"""Tool cards as an editor shows them, through a real `zeroclaw acp`.

Zed keeps one card per ``toolCallId`` and upserts every ``tool_call`` /
``tool_call_update`` (and a permission request's ``toolCall``) into it; a card is
closed only by ``completed`` or ``failed``. These tests keep that model and check what
it shows at the end of each turn, cancelled turns included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import (
    JsonDict,
    RpcPipeClient,
    cancel_once_running,
    open_session,
    spawn_acp,
)
from tests.helpers import echo_config, write_config
from tests.zed_cards import Card, ToolCards

pytestmark = pytest.mark.e2e


def _tool_line(name: str, arguments: dict[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


def cards_of(client: RpcPipeClient, session_id: str) -> dict[str, Card]:
    """Zed's card model (``tests/zed_cards.py``) over every frame the client received."""
    cards = ToolCards(session_id)
    cards.feed(json.loads(line) for line in client.raw_lines)
    return cards.cards


def assert_all_closed(cards: dict[str, Card]) -> None:
    for call_id, card in cards.items():
        assert card.statuses[-1] in ("completed", "failed"), (call_id, card.statuses)


def answer_by_tool(rejected: set[str]) -> Any:
    """Reject the approval of the tools named in ``rejected``, allow the others."""

    def answer(request: JsonDict) -> JsonDict:
        no = request["params"]["toolCall"]["rawInput"]["tool"] in rejected
        return {
            "outcome": {"outcome": "selected", "optionId": "reject-once" if no else "allow-once"}
        }

    return answer


async def test_every_card_ends_completed_or_failed(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".secrets").mkdir(parents=True)
    (workspace / ".secrets" / "key").write_text("secret")
    (workspace / "notes.txt").write_text("one\ntwo\n")
    risk = {"forbidden_paths": [".secrets"]}
    config_dir = write_config(tmp_path / "cfg", echo_config(risk=risk))
    prompt = "\n".join(
        [
            _tool_line("file_read", {"path": "notes.txt"}),
            _tool_line("file_write", {"path": "new.txt", "content": "x"}),
            _tool_line("file_read", {"path": ".secrets/key"}),
            _tool_line("file_read", {}),
            _tool_line("file_read", {"path": "missing.txt"}),
        ]
    )
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(
                session_id, prompt, on_request=answer_by_tool({"file_write"})
            )
    assert response["result"]["stopReason"] == "end_turn"
    cards = cards_of(client, session_id)
    assert_all_closed(cards)
    read_ok, denied, refused, invalid, missing = (
        card for card in cards.values() if card.fields.get("name") in ("file_read", "file_write")
    )
    assert read_ok.statuses == ["pending", "in_progress", "completed"]
    assert denied.statuses[-1] == "failed"
    assert "in_progress" not in denied.statuses
    assert denied.fields["rawOutput"] == "Denied by user."
    assert refused.statuses[-1] == "failed"
    assert "forbidden" in refused.fields["rawOutput"]
    assert invalid.statuses[-1] == "failed"
    assert missing.statuses[-1] == "failed"
    assert not (workspace / "new.txt").exists()


async def _cancel_a_running_shell(client: RpcPipeClient, session_id: str) -> JsonDict:
    """Start a shell call that never ends, cancel the turn once it runs; the response."""
    prompt = _tool_line("shell", {"command": "sleep 1000"})
    return await cancel_once_running(client, session_id, prompt)


async def test_calls_cut_off_by_cancel_end_failed_and_no_marker_card_is_drawn(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    risk = {"allowed_commands": ["*"], "block_high_risk_commands": False}
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full", risk=risk))
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            first = await _cancel_a_running_shell(client, session_id)
            second = await _cancel_a_running_shell(client, session_id)
    assert first["result"]["stopReason"] == second["result"]["stopReason"] == "cancelled"
    cards = cards_of(client, session_id)
    assert_all_closed(cards)
    shells = [card for card in cards.values() if card.fields.get("name") == "shell"]
    assert [card.statuses for card in shells] == [["pending", "in_progress", "failed"]] * 2
    assert all("cancelled" in card.fields["rawOutput"].lower() for card in shells)
    # The cancel is in stopReason and the result's content; no phantom tool card.
    assert list(cards.values()) == shells
    assert all(
        r["result"]["content"].endswith("[turn cancelled via client]") for r in (first, second)
    )


async def test_edit_cards_keep_their_diff_when_they_complete(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("one\ntwo\n")
    config_dir = write_config(tmp_path / "cfg", echo_config())
    prompt = "\n".join(
        [
            _tool_line("file_edit", {"path": "notes.txt", "old_string": "two", "new_string": "2"}),
            _tool_line("file_write", {"path": "new.txt", "content": "fresh\n"}),
        ]
    )
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            response = await client.prompt(
                session_id, prompt, on_request=answer_by_tool(rejected=set())
            )
    assert response["result"]["stopReason"] == "end_turn"
    cards = cards_of(client, session_id)
    assert_all_closed(cards)
    edit, write = cards.values()
    assert edit.statuses[-1] == write.statuses[-1] == "completed"
    [edit_diff] = [block for block in edit.fields["content"] if block["type"] == "diff"]
    # A small file's whole text before and after, so the editor can place the change.
    assert (edit_diff["oldText"], edit_diff["newText"]) == ("one\ntwo\n", "one\n2\n")
    [write_diff] = [block for block in write.fields["content"] if block["type"] == "diff"]
    assert write_diff["newText"] == "fresh\n"
    assert (workspace / "notes.txt").read_text() == "one\n2\n"
