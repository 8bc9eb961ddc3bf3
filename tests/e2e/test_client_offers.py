"""What the agent does with what an editor offers, through a real `zeroclaw acp`: extra
roots (``additionalDirectories``), elicitation and the client's files.

The client here advertises the capabilities a test names and answers the agent's outbound
calls (``elicitation/create``, ``fs/*``) as Zed does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.helpers import JsonDict, allow_once, spawn_acp
from tests.e2e.offers_helpers import (
    CEILING_SECS,
    gateway_with_a_file,
    initialize,
    offered_session,
    output_text,
    run_tools,
    tool_line,
)
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e


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


# --------------------------------------------------------------------------- elicitation

ELICITING: JsonDict = {"elicitation": {"form": {}}}


def elicitation_answers(*answers: JsonDict) -> Any:
    """Answer each ``elicitation/create`` with the next of ``answers``; a permission request
    with the first option offered."""
    queue = list(answers)

    def answer(request: JsonDict) -> JsonDict:
        if request["method"] == "elicitation/create":
            return queue.pop(0)
        first = request["params"]["options"][0]["optionId"]
        return {"outcome": {"outcome": "selected", "optionId": first}}

    return answer


async def test_ask_user_asks_through_an_elicitation_form(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    lines = [
        tool_line("ask_user", {"question": "Name the branch?"}),
        tool_line(
            "ask_user", {"question": "Which?", "choices": ["a", "b", "c"], "multi_select": True}
        ),
        tool_line("ask_user", {"question": "Declined?"}),
        tool_line("ask_user", {"question": "Dismissed?"}),
        tool_line("ask_user", {"question": "Colour?", "choices": ["red", "blue"]}),
    ]
    answers = elicitation_answers(
        {"action": "accept", "content": {"answer": "feature/x"}},
        {"action": "accept", "content": {"answer": ["a", "c"]}},
        {"action": "decline"},
        {"action": "cancel"},
    )
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await initialize(client, ELICITING, client_info={"name": "zed", "version": "1"})
            new = await client.result("session/new", {"cwd": str(session_dir(tmp_path))})
            session_id = new["sessionId"]
            free, multi, declined, dismissed, single = await run_tools(
                client, session_id, *lines, on_request=answers
            )
    forms = [r for r in client.server_requests if r["method"] == "elicitation/create"]
    assert len(forms) == 4
    first = forms[0]["params"]
    assert first["sessionId"] == session_id
    assert first["mode"] == "form"
    assert first["message"] == "Name the branch?"
    assert first["toolCallId"] == free["toolCallId"]
    assert first["requestedSchema"]["properties"]["answer"]["type"] == "string"
    assert first["requestedSchema"]["required"] == ["answer"]
    items = forms[1]["params"]["requestedSchema"]["properties"]["answer"]
    assert items["type"] == "array"
    assert items["items"] == {"type": "string", "enum": ["a", "b", "c"]}
    assert (free["status"], output_text(free)) == ("completed", "The user answered: feature/x")
    assert (multi["status"], output_text(multi)) == ("completed", "The user chose: a, c")
    assert declined["status"] == "failed"
    assert output_text(declined) == "The user declined to answer the question."
    assert dismissed["status"] == "failed"
    assert "dismissed" in output_text(dismissed)
    # A single pick still goes through a permission card in a client that shows options
    # by name (the ZeroClaw ACP docs' mapping; one card per call in Zed).
    permissions = [r for r in client.server_requests if r["method"] == "session/request_permission"]
    assert [p["params"]["toolCall"]["title"] for p in permissions] == ["Colour?"]
    assert (single["status"], output_text(single)) == ("completed", "The user chose: red")


async def test_a_client_keying_options_by_kind_is_asked_a_single_pick_in_a_form(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    line = tool_line("ask_user", {"question": "Colour?", "choices": ["red", "blue", "green"]})
    answers = elicitation_answers({"action": "accept", "content": {"answer": "blue"}})
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            # No clientInfo (as avante.nvim): permission options would be answered by kind.
            await initialize(client, ELICITING)
            new = await client.result("session/new", {"cwd": str(session_dir(tmp_path))})
            [single] = await run_tools(client, new["sessionId"], line, on_request=answers)
    [form] = client.server_requests
    assert form["method"] == "elicitation/create"
    answer = form["params"]["requestedSchema"]["properties"]["answer"]
    assert (answer["type"], answer["enum"]) == ("string", ["red", "blue", "green"])
    assert (single["status"], output_text(single)) == ("completed", "The user chose: blue")


async def test_without_elicitation_free_form_and_multi_select_fail_fast(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    lines = [
        tool_line("ask_user", {"question": "Name?"}),
        tool_line("ask_user", {"question": "Which?", "choices": ["a", "b"], "multi_select": True}),
    ]
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await initialize(client, {"elicitation": None, "fs": {"readTextFile": True}})
            new = await client.result("session/new", {"cwd": str(session_dir(tmp_path))})
            free, multi = await run_tools(client, new["sessionId"], *lines)
    assert client.server_requests == []
    assert free["status"] == "failed"
    assert "needs 'choices'" in output_text(free)
    assert multi["status"] == "failed"
    assert "multi_select needs a client that shows forms" in output_text(multi)


# --------------------------------------------------------------------------- client files

FILES: JsonDict = {"fs": {"readTextFile": True, "writeTextFile": True}}


class EditorFiles:
    """A client holding unsaved buffers: ``fs/read_text_file`` answers from them (or an
    error for a file it has none of), ``fs/write_text_file`` updates them; the disk is never
    touched. Permission requests are allowed, or rejected for the tools in ``reject``."""

    def __init__(self, buffers: dict[str, str], reject: tuple[str, ...] = ()) -> None:
        self.buffers = buffers
        self.reject = reject
        self.calls: list[tuple[str, str]] = []
        """``(method, path)`` of every fs request and ``("permission", title)``, in order."""

    def __call__(self, request: JsonDict) -> JsonDict:
        method, params = request["method"], request["params"]
        if method == "session/request_permission":
            title = params["toolCall"]["title"]
            self.calls.append(("permission", title))
            no = params["toolCall"]["rawInput"]["tool"] in self.reject
            return {
                "outcome": {
                    "outcome": "selected",
                    "optionId": "reject-once" if no else "allow-once",
                }
            }
        self.calls.append((method, params["path"]))
        if method == "fs/read_text_file":
            return {"content": self.buffers[params["path"]]}
        assert method == "fs/write_text_file", request
        self.buffers[params["path"]] = params["content"]
        return {}


async def test_file_tools_read_and_write_through_the_clients_buffers(tmp_path: Path) -> None:
    document = echo_config()
    document["risk_profiles"]["default"]["forbidden_paths"] = [".keys"]
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    (workspace / ".keys").mkdir(parents=True)
    (workspace / "notes.md").write_text("on disk\n")
    notes, new_file = str(workspace / "notes.md"), str(workspace / "new.md")
    editor = EditorFiles({notes: "unsaved line 1\nunsaved line 2\n"}, reject=("file_write",))
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, FILES)
            read, edit, outside, forbidden, denied = await run_tools(
                client,
                session_id,
                tool_line("file_read", {"path": "notes.md", "offset": 2}),
                tool_line(
                    "file_edit", {"path": "notes.md", "old_string": "line 2", "new_string": "two"}
                ),
                tool_line("file_read", {"path": "../elsewhere.txt"}),
                tool_line("file_read", {"path": ".keys/id"}),
                tool_line("file_write", {"path": "new.md", "content": "x"}),
                on_request=editor,
            )
    assert read["status"] == "completed"
    assert output_text(read) == "     2\tunsaved line 2"
    assert edit["status"] == "completed"
    assert editor.buffers[notes] == "unsaved line 1\nunsaved two\n"
    # The disk keeps its text: the editor owns the file now.
    assert (workspace / "notes.md").read_text() == "on disk\n"
    # The jail, forbidden paths and approval come first: nothing reaches the client.
    assert outside["status"] == "failed"
    assert forbidden["status"] == "failed"
    assert denied["status"] == "failed"
    # The edit's card shows the buffer it changes, checked and diffed before asking.
    [diff] = [item for item in edit["content"] if item["type"] == "diff"]
    assert diff == {
        "type": "diff",
        "path": notes,
        "oldText": "unsaved line 1\nunsaved line 2\n",
        "newText": "unsaved line 1\nunsaved two\n",
    }
    [announced] = [
        update
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "tool_call" and update["name"] == "file_edit"
    ]
    assert announced["locations"] == [{"path": notes, "line": 2}]
    assert announced["content"] == [diff]
    assert editor.calls == [
        ("fs/read_text_file", notes),
        ("fs/read_text_file", notes),
        ("permission", "Edit `notes.md`"),
        ("fs/read_text_file", notes),
        ("fs/write_text_file", notes),
        ("permission", "Write `new.md`"),
    ]
    assert new_file not in editor.buffers
    assert not (workspace / "new.md").exists()


async def test_an_edit_the_buffer_does_not_allow_fails_before_anyone_is_asked(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (workspace / "a.txt").write_text("saved text\n")
    a = str(workspace / "a.txt")
    editor = EditorFiles({a: "edited in the editor\n"})
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, FILES)
            [edit] = await run_tools(
                client,
                session_id,
                tool_line("file_edit", {"path": "a.txt", "old_string": "saved", "new_string": "x"}),
                on_request=editor,
            )
    assert edit["status"] == "failed"
    assert "old_string not found in a.txt" in output_text(edit)
    assert editor.calls == [("fs/read_text_file", a)]
    assert (workspace / "a.txt").read_text() == "saved text\n"


async def test_a_client_error_fails_the_call_and_never_means_the_disk(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (workspace / "a.txt").write_text("disk\n")

    async def answer(request: JsonDict) -> JsonDict | None:
        if request["method"] == "fs/read_text_file":
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32002, "message": "no buffer"},
                }
            )
            return None
        return allow_once(request)

    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"fs": {"readTextFile": True}})
            [read] = await run_tools(
                client, session_id, tool_line("file_read", {"path": "a.txt"}), on_request=answer
            )
    assert read["status"] == "failed"
    assert f"The client could not read {workspace / 'a.txt'}: no buffer" in output_text(read)


async def test_client_fs_never_keeps_files_on_this_disk(tmp_path: Path) -> None:
    document = echo_config()
    document["acp"] = {"client_fs": "never"}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (workspace / "a.txt").write_text("disk\n")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, FILES)
            read, write = await run_tools(
                client,
                session_id,
                tool_line("file_read", {"path": "a.txt"}),
                tool_line("file_write", {"path": "b.txt", "content": "new\n"}),
            )
    assert output_text(read) == "     1\tdisk"
    assert write["status"] == "completed"
    assert (workspace / "b.txt").read_text() == "new\n"
    assert [r["method"] for r in client.server_requests] == ["session/request_permission"]


async def test_the_gateway_uses_client_files_only_when_the_client_shares_them(
    tmp_path: Path,
) -> None:
    from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect

    config_dir, workspace = gateway_with_a_file(tmp_path)
    editor = EditorFiles({str(workspace / "a.txt"): "editor buffer\n"})
    outputs: list[str] = []
    with trio.fail_after(CEILING_SECS):
        async with run_gateway(config_dir) as gateway:
            for meta in ({}, {"zeroclaw": {"sharedFilesystem": True}}):
                async with ws_connect(gateway.ws_url()) as ws:
                    rpc = WsRpc(ws)
                    init: JsonDict = {"protocolVersion": 1, "clientCapabilities": FILES}
                    if meta:
                        init["_meta"] = meta
                    await rpc.result("initialize", init)
                    new = await rpc.result("session/new", {"cwd": str(workspace)})
                    line = tool_line("file_read", {"path": "a.txt"})
                    reply = await rpc.prompt(new["sessionId"], line, on_request=editor)
                    assert reply["result"]["stopReason"] == "end_turn"
                    [done] = [
                        n["params"]["update"]
                        for n in rpc.notifications
                        if n["params"]["update"]["sessionUpdate"] == "tool_call_update"
                        and n["params"]["update"].get("status") == "completed"
                    ]
                    outputs.append(output_text(done))
    assert outputs == ["     1\tgateway disk", "     1\teditor buffer"]
    assert editor.calls == [("fs/read_text_file", str(workspace / "a.txt"))]


async def test_an_elicitation_the_client_cannot_show_is_a_clear_failure(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())

    async def refuse(request: JsonDict) -> JsonDict | None:
        error = {"code": -32603, "message": "form rendering failed"}
        await client.send({"jsonrpc": "2.0", "id": request["id"], "error": error})
        return None

    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, session_dir(tmp_path), ELICITING)
            [asked] = await run_tools(
                client, session_id, tool_line("ask_user", {"question": "Name?"}), on_request=refuse
            )
    assert asked["status"] == "failed"
    assert output_text(asked) == (
        "Error: the question could not be asked: the client answered: form rendering failed"
    )
