"""What CodeCompanion.nvim, avante.nvim, acpx and Zed show of a real `zeroclaw acp`, and
what they answer: each client's ``initialize`` as it sends it, its rendering and its
answers as modelled from its source (tests/codecompanion_chat.py, tests/avante_chat.py,
tests/acpx_output.py, tests/zed_cards.py). Every line the agent writes is also checked
against the official ACP schema, with no ``null`` for an optional field
(tests/acp_schema.py).

The guarantees: the agent never receives a choice the person did not pick; every card
and every approval names the command or file it is about, and approving does not rename
it; a cancel draws no tool; ``/resume`` lists every session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from tests.acp_schema import AcpSchema, FrameChecker, install_schema
from tests.acpx_output import AcpxOutput
from tests.avante_chat import AvanteChat
from tests.codecompanion_chat import CodeCompanionChat, resume_picker
from tests.e2e.helpers import JsonDict, RpcPipeClient, cancel_once_running, spawn_acp
from tests.helpers import echo_config, write_config
from tests.zed_cards import ToolCards

pytestmark = pytest.mark.e2e

FS: Final = {"readTextFile": True, "writeTextFile": True}
CODECOMPANION_INIT: Final = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": FS},
    "clientInfo": {"name": "CodeCompanion.nvim", "version": "1.0.0"},
}
"""lua/codecompanion/adapters/acp/goose.lua ``parameters`` (every adapter sends these)."""
AVANTE_INIT: Final = {"protocolVersion": 1, "clientCapabilities": {"fs": FS}}
"""lua/avante/libs/acp_client.lua ``initialize``: no clientInfo."""
ACPX_INIT: Final = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": FS, "terminal": True},
    "clientInfo": {"name": "acpx", "version": "0.19.1"},
}
"""acpx dist/queue-owner-runtime-*.js ``resolveClientInfo``, ``resolveClientCapabilities``."""
ZED_INIT: Final = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": FS, "terminal": True, "elicitation": {"form": {}, "url": {}}},
    "clientInfo": {"name": "zed", "version": "0.999.0"},
}
"""crates/agent_servers/src/acp.rs ``initialize`` (Zed offers forms too)."""
TOAD_INIT: Final = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": FS, "terminal": True},
    "clientInfo": {"name": "toad", "title": "Toad", "version": "0.6.20"},
}
"""toad/acp/agent.py ``initialize``; its permission dialog lists each option by name and
answers with that option's id (toad/widgets/conversation.py, ``on_acp_request_permission``)."""
UNKNOWN_INIT: Final = {
    "protocolVersion": 1,
    "clientCapabilities": {},
    "clientInfo": {"name": "some-editor", "version": "1"},
}
QUESTION: Final = {"question": "Which language?", "choices": ["Go", "Python", "Rust"]}
CEILING_SECS: Final = 90


@pytest.fixture(scope="module")
def acp_schema() -> AcpSchema:
    return AcpSchema.load(install_schema())


def tool_line(name: str, arguments: Mapping[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


Answer = Callable[[JsonDict], JsonDict]


class ClientRun:
    """One client's connection: ``initialize`` as that client sends it, the files it
    serves (``fs/*`` from the disk, as these editors do for saved buffers), every line
    the agent writes checked against the schema."""

    def __init__(self, client: RpcPipeClient, schema: AcpSchema) -> None:
        self.client = client
        self.checker = FrameChecker(schema)
        sent = client.send

        async def send(message: Mapping[str, Any]) -> None:
            self.checker.client_sent(message)
            await sent(message)

        client.send = send  # type: ignore[method-assign]

    async def open(self, init: JsonDict, cwd: Path) -> str:
        assert "result" in await self.client.call("initialize", init)
        new = await self.client.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id: str = new["result"]["sessionId"]
        return session_id

    async def turn(self, session_id: str, lines: list[str], answer: Answer) -> JsonDict:
        def serve(request: JsonDict) -> JsonDict:
            method, params = request["method"], request["params"]
            if method == "fs/read_text_file":
                return {"content": Path(params["path"]).read_text()}
            if method == "fs/write_text_file":
                Path(params["path"]).write_text(params["content"])
                return {}
            return answer(request)

        response = await self.client.prompt(session_id, "\n".join(lines), on_request=serve)
        assert "result" in response, response
        return response

    def frames(self) -> list[JsonDict]:
        """Every message the agent wrote so far, each one schema-checked."""
        messages = []
        for line in self.client.raw_lines:
            violations = self.checker.check_line(line)
            assert not violations, f"{line[:300]}\n" + "\n".join(map(str, violations))
            messages.append(json.loads(line))
        return messages


def workspace(tmp_path: Path) -> Path:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir(parents=True)
    (ws / "notes.txt").write_text("one\ntwo\n")
    return ws


def finished(frames: list[JsonDict], session_id: str) -> dict[str, JsonDict]:
    """The last update of every call, by tool name (one call per tool in these turns)."""
    cards = ToolCards(session_id)
    cards.feed(frames)
    return {str(card.fields["name"]): card.fields for card in cards.cards.values()}


async def approved_turn(
    tmp_path: Path, schema: AcpSchema, init: JsonDict, answer: Answer
) -> tuple[Path, str, list[JsonDict]]:
    """One turn of ``APPROVED_TURN`` from a client sending ``init`` and answering with
    ``answer``: the workspace, the session id and every frame the agent wrote."""
    ws = workspace(tmp_path)
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            run = ClientRun(client, schema)
            session_id = await run.open(init, ws)
            await run.turn(session_id, APPROVED_TURN, answer)
            return ws, session_id, run.frames()


def selected(option_id: str | None) -> JsonDict:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


APPROVED_TURN: Final = [
    tool_line("shell", {"command": "ls"}),
    tool_line("file_edit", {"path": "notes.txt", "old_string": "two", "new_string": "2"}),
    tool_line("ask_user", QUESTION),
]


async def test_codecompanion_shows_what_is_approved_and_is_never_asked_a_choice(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    def press_accept(request: JsonDict) -> JsonDict:
        prompt = CodeCompanionChat("", str(tmp_path)).prompt_of(request["params"])
        return selected(prompt.press("Accept"))

    ws, session_id, frames = await approved_turn(
        tmp_path, acp_schema, CODECOMPANION_INIT, press_accept
    )
    shown = CodeCompanionChat(session_id, str(ws))
    shown.feed(frames)
    shell, edit = shown.prompts
    assert shell.text == "Execute: `ls`"  # was "Execute: Approve shell?"
    assert edit.text == "Proposed edits for `notes.txt`:"
    # One key per option: no second "Reject" left unreachable.
    assert edit.labels == ["Accept", "Always accept", "Reject"]
    calls = finished(frames, session_id)
    lines = {name: shown.lines[call["toolCallId"]] for name, call in calls.items()}
    assert lines == {
        "shell": "Execute: ls",
        "file_edit": "Edit: notes.txt",
        "ask_user": "Other: Which language?",  # not "Execute: ask_user"
    }
    assert calls["shell"]["status"] == calls["file_edit"]["status"] == "completed"
    assert (ws / "notes.txt").read_text() == "one\n2\n"
    # Its keys are per kind, never per choice: the question is not put to it at all,
    # and the model is told to ask in its reply.
    assert calls["ask_user"]["status"] == "failed"
    assert "Ask the question in your reply" in calls["ask_user"]["rawOutput"]
    assert "(CodeCompanion.nvim)" in calls["ask_user"]["rawOutput"]


async def test_avante_approves_with_its_buttons_and_is_never_asked_a_choice(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    chat = AvanteChat("", str(tmp_path))
    buttons: list[list[str]] = []

    def click_allow_once(request: JsonDict) -> JsonDict:
        buttons.append(chat.buttons(request))
        return selected(chat.answer(request, "Allow once"))

    ws, session_id, frames = await approved_turn(
        tmp_path, acp_schema, AVANTE_INIT, click_allow_once
    )
    shown = AvanteChat(session_id, str(ws))
    shown.feed(frames)
    calls = finished(frames, session_id)
    # "Allow once" approves (it sent reject-once before: its ids are compared by name).
    assert calls["shell"]["status"] == calls["file_edit"]["status"] == "completed"
    assert buttons == [["Allow once", "Always allow", "Reject"]] * 2
    assert shown.display_name(calls["shell"]["toolCallId"]) == '`ls`("ls")'
    assert shown.display_name(calls["file_edit"]["toolCallId"]) == 'Edit `notes.txt`("notes.txt")'
    # avante answers yes / always / no by kind, and unseen by default: never asked.
    assert calls["ask_user"]["status"] == "failed"
    assert "Ask the question in your reply" in calls["ask_user"]["rawOutput"]


async def test_acpx_asks_with_the_command_and_draws_no_tool_for_a_cancel(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    def yes(request: JsonDict) -> JsonDict:
        return selected(AcpxOutput.answer(request, yes=True))

    _, session_id, frames = await approved_turn(tmp_path, acp_schema, ACPX_INIT, yes)
    cancelled_id, cancelled, cancel_frames = await cancelled_turn(
        tmp_path / "cancel", acp_schema, ACPX_INIT
    )
    shown = AcpxOutput(session_id)
    shown.feed(frames)
    assert shown.questions == [
        "[permission] Allow `ls` [execute]? (y/N)",  # was "Allow Approve shell? [execute]?"
        "[permission] Allow Edit `notes.txt` [edit]? (y/N)",
    ]
    assert shown.lines[:2] == ["[tool] `ls` (pending)", "[tool] `ls` (completed)"]
    calls = finished(frames, session_id)
    assert calls["ask_user"]["status"] == "failed"  # y/N cannot pick one of three
    assert cancelled["result"]["stopReason"] == "cancelled"
    assert cancelled["result"]["content"] == "[turn cancelled via client]"
    after = AcpxOutput(cancelled_id)
    after.feed(cancel_frames)
    # The cut-off call ends failed; no "[tool] turn-cancelled" after it.
    assert after.lines == ["[tool] `sleep 1000` (pending)", "[tool] `sleep 1000` (failed)"]


async def cancelled_turn(
    tmp_path: Path, schema: AcpSchema, init: JsonDict
) -> tuple[str, JsonDict, list[JsonDict]]:
    """A turn whose shell call runs until the client cancels it (a full-autonomy agent,
    so nothing is asked first): the session id, the prompt's response, every frame."""
    ws = workspace(tmp_path)
    risk = {"allowed_commands": ["*"], "block_high_risk_commands": False}
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full", risk=risk))
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            run = ClientRun(client, schema)
            session_id = await run.open(init, ws)
            response = await cancel_once_running(
                client, session_id, tool_line("shell", {"command": "sleep 1000"})
            )
            return session_id, response, run.frames()


async def test_a_cancel_draws_no_tool_in_avante(tmp_path: Path, acp_schema: AcpSchema) -> None:
    session_id, response, frames = await cancelled_turn(tmp_path, acp_schema, AVANTE_INIT)
    shown = AvanteChat(session_id, str(tmp_path))
    shown.feed(frames)
    assert response["result"]["stopReason"] == "cancelled"
    [message] = shown.messages.values()  # the shell call only: no empty "Thoughts" tool
    assert message.acp["status"] == "failed"


def pick_second(request: JsonDict) -> JsonDict:
    """The person picks the second choice, by its name."""
    option_id = request["params"]["options"][1]["optionId"]
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


def answer_by_kind(kind: str) -> Answer:
    """A client that keys options by kind answers with the option of ``kind``."""

    def answer(request: JsonDict) -> JsonDict:
        [option_id] = [o["optionId"] for o in request["params"]["options"] if o["kind"] == kind]
        return {"outcome": {"outcome": "selected", "optionId": option_id}}

    return answer


@pytest.mark.parametrize(
    ("init", "answer", "names"),
    [
        (ZED_INIT, pick_second, ["Go", "Python", "Rust"]),
        (TOAD_INIT, pick_second, ["Go", "Python", "Rust"]),
        # A client not known here gets one option per kind, numbered: whichever way it
        # keys them, the kind it answers with is one choice.
        (UNKNOWN_INIT, answer_by_kind("reject_once"), ["1. Go", "2. Python", "3. Rust"]),
    ],
    ids=["zed", "toad", "unknown-client"],
)
async def test_the_agent_gets_the_choice_the_person_picked(
    tmp_path: Path, acp_schema: AcpSchema, init: JsonDict, answer: Answer, names: list[str]
) -> None:
    ws = workspace(tmp_path)
    config_dir = write_config(tmp_path / "cfg", echo_config())
    many = {"question": "Pick one", "choices": ["a", "b", "c", "d", "e"]}
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            run = ClientRun(client, acp_schema)
            session_id = await run.open(init, ws)
            await run.turn(session_id, [tool_line("ask_user", QUESTION)], answer)
            [asked] = client.server_requests
            await run.turn(session_id, [tool_line("ask_user", many)], answer)
            frames = run.frames()
    cards = ToolCards(session_id)
    cards.feed(frames)
    picked, five = cards.named("ask_user")
    assert [o["name"] for o in asked["params"]["options"]] == names
    kinds = [o["kind"] for o in asked["params"]["options"]]
    if init is UNKNOWN_INIT:
        assert len(set(kinds)) == len(kinds)
    tool_call = asked["params"]["toolCall"]
    assert tool_call["title"] == picked.announced["title"] == "Which language?"
    assert tool_call["kind"] == "other"  # a question is not execution
    [content] = tool_call["content"]
    assert content["content"]["text"] == "Which language?\n\n1. Go\n2. Python\n3. Rust"
    assert (picked.status, picked.fields["rawOutput"]) == ("completed", "The user chose: Python")
    if init is UNKNOWN_INIT:
        assert five.status == "failed"
        assert "at most 4 choices" in five.fields["rawOutput"]
    else:
        assert five.status == "completed"


async def test_resume_lists_every_session_and_titles_are_the_users_words(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    ws = workspace(tmp_path)
    config_dir = write_config(tmp_path / "cfg", echo_config())
    # avante's first prompt: an attached file, its own wrapping, context it adds.
    avante_prompt = [
        {"type": "resource_link", "uri": f"file://{ws}/notes.txt", "name": "notes.txt"},
        {"type": "text", "text": "<previous_user_message>fix the **login** bug</previous_user_message>"},
        {"type": "text", "text": "<system_context>Continuing from previous session</system_context>"},
    ]  # fmt: skip
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            run = ClientRun(client, acp_schema)
            untitled = await run.open(CODECOMPANION_INIT, ws)  # opened, never prompted
            wrapped = (await client.call("session/new", {"cwd": str(ws)}))["result"]["sessionId"]
            await client.call("session/prompt", {"sessionId": wrapped, "prompt": avante_prompt})
            listed = (await client.call("session/list", {}))["result"]["sessions"]
            run.frames()
    assert [session["sessionId"] for session in listed] == [wrapped, untitled]
    assert "title" not in listed[1]
    # The picker lists both (a null title made it fail on every use).
    assert resume_picker(listed) == ["fix the login bug", untitled]
