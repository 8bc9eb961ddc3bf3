"""What an editor shows of our tool calls, through a real `zeroclaw acp`.

Each test keeps Zed's card model (``tests/zed_cards.py``: one card per ``toolCallId``)
and, at the end of every turn, asserts that every card is ``completed`` or ``failed``,
every completed edit still shows its diff and every path is absolute. Every line the
agent writes is validated against the official ACP v1 schema (``tests/acp_schema.py``),
allowing only the extra fields the ZeroClaw ACP docs name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.acp_schema import AcpSchema, FrameChecker, install_schema
from tests.e2e.helpers import (
    ZED_CLIENT_INFO,
    JsonDict,
    RpcPipeClient,
    cancel_once_running,
    open_session,
    spawn_acp,
)
from tests.helpers import echo_config, write_config
from tests.zed_cards import ToolCards, assert_turn_rendered

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def acp_schema() -> AcpSchema:
    return AcpSchema.load(install_schema())


def tool_line(name: str, arguments: Mapping[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


Answer = Callable[[JsonDict], JsonDict]


def answer_by_tool(choices: Mapping[str, str]) -> Answer:
    """Answer each approval with the option ``choices`` names for its tool."""

    def answer(request: JsonDict) -> JsonDict:
        tool = request["params"]["toolCall"]["rawInput"]["tool"]
        return {"outcome": {"outcome": "selected", "optionId": choices[tool]}}

    return answer


class Editor:
    """One editor connection: every line the agent writes is schema-checked and fed to
    the session's card model when ``settle`` is called."""

    def __init__(self, client: RpcPipeClient, schema: AcpSchema) -> None:
        self.client = client
        self.checker = FrameChecker(schema)
        self.cards: dict[str, ToolCards] = {}
        self.permission_requests: list[JsonDict] = []
        self._read = 0
        sent = client.send

        async def send(message: Mapping[str, Any]) -> None:
            self.checker.client_sent(message)
            await sent(message)

        client.send = send  # type: ignore[method-assign]

    async def open(self, cwd: Path) -> str:
        session_id = await open_session(self.client, cwd, client_info=ZED_CLIENT_INFO)
        self.cards[session_id] = ToolCards(session_id)
        self.settle()
        return session_id

    async def load(self, session_id: str, cwd: Path) -> None:
        """initialize + ``session/load``: the replay builds the session's cards anew."""
        init = await self.client.call(
            "initialize", {"protocolVersion": 1, "clientInfo": ZED_CLIENT_INFO}
        )
        assert "result" in init, init
        self.cards[session_id] = ToolCards(session_id)
        params = {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
        loaded = await self.client.call("session/load", params)
        assert "result" in loaded, loaded
        self.settle()

    def settle(self) -> list[JsonDict]:
        """Check and apply what arrived since the last call; the new messages."""
        lines = self.client.raw_lines[self._read :]
        self._read = len(self.client.raw_lines)
        messages: list[JsonDict] = []
        for line in lines:
            violations = self.checker.check_line(line)
            assert not violations, f"{line[:300]}\n" + "\n".join(map(str, violations))
            message = json.loads(line)
            messages.append(message)
            if message.get("method") == "session/request_permission":
                self.permission_requests.append(message)
            for cards in self.cards.values():
                cards.feed_one(message)
        for cards in self.cards.values():
            assert_turn_rendered(cards)
        return messages

    async def turn(self, session_id: str, lines: list[str], answer: Answer | None = None) -> str:
        """One prompt turn of ``lines``; its stop reason, once the cards are checked."""
        before = len(self.permission_requests)
        response = await self.client.prompt(session_id, "\n".join(lines), on_request=answer)
        self.settle()
        self.asked = self.permission_requests[before:]
        assert "result" in response, response
        stop_reason: str = response["result"]["stopReason"]
        return stop_reason


def workspace_with_files(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / ".secrets").mkdir(parents=True)
    (workspace / ".secrets" / "key").write_text("secret\n")
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    (workspace / "old.txt").write_text("before\n")
    (workspace / "report.md").write_text("# Report\n")
    return workspace.resolve()


async def test_cards_close_keep_their_diffs_and_point_at_absolute_paths(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    workspace = workspace_with_files(tmp_path)
    risk = {"forbidden_paths": [".secrets"]}
    config_dir = write_config(tmp_path / "cfg", echo_config(risk=risk))
    notes = str(workspace / "notes.txt")
    with trio.fail_after(90):
        async with spawn_acp(config_dir) as client:
            editor = Editor(client, acp_schema)
            session_id = await editor.open(workspace)
            cards = editor.cards[session_id]
            allowed = await editor.turn(
                session_id,
                [
                    tool_line("file_read", {"path": "notes.txt", "offset": 2}),
                    tool_line("file_edit", {"path": "notes.txt", "old_string": "two", "new_string": "TWO"}),
                    tool_line("file_write", {"path": "new.txt", "content": "fresh\n"}),
                    tool_line("file_write", {"path": "old.txt", "content": "after\n"}),
                    tool_line("content_search", {"pattern": "TWO"}),
                    tool_line("glob_search", {"pattern": "*.md"}),
                    tool_line("deliver_file", {"path": "report.md", "title": "The report"}),
                ],
                answer_by_tool(
                    {"file_edit": "allow-once", "file_write": "allow-once", "deliver_file": "allow-once"}
                ),
            )  # fmt: skip
            edit_asked = editor.asked
            denied = await editor.turn(
                session_id,
                [tool_line("file_edit", {"path": "notes.txt", "old_string": "one", "new_string": "1"})],
                answer_by_tool({"file_edit": "reject-once"}),
            )  # fmt: skip
            refused = await editor.turn(
                session_id,
                [
                    tool_line("file_read", {"path": ".secrets/key"}),
                    tool_line("file_read", {}),
                    tool_line("file_read", {"path": "missing.txt"}),
                    tool_line("file_edit", {"path": "notes.txt", "old_string": "nope", "new_string": "x"}),
                    tool_line("file_edit", {"path": "notes.txt", "old_string": "e", "new_string": "x"}),
                ],
            )  # fmt: skip
            refusals_asked = editor.asked
        async with spawn_acp(config_dir) as restarted:
            reloaded = Editor(restarted, acp_schema)
            await reloaded.load(session_id, workspace)
    assert allowed == denied == refused == "end_turn"
    # session/load shows every card as it was when its turn ended (the files changed since),
    # under the same title.
    replayed = reloaded.cards[session_id]
    assert list(replayed.cards) == list(cards.cards)
    for call_id, card in cards.cards.items():
        again = replayed.cards[call_id]
        assert (again.status, again.diffs, again.locations, again.fields["title"]) == (
            card.status,
            card.diffs,
            card.locations,
            card.fields["title"],
        ), call_id
        assert again.announced["title"] == card.announced["title"], call_id
    assert [card.announced["title"] for card in cards.named("file_edit")] == [
        "Edit `notes.txt`"
    ] * 4

    [read] = cards.named("file_read")[:1]
    assert read.statuses == ["pending", "in_progress", "completed"]
    assert read.locations == [{"path": notes, "line": 2}]

    edit, denied_edit, not_found, ambiguous = cards.named("file_edit")
    # One card per call: the approval moved the call's own card.
    asked_ids = [request["params"]["toolCall"]["toolCallId"] for request in edit_asked]
    assert asked_ids == [
        edit.tool_call_id,
        *(card.tool_call_id for card in cards.named("file_write")),
        *(card.tool_call_id for card in cards.named("deliver_file")),
    ]
    assert not any(card.from_permission for card in cards.cards.values())
    assert edit.statuses == ["pending", "in_progress", "completed"]
    assert edit.diffs == [
        {"type": "diff", "path": notes, "oldText": "one\ntwo\nthree\n", "newText": "one\nTWO\nthree\n"}
    ]  # fmt: skip
    assert edit.locations == [{"path": notes, "line": 2}]
    assert edit.announced["rawInput"] == {
        "path": "notes.txt",
        "old_string": "two",
        "new_string": "TWO",
    }
    [edit_request] = [
        r for r in edit_asked if r["params"]["toolCall"]["rawInput"]["tool"] == "file_edit"
    ]
    assert edit_request["params"]["toolCall"]["rawInput"] == {
        "tool": "file_edit",
        "summary": "path: notes.txt, old_string: two, new_string: TWO",
    }  # fmt: skip

    new_file, overwrite = cards.named("file_write")
    assert new_file.diffs == [
        {"type": "diff", "path": str(workspace / "new.txt"), "oldText": None, "newText": "fresh\n"}
    ]
    assert overwrite.diffs == [
        {"type": "diff", "path": str(workspace / "old.txt"), "oldText": "before\n", "newText": "after\n"}
    ]  # fmt: skip

    [search] = cards.named("content_search")
    assert search.locations == [{"path": notes, "line": 2}]
    [glob] = cards.named("glob_search")
    assert glob.locations == [{"path": str(workspace / "report.md")}]

    [delivery] = cards.named("deliver_file")
    summary = "Delivered report.md (9 bytes)"
    assert delivery.fields["rawOutput"] == delivery.fields["body"] == summary
    assert delivery.fields["title"] == "The report"
    assert delivery.texts == [summary]  # shown by clients that do not render blobs
    [blob] = [b for b in delivery.fields["content"] if b["type"] == "content" and b["content"]["type"] == "resource"]  # fmt: skip
    assert blob["content"]["resource"]["uri"].startswith("attachment://deliver/")
    assert delivery.locations == [{"path": str(workspace / "report.md")}]

    assert denied_edit.statuses == ["pending", "failed"]
    assert denied_edit.fields["rawOutput"] == "Denied by user."
    assert (workspace / "notes.txt").read_text() == "one\nTWO\nthree\n"

    # Refused by policy, invalid arguments, a tool error, and edits that cannot apply: all
    # failed, and none of them asked the user first (an edit that cannot apply is refused
    # before approval, as a forbidden path is).
    assert refusals_asked == []
    forbidden, invalid, missing = cards.named("file_read")[1:]
    for card in (forbidden, invalid, missing, not_found, ambiguous):
        assert card.status == "failed", card
    for card in (forbidden, not_found, ambiguous):
        assert "in_progress" not in card.statuses  # refused before it ran
    assert "forbidden" in forbidden.fields["rawOutput"]
    assert forbidden.locations == []  # a refused path is never resolved for the card
    assert "old_string not found" in not_found.fields["rawOutput"]
    assert "matches" in ambiguous.fields["rawOutput"]
    assert not_found.diffs == []
    assert ambiguous.diffs == []


async def _cancel_a_running_shell(editor: Editor, session_id: str) -> str:
    """Start a shell call that never ends, cancel the turn once it runs; the stop reason."""
    prompt = tool_line("shell", {"command": "sleep 1000"})
    response = await cancel_once_running(editor.client, session_id, prompt)
    editor.settle()
    stop_reason: str = response["result"]["stopReason"]
    return stop_reason


async def test_cancelled_turns_close_every_card_and_errors_carry_details(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    risk = {"allowed_commands": ["*"], "block_high_risk_commands": False}
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full", risk=risk))
    with trio.fail_after(90):
        async with spawn_acp(config_dir) as client:
            editor = Editor(client, acp_schema)
            session_id = await editor.open(workspace)
            first = await _cancel_a_running_shell(editor, session_id)
            second = await _cancel_a_running_shell(editor, session_id)
            unknown = await client.call(
                "session/prompt", {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "hi"}]}
            )  # fmt: skip
            editor.settle()
    assert first == second == "cancelled"
    shells = editor.cards[session_id].named("shell")
    assert [card.statuses for card in shells] == [["pending", "in_progress", "failed"]] * 2
    error = unknown["error"]
    assert error["data"]["details"] == error["message"] == "Session not found: no-such-session"


def _notification(update: JsonDict) -> str:
    params = {"sessionId": "s", "update": update}
    return json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": params})


def test_the_checker_flags_fields_outside_the_schema(acp_schema: AcpSchema) -> None:
    checker = FrameChecker(acp_schema)
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "completed"}
    assert checker.check_line(_notification({**update, "body": "done"})) == []
    [extra] = checker.check_line(_notification({**update, "proposedEdit": "x"}))
    assert extra.where.endswith(".update.proposedEdit")
    plan = {"content": "a", "status": "pending", "priority": "low"}
    assert checker.check_line(_notification({"sessionUpdate": "plan", "entries": [plan]})) == []
    [active] = checker.check_line(
        _notification({"sessionUpdate": "plan", "entries": [{**plan, "activeForm": "A-ing"}]})
    )
    assert active.where.endswith(".entries[0].activeForm")
    [missing] = checker.check_line(
        _notification({**update, "content": [{"type": "diff", "path": "/a"}]})
    )
    assert "['content'][0]" in missing.where
    # An optional field is omitted, never null; a new file's oldText is null on purpose.
    [null] = checker.check_line(_notification({**update, "title": None}))
    assert null.where.endswith(".update.title")
    new_file = {"type": "diff", "path": "/a", "oldText": None, "newText": "x"}
    assert checker.check_line(_notification({**update, "content": [new_file]})) == []
    checker.client_sent({"jsonrpc": "2.0", "id": 3, "method": "session/prompt"})
    result = {"stopReason": "end_turn", "sessionId": "s", "content": "hi"}
    answer = {"jsonrpc": "2.0", "id": 3, "result": result}
    assert checker.check_line(json.dumps(answer)) == []
    [stray] = checker.check_line(json.dumps({**answer, "result": {**result, "stray": {}}}))
    assert stray.where == "session/prompt.result.stray"


def test_the_card_model_reports_what_an_editor_would_show_wrong() -> None:
    cards = ToolCards("s")

    def update(body: JsonDict) -> JsonDict:
        return {"method": "session/update", "params": {"sessionId": "s", "update": body}}

    diff = {"type": "diff", "path": "a.txt", "oldText": None, "newText": "x"}
    cards.feed(
        [
            update({"sessionUpdate": "tool_call", "toolCallId": "e", "title": "file_write",
                    "kind": "edit", "status": "pending", "content": [diff]}),
            update({"sessionUpdate": "tool_call_update", "toolCallId": "e",
                    "status": "completed", "content": []}),
            update({"sessionUpdate": "tool_call", "toolCallId": "r", "title": "file_read",
                    "status": "pending", "locations": [{"path": "/ws/a.txt"}]}),
            {"method": "session/request_permission",
             "params": {"sessionId": "s", "toolCall": {"toolCallId": "approval-1", "title": "?"}}},
        ]
    )  # fmt: skip
    assert cards.problems_at_turn_end() == [
        "e: diff.path 'a.txt'",
        "e: a completed edit that lost its diff",
        "r: left 'pending' (['pending'])",
        "approval-1: left None ([])",
    ]
    assert cards.cards["approval-1"].from_permission


async def test_questions_and_plans_stay_on_their_cards(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    config_dir = write_config(tmp_path / "cfg", echo_config())
    todos = [{"content": "Fix it", "status": "in_progress", "activeForm": "Fixing it"}]
    question = {"question": "Which colour?", "choices": ["red", "blue"]}

    def pick_blue(request: JsonDict) -> JsonDict:
        return {"outcome": {"outcome": "selected", "optionId": "choice-1"}}

    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            editor = Editor(client, acp_schema)
            session_id = await editor.open(workspace)
            stop_reason = await editor.turn(
                session_id,
                [tool_line("ask_user", question), tool_line("todo_write", {"todos": todos})],
                pick_blue,
            )
            asked = editor.asked
            plans = [u for u in client.updates(session_id) if u["sessionUpdate"] == "plan"]
    assert stop_reason == "end_turn"
    cards = editor.cards[session_id]
    [ask] = cards.named("ask_user")
    # The question went out on the call's own card, which its update then closed.
    assert [request["params"]["toolCall"]["toolCallId"] for request in asked] == [ask.tool_call_id]
    assert ask.status == "completed"
    assert not any(card.from_permission for card in cards.cards.values())
    [plan] = plans
    assert plan["entries"] == [
        {
            "content": "Fix it",
            "status": "in_progress",
            "priority": "medium",
            "_meta": {"zeroclaw": {"activeForm": "Fixing it"}},
        }
    ]
