"""Skills through a real ``zeroclaw acp``: the skills block of the system message in each
mode, audited-out skills absent with a warning on stderr, ``/skill args`` prompts, skill
tools, and ``available_commands_update``. The model is a local fake OpenAI-compatible
server (tests/e2e/fake_llm.py) that records every request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.fake_llm import FakeLLM, Reply, openai_text_reply, openai_tool_reply, serve_fake_llm
from tests.e2e.helpers import (
    JsonDict,
    RpcPipeClient,
    open_session,
    prompt_turns,
    show_system_prompt,
    spawn_acp,
)
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e  # binds 127.0.0.1

CEILING_SECS = 60
AGENT = "coder"


def skills_config(base_url: str, agent_ws: Path, workspace_dir: Path, **agent: Any) -> JsonDict:
    document = echo_config(
        providers={
            "openai": {"default": {"model": "fake-model", "api_key": "sk-e2e", "uri": base_url}}
        },
        agents={
            AGENT: {
                "model_provider": "openai.default",
                "workspace": {"path": str(agent_ws)},
                **agent,
            }
        },
    )
    document["workspace_dir"] = str(workspace_dir)
    return document


def write_skill(root: Path, name: str, text: str, manifest: str = "SKILL.md") -> Path:
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / manifest).write_text(text)
    return directory


def layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An agent workspace with two skills and an audited-out one, and a bundle ``team``
    with a skill and a clash that the workspace's skill wins."""
    agent_ws, data = tmp_path / "agent-ws", tmp_path / "data"
    own = agent_ws / "skills"
    write_skill(
        own,
        "review",
        "---\nname: review\ndescription: Review a change\nargument-hint: <branch>\n"
        "tags: [code]\nunknown: ignored\n---\n# Review\n\nREVIEW-BODY: read the diff first.\n",
    )
    write_skill(own, "notes", "NOTES-BODY: keep notes short.\n")
    scripted = write_skill(own, "scripted", "SCRIPTED-BODY\n")
    (scripted / "install.sh").write_text("echo hi\n")
    bundle = data / "shared" / "skills" / "team"
    write_skill(bundle, "deploy", "---\ndescription: Deploy the app\n---\nDEPLOY-BODY\n")
    write_skill(bundle, "review", "---\nname: review\n---\nBUNDLE-REVIEW-BODY\n")
    project = tmp_path / "project"
    project.mkdir()
    return agent_ws, data, project


async def run_prompts(
    tmp_path: Path,
    config: Any,
    replies: list[Reply],
    prompts: list[str],
    project: Path,
    on_request: Any = None,
    between: Any = None,
) -> tuple[FakeLLM, RpcPipeClient, str]:
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(*replies) as llm:
            config_dir = write_config(tmp_path / "cfg", config(f"{llm.base_url}/v1"))
            client, session_id = await prompt_turns(
                config_dir, project, prompts, on_request=on_request, between=between
            )
    return llm, client, session_id


def system_of(request: Any) -> str:
    first = request.json()["messages"][0]
    assert first["role"] == "system"
    text: str = first["content"]
    return text


async def test_full_mode_skills_block_audit_and_commands(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_ws, data, project = layout(tmp_path)
    llm, client, session_id = await run_prompts(
        tmp_path,
        lambda url: skills_config(url, agent_ws, data, skill_bundles=["team"]),
        [openai_text_reply("ok"), openai_text_reply("ok")],
        ["hello", "/review main please"],
        project,
    )
    first, second = llm.requests
    system = system_of(first)
    section = system[system.index("## Available Skills") : system.index("## Workspace")]
    assert "<available_skills>" in section
    names = [line.strip() for line in section.splitlines() if line.strip().startswith("<name>")]
    # Workspace skills sorted, then the bundle's; the bundle's clashing review is left out.
    assert names == ["<name>notes</name>", "<name>review</name>", "<name>deploy</name>"]
    assert "REVIEW-BODY: read the diff first." in section
    assert "DEPLOY-BODY" in section
    assert "BUNDLE-REVIEW-BODY" not in section
    assert "SCRIPTED-BODY" not in system
    assert f"<location>{agent_ws / 'skills' / 'review' / 'SKILL.md'}</location>" in section
    assert system.index("## Available Skills") < system.index("## Workspace")
    tool_names = [tool["function"]["name"] for tool in first.json().get("tools", [])]
    assert "read_skill" not in tool_names
    # The audit's one warning names the file and the reason.
    stderr = capfd.readouterr().err
    warnings = [line for line in stderr.splitlines() if "install.sh" in line]
    assert len(warnings) == 1, stderr
    assert "script files are not allowed" in warnings[0]
    # /review runs the turn with the skill's instructions in front of the user's text.
    user = second.json()["messages"][-1]
    assert user["role"] == "user"
    assert user["content"].index("REVIEW-BODY") < user["content"].index("/review main please")
    assert "REVIEW-BODY" not in first.json()["messages"][-1]["content"]
    # available_commands_update after session/new lists the session's skills.
    [note] = client.commands
    assert note["params"]["sessionId"] == session_id
    update = note["params"]["update"]
    assert update == {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {"name": "notes", "description": "NOTES-BODY: keep notes short."},
            {"name": "review", "description": "Review a change", "input": {"hint": "<branch>"}},
            {"name": "deploy", "description": "Deploy the app"},
        ],
    }
    new_reply = next(i for i, line in enumerate(client.raw_lines) if '"sessionId"' in line)
    commands_line = next(
        i for i, line in enumerate(client.raw_lines) if "available_commands_update" in line
    )
    assert new_reply < commands_line  # sent after the session/new reply


async def test_skill_edits_and_new_skills_apply_next_turn(tmp_path: Path) -> None:
    agent_ws, data, project = layout(tmp_path)

    def change() -> None:
        (agent_ws / "skills" / "notes" / "SKILL.md").write_text("NOTES-EDITED: be brief.\n")
        write_skill(agent_ws / "skills", "fresh", "---\ndescription: A new one\n---\nFRESH\n")

    llm, client, _ = await run_prompts(
        tmp_path,
        lambda url: skills_config(url, agent_ws, data),
        [openai_text_reply("ok"), openai_text_reply("ok")],
        ["one", "/fresh go"],
        project,
        between=change,
    )
    first, second = (system_of(request) for request in llm.requests)
    assert "NOTES-BODY" in first
    assert "FRESH" not in first
    assert "NOTES-EDITED: be brief." in second
    assert "<name>fresh</name>" in second
    assert "FRESH" in llm.requests[1].json()["messages"][-1]["content"]
    # The changed list is announced again, within the turn that saw it.
    lists = [
        [command["name"] for command in note["params"]["update"]["availableCommands"]]
        for note in client.commands
    ]
    assert lists == [["notes", "review"], ["fresh", "notes", "review"]]


async def test_compact_mode_lists_summaries_and_offers_read_skill(tmp_path: Path) -> None:
    agent_ws, data, project = layout(tmp_path)
    llm, _client, _ = await run_prompts(
        tmp_path,
        lambda url: skills_config(url, agent_ws, data, skills_mode="compact"),
        [openai_text_reply("ok")],
        ["hello"],
        project,
    )
    [request] = llm.requests
    system = system_of(request)
    section = system[system.index("## Available Skills") :]
    assert "call `read_skill`" in section
    assert "<name>review</name>" in section
    assert "<description>Review a change</description>" in section
    assert "REVIEW-BODY" not in system
    assert "<instructions>" not in section
    tool_names = [tool["function"]["name"] for tool in request.json()["tools"]]
    assert "read_skill" in tool_names
    # `zeroclaw prompt --show-system-prompt` prints the same message, skills included.
    with trio.fail_after(CEILING_SECS):
        shown = await show_system_prompt(tmp_path / "cfg", project)
    assert shown == system + "\n"


async def test_full_mode_over_the_cap_falls_back_to_compact(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    agent_ws, data, project = layout(tmp_path)

    def config(url: str) -> JsonDict:
        document = skills_config(url, agent_ws, data)
        document["skills"] = {"max_full_chars": 200}
        return document

    llm, _client, _ = await run_prompts(
        tmp_path, config, [openai_text_reply("ok")], ["hello"], project
    )
    system = system_of(llm.requests[0])
    assert "call `read_skill`" in system
    assert "REVIEW-BODY" not in system
    assert "using compact mode" in capfd.readouterr().err


async def test_no_skills_no_section_and_an_empty_commands_list(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    llm, client, _ = await run_prompts(
        tmp_path,
        lambda url: skills_config(url, tmp_path / "empty-ws", tmp_path / "data"),
        [openai_text_reply("ok")],
        ["/review is just text here"],
        project,
    )
    system = system_of(llm.requests[0])
    assert "## Available Skills" not in system
    assert llm.requests[0].json()["messages"][-1]["content"].endswith("/review is just text here")
    [note] = client.commands
    assert note["params"]["update"] == {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [],
    }


async def call_skill_tool(
    tmp_path: Path, skill: str, tool_toml: str, tool: str, arguments: JsonDict
) -> tuple[FakeLLM, RpcPipeClient, str, list[JsonDict]]:
    """One turn in which the model calls the ``[[tools]]`` entry ``tool_toml`` of a
    ``SKILL.toml`` skill; every approval asked is answered allow-once and kept."""
    agent_ws, data, project = tmp_path / "agent-ws", tmp_path / "data", tmp_path / "project"
    project.mkdir()
    write_skill(
        agent_ws / "skills",
        skill,
        f'[skill]\nname = "{skill}"\ndescription = "A skill"\n\n[[tools]]\n{tool_toml}',
        manifest="SKILL.toml",
    )
    asked: list[JsonDict] = []

    def allow(request: JsonDict) -> JsonDict:
        asked.append(request["params"]["toolCall"])
        return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}

    call = openai_tool_reply([("call-1", f"{skill}__{tool}", arguments)])
    llm, client, session_id = await run_prompts(
        tmp_path,
        lambda url: skills_config(url, agent_ws, data),
        [call, openai_text_reply("done")],
        ["go"],
        project,
        on_request=allow,
    )
    return llm, client, session_id, asked


async def test_a_skill_tool_runs_through_the_shell_rules(tmp_path: Path) -> None:
    llm, client, session_id, asked = await call_skill_tool(
        tmp_path,
        "ops",
        'name = "say"\ndescription = "Echo a word"\nkind = "shell"\n'
        'command = "echo said {{word}}"\nargs = { word = "What to say" }\n',
        "say",
        {"word": "hi; rm -rf /"},
    )
    first, second = llm.requests
    tools = {tool["function"]["name"]: tool["function"] for tool in first.json()["tools"]}
    assert tools["ops__say"]["parameters"]["required"] == ["word"]
    assert "<name>ops__say</name>" in system_of(first)
    assert len(asked) == 1  # supervised: asked first, as a shell call is
    result = second.json()["messages"][-1]
    assert result["role"] == "tool"
    assert result["content"] == "said hi; rm -rf /"  # one quoted word, never a second command
    done = [
        update
        for update in client.updates(session_id)
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") == "completed"
    ]
    assert done, client.updates(session_id)


async def test_a_skill_tools_approval_shows_the_command_that_runs(tmp_path: Path) -> None:
    """The operator approves the composed command line, and a value inside the template's
    double quotes stays literal text there (``${HOME}`` is not expanded)."""
    llm, _, _, asked = await call_skill_tool(
        tmp_path,
        "notes",
        'name = "add"\ndescription = "Add a note"\nkind = "shell"\n'
        'command = \'echo "note: {{msg}}"\'\nargs = { msg = "The note" }\n',
        "add",
        {"msg": "${HOME} hello"},
    )
    composed = 'echo "note: \\${HOME} hello"'
    [tool_call] = asked
    assert tool_call["rawInput"] == {
        "tool": "notes__add",
        "summary": composed,
        "arguments": {"msg": "${HOME} hello"},
    }
    assert [block["content"]["text"] for block in tool_call["content"]] == [f"command: {composed}"]
    result = llm.requests[-1].json()["messages"][-1]
    assert result["content"] == "note: ${HOME} hello"


async def test_load_and_resume_send_the_commands_after_their_reply(tmp_path: Path) -> None:
    agent_ws, data, project = layout(tmp_path)
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(openai_text_reply("ok")) as llm:
            config_dir = write_config(
                tmp_path / "cfg", skills_config(f"{llm.base_url}/v1", agent_ws, data)
            )
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, project)
                assert (await client.prompt(session_id, "hello"))["result"]
            async with spawn_acp(config_dir) as client:
                await client.call("initialize", {"protocolVersion": 1})
                loaded = await client.call(
                    "session/load", {"sessionId": session_id, "cwd": str(project), "mcpServers": []}
                )
                assert "result" in loaded, loaded
                await client.call("session/close", {"sessionId": session_id})
                resumed = await client.call(
                    "session/resume", {"sessionId": session_id, "cwd": str(project)}
                )
                assert "result" in resumed, resumed
                # Read past the notice that follows the reply.
                await client.call("session/close", {"sessionId": session_id})
    assert len(client.commands) == 2
    for note in client.commands:
        names = [command["name"] for command in note["params"]["update"]["availableCommands"]]
        assert names == ["notes", "review"]
    replies = [
        index
        for index, line in enumerate(client.raw_lines)
        if json.loads(line).get("id") in (loaded["id"], resumed["id"])
    ]
    announced = [
        index for index, line in enumerate(client.raw_lines) if "available_commands_update" in line
    ]
    assert replies[0] < announced[0] < replies[1] < announced[1]
