"""What a session's system message holds: the agent workspace's personality files, the
project's AGENTS.md files, the working directory. A real ``zeroclaw acp`` talks to a local
fake OpenAI-compatible server (tests/e2e/fake_llm.py) that records every request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.agent.prompt.identity import PERSONA_TEMPLATES
from acp_server.agent.prompt.system_prompt import MAX_PROJECT_INSTRUCTION_BYTES
from tests.e2e.fake_llm import openai_text_reply, serve_fake_llm
from tests.e2e.helpers import JsonDict, prompt_turns, show_system_prompt
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e  # binds 127.0.0.1

CEILING_SECS = 45
AGENT = "coder"


def identity_config(
    base_url: str,
    agent_workspace: Path,
    *,
    risk: dict[str, Any] | None = None,
    project_instructions: list[str] | None = None,
) -> JsonDict:
    document = echo_config(
        providers={
            "openai": {"default": {"model": "fake-model", "api_key": "sk-e2e", "uri": base_url}}
        },
        agents={
            AGENT: {"model_provider": "openai.default", "workspace": {"path": str(agent_workspace)}}
        },
        risk=risk,
    )
    if project_instructions is not None:
        document["acp"] = {"project_instructions": project_instructions}
    return document


async def system_messages(
    tmp_path: Path, cwd: Path, config: Any, prompts: list[str] | None = None, between: Any = None
) -> list[str]:
    """Run one turn per prompt in one session; the system message of every model request."""
    texts = prompts or ["hello"]
    replies = [openai_text_reply("ok") for _ in texts]
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(*replies) as llm:
            config_dir = write_config(tmp_path / "cfg", config(f"{llm.base_url}/v1"))
            await prompt_turns(config_dir, cwd, texts, between=between)
    found = []
    for request in llm.requests:
        first = request.json()["messages"][0]
        assert first["role"] == "system"
        found.append(first["content"])
    return found


async def test_persona_files_in_order_without_memory_and_edits_apply_next_turn(
    tmp_path: Path,
) -> None:
    agent_ws = tmp_path / "agent-ws"
    agent_ws.mkdir()
    (agent_ws / "SOUL.md").write_text("  You are Quill, an admin-edited soul.  \n")
    (agent_ws / "USER.md").write_text("   \n")  # blank: seeded, like a missing file
    (agent_ws / "BOOTSTRAP.md").write_text("bootstrap-marker\n")
    (agent_ws / "MEMORY.md").write_text("memory-secret-marker\n")
    project = tmp_path / "project"
    project.mkdir()

    def edit_soul() -> None:
        (agent_ws / "SOUL.md").write_text("You are Quill, edited between turns.\n")

    first, second = await system_messages(
        tmp_path,
        project,
        lambda url: identity_config(url, agent_ws),
        prompts=["one", "two"],
        between=edit_soul,
    )
    headings = [f"### {name}" for name in ("SOUL.md", "IDENTITY.md", "USER.md", "AGENTS.md")]
    headings += ["### TOOLS.md", "### HEARTBEAT.md", "### BOOTSTRAP.md"]
    positions = [first.index(heading) for heading in headings]
    assert positions == sorted(positions)
    assert first.index("## Project Context") < positions[0]
    assert "### SOUL.md\n\nYou are Quill, an admin-edited soul.\n\n### IDENTITY.md" in first
    assert "bootstrap-marker" in first
    assert "MEMORY.md" not in first
    assert "memory-secret-marker" not in first
    assert f"Working directory: `{project.resolve()}`" in first
    assert "You are Quill, edited between turns." in second
    # Seeding: missing and blank files got the templates ({agent} = the alias); the
    # admin's files are untouched; MEMORY.md and BOOTSTRAP.md are never written.
    assert (agent_ws / "IDENTITY.md").read_text() == PERSONA_TEMPLATES["IDENTITY.md"].replace(
        "{agent}", AGENT
    )
    assert f"**Name:** {AGENT}" in first
    assert (agent_ws / "USER.md").read_text() == PERSONA_TEMPLATES["USER.md"]
    assert (agent_ws / "MEMORY.md").read_text() == "memory-secret-marker\n"
    assert (agent_ws / "BOOTSTRAP.md").read_text() == "bootstrap-marker\n"
    for template in PERSONA_TEMPLATES.values():
        assert "memory_" not in template


async def test_default_agent_workspace_is_under_workspace_dir(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()

    def config(url: str) -> JsonDict:
        document = identity_config(url, tmp_path / "unused")
        del document["agents"][AGENT]["workspace"]
        return document

    [system] = await system_messages(tmp_path, project, config)
    seeded = tmp_path / "cfg" / "data" / "agents" / AGENT / "workspace"
    assert sorted(path.name for path in seeded.iterdir()) == sorted(PERSONA_TEMPLATES)
    assert "### SOUL.md" in system
    assert not (project / "SOUL.md").exists()  # never the session cwd


async def test_project_instructions_from_cwd_and_parents_nearest_last(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    cwd = root / "pkg"
    cwd.mkdir(parents=True)
    (root / "AGENTS.md").write_text("root-rule: use tabs\n")
    (cwd / "AGENTS.md").write_text("pkg-rule: use spaces\n")
    (cwd / "CLAUDE.md").write_text("claude-rule\n")
    (cwd / "NOTES.md").write_text("notes-not-listed\n")
    unjailed = {"workspace_only": False, "forbidden_paths": []}

    [system] = await system_messages(
        tmp_path,
        cwd,
        lambda url: identity_config(
            url, tmp_path / "aws", risk=unjailed, project_instructions=["AGENTS.md", "CLAUDE.md"]
        ),
    )
    section = system[system.index("## Project Instructions") :]
    assert system.index("## Project Context") < system.index("## Project Instructions")
    root_at, pkg_at = section.index("root-rule"), section.index("pkg-rule")
    assert root_at < pkg_at < section.index("claude-rule")
    assert f"### {root / 'AGENTS.md'}" in section
    assert "notes-not-listed" not in system
    assert section.index("pkg-rule") < section.index("## CRITICAL: Tool Honesty")


async def test_jailed_session_reads_only_its_cwd_and_empty_list_turns_it_off(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    cwd = root / "pkg"
    cwd.mkdir(parents=True)
    (root / "AGENTS.md").write_text("outside-the-jail\n")
    (cwd / "AGENTS.md").write_text("inside-the-jail\n")
    [jailed] = await system_messages(
        tmp_path, cwd, lambda url: identity_config(url, tmp_path / "aws")
    )
    assert "inside-the-jail" in jailed
    assert "outside-the-jail" not in jailed
    [off] = await system_messages(
        tmp_path,
        cwd,
        lambda url: identity_config(url, tmp_path / "aws", project_instructions=[]),
    )
    assert "inside-the-jail" not in off
    assert "## Project Instructions" not in off


async def test_project_instructions_cap_keeps_the_nearest(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    cwd = root / "pkg"
    cwd.mkdir(parents=True)
    (root / "AGENTS.md").write_text("far-rule\n")
    big = "near-start\n" + "x" * (MAX_PROJECT_INSTRUCTION_BYTES + 5000) + "\nnear-end\n"
    (cwd / "AGENTS.md").write_text(big)
    unjailed = {"workspace_only": False, "forbidden_paths": []}
    [system] = await system_messages(
        tmp_path, cwd, lambda url: identity_config(url, tmp_path / "aws", risk=unjailed)
    )
    assert "near-start" in system
    assert "near-end" not in system
    assert "far-rule" not in system
    assert f"project instructions truncated at {MAX_PROJECT_INSTRUCTION_BYTES} bytes" in system
    section = system[system.index("## Project Instructions") : system.index("## CRITICAL")]
    assert len(section.encode()) < MAX_PROJECT_INSTRUCTION_BYTES + 1024


async def test_show_system_prompt_prints_what_a_session_sends(tmp_path: Path) -> None:
    agent_ws = tmp_path / "agent-ws"
    project = tmp_path / "project"
    project.mkdir()
    (project / "AGENTS.md").write_text("project-rule\n")
    [sent] = await system_messages(tmp_path, project, lambda url: identity_config(url, agent_ws))
    with trio.fail_after(CEILING_SECS):
        shown = await show_system_prompt(tmp_path / "cfg", project)
    assert shown == sent + "\n"
    assert "project-rule" in shown
    assert "### SOUL.md" in shown


async def test_aieos_identity_comes_first_then_the_files(tmp_path: Path) -> None:
    agent_ws = tmp_path / "agent-ws"
    project = tmp_path / "project"
    project.mkdir()

    def config(url: str) -> JsonDict:
        document = identity_config(url, agent_ws)
        document["agents"][AGENT]["identity"] = {
            "format": "aieos",
            "aieos_inline": '{"identity": {"names": {"first": "Ada", "last": "Quill"}}}',
        }
        return document

    [system] = await system_messages(tmp_path, project, config)
    context = system.index("## Project Context")
    identity = system.index("## Identity\n\n**Name:** Ada\n**Full Name:** Ada Quill")
    assert context < identity < system.index("### SOUL.md")
    assert "The following workspace files define your identity" not in system
