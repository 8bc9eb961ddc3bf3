"""Every string argument of every tool, a lone surrogate in it: a failed call the model
can read, never a failed turn, and the turn is stored.

The tools and their string arguments are read from the registry (``build_tools``, plus a
skill's tool and ``read_skill``) and from each tool's JSON Schema, nested objects, arrays
and header maps included, so a tool added later is covered without touching this file.
Each call runs a whole turn through the in-memory server with a session store: policy,
card, approval, tool, report, commit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_server.agent.skills.loader import LoadedSkills
from acp_server.agent.skills.manifest import Skill, SkillTool
from acp_server.agent.skills.tools import ReadSkillTool, SkillShellTool
from acp_server.agent.tools._args import unreadable_argument
from acp_server.agent.tools.base import Tool
from acp_server.agent.tools.registry import build_tools
from acp_server.config.values import WebConfig
from acp_server.model import ChatMessage, ToolCall
from acp_server.protocol.services.prompt import UNSAVED_TURN_WARNING
from acp_server.storage import open_store
from acp_server.storage.codec import encode_message
from tests.helpers import make_config
from tests.server.server_harness import (
    ScriptedProvider,
    answer,
    open_server,
    text_round,
    tool_round,
)

Path_ = tuple[str | int, ...]
"""Where a string sits in the arguments: keys and list indexes; "*" is a map's key."""

_SKILL = Skill(
    name="notes",
    description="Notes",
    location=Path("/nonexistent/SKILL.toml"),
    directory=Path("/nonexistent"),
    tools=(SkillTool("add", "Add a note", "shell", "echo {{msg}}", (("msg", "The note"),)),),
)


def registry() -> list[Tool]:
    tools: list[Tool] = list(build_tools(web=WebConfig()).values())
    tools.append(SkillShellTool(_SKILL, _SKILL.tools[0]))
    tools.append(ReadSkillTool(lambda: LoadedSkills(skills=(_SKILL,))))
    return tools


def _example(schema: dict[str, Any]) -> Any:
    """A plausible value of ``schema`` (its required parts only)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: _example(properties[name]) for name in schema.get("required", ())}
    if kind == "array":
        return [_example(schema.get("items", {}))]
    return {"integer": 1, "number": 1, "boolean": False}.get(str(kind), "x")


def string_slots(schema: dict[str, Any], here: Path_ = ()) -> Iterator[Path_]:
    """Every place a string goes in arguments of ``schema``."""
    kind = schema.get("type")
    if kind == "string":
        yield here
    for name, inner in schema.get("properties", {}).items():
        yield from string_slots(inner, (*here, name))
    if kind == "array" and isinstance(schema.get("items"), dict):
        yield from string_slots(schema["items"], (*here, 0))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield (*here, "*")  # the map's key
        yield from string_slots(extra, (*here, "value"))


def _with(arguments: Any, slot: Path_, text: str) -> Any:
    """``arguments`` with ``text`` put at ``slot`` (missing containers made)."""
    if not slot:
        return text
    head, rest = slot[0], slot[1:]
    if head == "*":
        return {text: "x"}
    if isinstance(head, int):
        items = list(arguments) if isinstance(arguments, list) and arguments else [{}]
        items[0] = _with(items[0], rest, text)
        return items
    mapping = dict(arguments) if isinstance(arguments, dict) else {}
    key = "X-Test" if head == "value" and "value" not in mapping else head
    mapping[str(key)] = _with(mapping.get(str(key), {}), rest, text)
    return mapping


CASES = [
    pytest.param(tool, slot, id=f"{tool.name}:{'.'.join(map(str, slot))}")
    for tool in registry()
    for slot in string_slots(tool.parameters)
]
SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
UNREADABLE = st.tuples(st.text(max_size=6), SURROGATES, st.text(max_size=6)).map("".join)


def test_every_tool_has_its_string_arguments_covered() -> None:
    covered = {tool.name for tool in registry() if any(string_slots(tool.parameters))}
    assert covered == {tool.name for tool in registry()}


@pytest.mark.parametrize(("tool", "slot"), CASES)
@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=UNREADABLE)
def test_a_lone_surrogate_in_any_argument_fails_only_the_call(
    tmp_path: Path, tool: Tool, slot: Path_, text: str
) -> None:
    base = _example(tool.parameters)
    arguments = _with(base, slot, text)
    trio.run(_one_turn, tmp_path, tool, arguments)


async def _one_turn(tmp_path: Path, tool: Tool, arguments: dict[str, Any]) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    config = make_config(tmp_path / "cfg")
    store = await open_store(tmp_path / "sessions.db")
    provider = ScriptedProvider([tool_round(tool.name, arguments), text_round("done")])
    try:
        with trio.fail_after(20):
            async with open_server(config, provider=provider, tools=[tool], store=store) as client:
                session_id = await client.new_session(workspace)
                reply = await client.call(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
                    on_request=answer("allow-once"),
                )
                updates = client.updates(session_id)
    finally:
        await store.aclose()
    assert "result" in reply, reply  # not -32603: the turn went on
    [finished] = [
        update
        for update in updates
        if update["sessionUpdate"] == "tool_call_update"
        and update.get("status") in ("completed", "failed")
    ]
    assert finished["status"] == "failed", finished
    assert "not text" in str(finished["rawOutput"]), finished
    shown = "".join(
        str(update.get("content"))
        for update in updates
        if update["sessionUpdate"] == "agent_message_chunk"
    )
    assert UNSAVED_TURN_WARNING not in shown


ANY_TEXT = st.text(alphabet=st.one_of(st.characters(), SURROGATES), max_size=5)


@given(
    arguments=st.dictionaries(
        ANY_TEXT,
        st.recursive(
            st.one_of(ANY_TEXT, st.integers(), st.booleans(), st.none()),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner),
            max_leaves=8,
        ),
        max_size=3,
    )
)
def test_arguments_are_refused_exactly_when_they_cannot_be_sent_as_text(
    arguments: dict[str, Any],
) -> None:
    try:
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        assert unreadable_argument(arguments) is not None
    else:
        assert unreadable_argument(arguments) is None


def test_unreadable_argument_paths() -> None:
    assert unreadable_argument({"todos": [{"content": "ok"}, {"content": "x\udc00"}]}) == (
        "Invalid 'todos[1].content': contains the unpaired surrogate \\udc00 at position 1, "
        "which is not text"
    )
    assert unreadable_argument({"h": {"\ud800": "v"}}) == (
        "Invalid argument name '\\\\ud800' in 'h': it is not text"
    )
    assert unreadable_argument({"path": "caf\u00e9", "n": 1, "l": [True, None]}) is None


@given(text=UNREADABLE)
def test_stored_arguments_keep_a_lone_surrogate(text: str) -> None:
    call = ToolCall(id="c", name="file_read", arguments={"path": text, "k": [text]})
    encoded = encode_message(ChatMessage(role="assistant", content="", tool_calls=(call,)))
    [row] = encoded.tool_rows
    payload = row[3]
    payload.encode("utf-8")  # what a database stores
    assert json.loads(payload) == call.arguments
