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


async def offered_session(client: RpcPipeClient, cwd: Path, capabilities: JsonDict) -> str:
    """initialize with ``capabilities``, then session/new in ``cwd``; the session id."""
    await initialize(client, capabilities)
    new = await client.result("session/new", {"cwd": str(cwd)})
    session_id: str = new["sessionId"]
    return session_id


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
            await initialize(client, ELICITING)
            new = await client.result("session/new", {"cwd": str(tmp_path)})
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
    # A single pick still goes through a permission card (one card per call in Zed).
    permissions = [r for r in client.server_requests if r["method"] == "session/request_permission"]
    assert [p["params"]["toolCall"]["title"] for p in permissions] == ["Colour?"]
    assert (single["status"], output_text(single)) == ("completed", "The user chose: red")


async def test_without_elicitation_free_form_and_multi_select_fail_fast(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    lines = [
        tool_line("ask_user", {"question": "Name?"}),
        tool_line("ask_user", {"question": "Which?", "choices": ["a", "b"], "multi_select": True}),
    ]
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await initialize(client, {"elicitation": None, "fs": {"readTextFile": True}})
            new = await client.result("session/new", {"cwd": str(tmp_path)})
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
            no = any(title == f"Approve {name}?" for name in self.reject)
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
    document["risk_profiles"]["default"]["forbidden_paths"] = [str(tmp_path / "ws" / ".keys")]
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
    assert editor.calls == [
        ("fs/read_text_file", notes),
        ("permission", "Approve file_edit?"),
        ("fs/read_text_file", notes),
        ("fs/write_text_file", notes),
        ("permission", "Approve file_write?"),
    ]
    assert new_file not in editor.buffers
    assert not (workspace / "new.md").exists()


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

    document = echo_config()
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (workspace / "a.txt").write_text("gateway disk\n")
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


# --------------------------------------------------------------------------- shell output

ANY_COMMAND: JsonDict = {"allowed_commands": ["*"], "block_high_risk_commands": False}


async def test_a_running_shell_call_streams_its_output_into_its_card(tmp_path: Path) -> None:
    """The command waits for a file the test creates only once the card showed the first
    line: the live update must arrive while the command still runs."""
    config_dir = write_config(tmp_path / "cfg", echo_config(risk=ANY_COMMAND))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    command = "echo first; until test -e go; do sleep 0.05; done; echo second"
    live: list[JsonDict] = []
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            await initialize(client)
            session_id = (await client.result("session/new", {"cwd": str(workspace)}))["sessionId"]
            request_id = await client.prompt_request(
                session_id, tool_line("shell", {"command": command})
            )
            while True:
                message = await client.receive()
                if message.get("method") == "session/request_permission":
                    await client.send(
                        {"jsonrpc": "2.0", "id": message["id"], "result": allow_once(message)}
                    )
                    continue
                if message.get("id") == request_id:
                    break
                update = message.get("params", {}).get("update", {})
                if update.get("sessionUpdate") != "tool_call_update":
                    continue
                if "status" not in update:
                    live.append(update)
                    if "first" in output_text(update):
                        (workspace / "go").touch()
                else:
                    final = update
    assert live, "no live output before the call finished"
    assert output_text(live[0]) == "first\n"
    assert live[0]["toolCallId"] == final["toolCallId"]
    assert final["status"] == "completed"
    assert output_text(final) == "first\nsecond"


class EditorTerminal:
    """A client with terminals: ``terminal/*`` answered as a finished command whose output
    is ``output``; permission requests allowed."""

    def __init__(self, output: str, exit_code: int = 0) -> None:
        self.output = output
        self.exit_code = exit_code
        self.calls: list[JsonDict] = []

    def __call__(self, request: JsonDict) -> JsonDict:
        method = request["method"]
        if method == "session/request_permission":
            return allow_once(request)
        self.calls.append(request)
        if method == "terminal/create":
            return {"terminalId": "term-1"}
        if method == "terminal/wait_for_exit":
            return {"exitCode": self.exit_code}
        if method == "terminal/output":
            status = {"exitCode": self.exit_code}
            return {"output": self.output, "truncated": False, "exitStatus": status}
        assert method == "terminal/release", request
        return {}


async def test_client_terminal_runs_the_shell_in_the_editors_terminal(tmp_path: Path) -> None:
    document = echo_config()
    document["acp"] = {"client_terminal": True}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    editor = EditorTerminal("made in the editor\n")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"terminal": True})
            [ran, refused] = await run_tools(
                client,
                session_id,
                tool_line("shell", {"command": "echo hi > made-here.txt"}),
                tool_line("shell", {"command": "cat $(ls)"}),
                on_request=editor,
            )
    methods = [call["method"] for call in editor.calls]
    assert methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    create = editor.calls[0]["params"]
    assert create["sessionId"] == session_id
    assert create["args"] == ["-c", "echo hi > made-here.txt"]
    assert create["cwd"] == str(workspace)
    assert all(call["params"]["terminalId"] == "term-1" for call in editor.calls[1:])
    # The card embeds the terminal while it runs and keeps it when the call completes.
    embedded = [
        u
        for u in client.updates(session_id)
        if u["sessionUpdate"] == "tool_call_update"
        and {"type": "terminal", "terminalId": "term-1"} in u.get("content", [])
    ]
    assert [u.get("status") for u in embedded] == [None, "completed"]
    assert output_text(ran) == "made in the editor"
    assert not (workspace / "made-here.txt").exists()
    # The policy still refuses before anything reaches the client.
    assert refused["status"] == "failed"


async def test_terminal_stays_local_unless_client_terminal_is_on(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    editor = EditorTerminal("never used\n")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"terminal": True})
            [ran] = await run_tools(
                client, session_id, tool_line("shell", {"command": "echo local"}), on_request=editor
            )
    assert editor.calls == []
    assert output_text(ran) == "local"


# --------------------------------------------------------------------------- images

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@pytest.mark.parametrize("provider_type", ["openai", "anthropic"])
async def test_prompt_images_reach_a_vision_provider_in_its_wire_shape(
    tmp_path: Path, provider_type: str
) -> None:
    import base64
    import hashlib

    from tests.e2e.fake_llm import anthropic_text_reply, openai_text_reply, serve_fake_llm

    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    data = base64.b64encode(PNG_BYTES).decode()
    prompt = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image", "mimeType": "image/png", "data": data},
    ]
    reply = anthropic_text_reply if provider_type == "anthropic" else openai_text_reply
    stored = workspace / "uploads" / f"{hashlib.sha256(PNG_BYTES).hexdigest()}.png"
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(reply("A test pattern."), reply("Plain.")) as llm:
            uri = llm.base_url if provider_type == "anthropic" else f"{llm.base_url}/v1"
            entry = {"model": "fake-model", "api_key": "sk-e2e-key", "uri": uri}
            document = echo_config(
                providers={
                    provider_type: {
                        "seeing": {**entry, "vision": True},
                        "blind": dict(entry),
                    }
                },
                agents={
                    "seeing": {"model_provider": f"{provider_type}.seeing"},
                    "blind": {"model_provider": f"{provider_type}.blind"},
                },
                default_agent="seeing",
            )
            config_dir = write_config(tmp_path / "cfg", document)
            async with spawn_acp(config_dir) as client:
                init = await initialize(client)
                assert init["agentCapabilities"]["promptCapabilities"]["image"] is True
                for alias in ("seeing", "blind"):
                    new = await client.result(
                        "session/new", {"cwd": str(workspace), "agentAlias": alias}
                    )
                    response = await client.prompt(new["sessionId"], prompt)
                    assert response["result"]["stopReason"] == "end_turn", response
    assert stored.read_bytes() == PNG_BYTES
    seeing, blind = (request.json()["messages"][-1] for request in llm.requests)
    marker = f"[IMAGE:{stored}]"
    if provider_type == "anthropic":
        assert seeing["content"] == [
            {"type": "text", "text": f"What is in this picture?\n\n{marker}"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": data},
            },
        ]
        assert blind["content"] == [
            {"type": "text", "text": f"What is in this picture?\n\n{marker}"}
        ]
    else:
        assert seeing["content"] == [
            {"type": "text", "text": f"What is in this picture?\n\n{marker}"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        ]
        assert blind["content"] == f"What is in this picture?\n\n{marker}"


async def test_image_capability_follows_the_default_agents_provider(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            init = await initialize(client)
    assert init["agentCapabilities"]["promptCapabilities"]["image"] is False


async def test_a_client_terminal_that_never_exits_is_killed_after_the_timeout(
    tmp_path: Path,
) -> None:
    document = echo_config(runtime={"shell_timeout_secs": 1})
    document["acp"] = {"client_terminal": True}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    editor = EditorTerminal("still going\n")

    def never_exits(request: JsonDict) -> JsonDict | None:
        if request["method"] == "terminal/wait_for_exit":
            editor.calls.append(request)
            return None  # the command never ends
        if request["method"] == "terminal/kill":
            editor.calls.append(request)
            return {}
        return editor(request)

    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, workspace, {"terminal": True})
            [ran] = await run_tools(
                client,
                session_id,
                tool_line("shell", {"command": "echo x"}),
                on_request=never_exits,
            )
    methods = [call["method"] for call in editor.calls]
    assert methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]
    assert ran["status"] == "failed"
    assert output_text(ran).startswith("Error: Command timed out after 1 s")


async def test_an_elicitation_the_client_cannot_show_is_a_clear_failure(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())

    async def refuse(request: JsonDict) -> JsonDict | None:
        error = {"code": -32603, "message": "form rendering failed"}
        await client.send({"jsonrpc": "2.0", "id": request["id"], "error": error})
        return None

    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await offered_session(client, tmp_path, ELICITING)
            [asked] = await run_tools(
                client, session_id, tool_line("ask_user", {"question": "Name?"}), on_request=refuse
            )
    assert asked["status"] == "failed"
    assert output_text(asked) == (
        "Error: the question could not be asked: the client answered: form rendering failed"
    )
