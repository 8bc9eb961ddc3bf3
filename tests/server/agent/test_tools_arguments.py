"""Each tool's arguments have one definition: the JSON Schema the model is sent and the
check its calls go through are the same Struct (acp_server/agent/tools/arguments.py).

For every tool of the registry (the built-ins, a skill's tools, read_skill): the schema
sent is the Struct's, flat; arguments drawn from that schema (``values_of``, each checked
valid by ``jsonschema``, an independent reading of the schema) are accepted; the same
arguments made invalid in one place (checked invalid by ``jsonschema``) are refused with a
message naming the argument.
The schemas the model sees are kept in tool_schemas.json beside this file, so that a
change to them is a change to that file too. Run this module to rewrite it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from acp_server.agent.skills.loader import LoadedSkills
from acp_server.agent.skills.manifest import Skill, SkillTool
from acp_server.agent.skills.tools import ReadSkillTool, SkillShellTool
from acp_server.agent.tools.arguments import ToolArguments, arguments_schema, parse_arguments
from acp_server.agent.tools.base import RefusedCall, Tool
from acp_server.agent.tools.registry import build_tools, definition_of, tool_specs
from acp_server.config.values import WebConfig

SNAPSHOT: Final = Path(__file__).with_name("tool_schemas.json")

_SKILL: Final = Skill(
    name="notes",
    description="Notes",
    location=Path("/nonexistent/SKILL.toml"),
    directory=Path("/nonexistent"),
    tools=(
        SkillTool(
            "add",
            "Add a note",
            "shell",
            "echo {{msg}} {{file-name}}",
            (("msg", "The note"), ("file-name", "")),
        ),
        SkillTool("today", "The date", "shell", "date", ()),
    ),
)


def registry() -> list[Tool]:
    tools: list[Tool] = list(build_tools(web=WebConfig()).values())
    tools += [SkillShellTool(_SKILL, entry) for entry in _SKILL.tools]
    tools.append(ReadSkillTool(lambda: LoadedSkills(skills=(_SKILL,))))
    return tools


def struct_of(tool: Tool) -> type[ToolArguments]:
    struct = definition_of(tool, tool.name).arguments
    assert struct is not None, f"{tool.name} declares no argument Struct"
    assert issubclass(struct, ToolArguments)
    return struct


def parse(tool: Tool, arguments: dict[str, Any]) -> Any:
    return parse_arguments(struct_of(tool), arguments)


TOOLS: Final = [pytest.param(tool, id=tool.name) for tool in registry()]


def seen_by_the_model() -> dict[str, dict[str, Any]]:
    return {spec.name: spec.parameters for spec in tool_specs(registry())}


@pytest.mark.parametrize("tool", TOOLS)
def test_the_schema_sent_is_the_structs_and_flat(tool: Tool) -> None:
    [spec] = tool_specs([tool])
    assert spec.parameters == arguments_schema(struct_of(tool))
    Draft202012Validator.check_schema(spec.parameters)
    text = json.dumps(spec.parameters)
    assert "$ref" not in text
    assert "$defs" not in text
    assert spec.parameters["type"] == "object"
    assert spec.parameters["additionalProperties"] is False
    assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])


def test_the_schemas_the_model_sees_are_the_snapshot() -> None:
    expected = json.loads(SNAPSHOT.read_text())
    assert seen_by_the_model() == expected, (
        "the tools' schemas changed: if that is meant, rewrite the snapshot with "
        "`uv run python tests/server/agent/test_tools_arguments.py` and say why in the commit"
    )


_KNOWN_KEYWORDS: Final = frozenset(
    {"type", "description", "properties", "required", "additionalProperties", "items",
     "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "enum", "default"}
)  # fmt: skip


def values_of(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under ``schema``, for the keywords the tools' schemas use (a keyword
    this does not know fails the test, so it is taught before it is used)."""
    unknown = set(schema) - _KNOWN_KEYWORDS
    assert not unknown, f"values_of does not know {unknown}"
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength"))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(
            values_of(schema["items"]),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 3), 3),
        )
    assert kind == "object", schema
    properties: dict[str, Any] = schema.get("properties", {})
    required = {name: values_of(properties[name]) for name in schema.get("required", ())}
    optional = {
        name: values_of(inner) for name, inner in properties.items() if name not in required
    }
    fixed = st.fixed_dictionaries(required, optional=optional)
    extra = schema.get("additionalProperties", {})
    if extra is False:
        return fixed
    others = st.dictionaries(
        st.text().filter(lambda name: name not in properties),
        values_of(extra) if extra else st.none() | st.integers() | st.text(),
        max_size=2,
    )
    return st.tuples(fixed, others).map(lambda both: {**both[1], **both[0]})


_SETTINGS: Final = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.parametrize("tool", TOOLS)
@_SETTINGS
@given(data=st.data())
def test_arguments_valid_under_the_schema_are_accepted(tool: Tool, data: st.DataObject) -> None:
    arguments = data.draw(values_of(tool.parameters))
    assert Draft202012Validator(tool.parameters).is_valid(arguments), arguments
    parse(tool, arguments)


Slot = tuple[tuple[str | int, ...], dict[str, Any], bool]
"""Where a value sits in the arguments, its schema, and whether it may be left out."""


def slots(schema: dict[str, Any], value: Any, here: tuple[str | int, ...] = ()) -> Iterator[Slot]:
    """Every value in ``value`` (arguments of ``schema``) with its schema, depth first."""
    if isinstance(value, dict) and "properties" in schema:
        for name, item in value.items():
            inner = schema["properties"].get(name)
            if inner is not None:
                yield (*here, name), inner, name not in schema.get("required", ())
                yield from slots(inner, item, (*here, name))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield (*here, index), schema["items"], False
            yield from slots(schema["items"], item, (*here, index))


def put(arguments: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """A copy of ``arguments`` with ``value`` at ``path``."""
    if not path:
        return value
    copy = json.loads(json.dumps(arguments))
    copy[path[0]] = put(arguments[path[0]], path[1:], value)
    return copy


def breaking(schema: dict[str, Any], value: Any) -> list[Any]:
    """Values to put in place of ``value`` that its ``schema`` may refuse: other JSON
    types, and each limit of the schema overstepped."""
    found: list[Any] = [True, 7, 1.5, "x", [], {}, None]
    if "minLength" in schema:
        found.append("")
    if "maxLength" in schema:
        found.append("a" * (schema["maxLength"] + 1))
    if "minimum" in schema:
        found.append(schema["minimum"] - 1)
    if "maximum" in schema:
        found.append(schema["maximum"] + 1)
    if "enum" in schema:
        found.append(f"not-{schema['enum'][0]}")
    if "maxItems" in schema and isinstance(value, list) and value:
        found.append([value[0]] * (schema["maxItems"] + 1))
    return found


@pytest.mark.parametrize("tool", TOOLS)
@_SETTINGS
@given(data=st.data())
def test_arguments_invalid_under_the_schema_are_refused_naming_the_argument(
    tool: Tool, data: st.DataObject
) -> None:
    schema = tool.parameters
    validator = Draft202012Validator(schema)
    arguments = data.draw(values_of(schema))
    mutations: list[tuple[str, Any]] = []
    for name in schema["required"]:
        mutations.append((name, {key: item for key, item in arguments.items() if key != name}))
    unknown = "not_an_argument"
    assert unknown not in schema["properties"]
    mutations.append((unknown, {**arguments, unknown: 1}))
    for path, inner, optional in slots(schema, arguments):
        for value in breaking(inner, arguments):
            # An optional argument given as null is taken as not given (arguments.py).
            if value is None and optional:
                continue
            mutations.append((str(path[0]), put(arguments, path, value)))
    named, broken = data.draw(
        st.sampled_from([(name, args) for name, args in mutations if not validator.is_valid(args)])
    )
    with pytest.raises(RefusedCall) as refused:
        parse(tool, broken)
    assert named in str(refused.value), (broken, str(refused.value))


@pytest.mark.parametrize(
    ("tool_name", "arguments", "message"),
    [
        ("file_read", {}, "Missing or invalid 'path': expected a non-empty string"),
        ("file_read", {"path": ""}, "'path' must not be empty"),
        ("file_read", {"path": "a", "offset": 0}, "Invalid 'offset': must be at least 1"),
        ("file_read", {"path": "a", "limit": True}, "Invalid 'limit': expected an integer"),
        (
            "file_read",
            {"file_path": "a"},
            "Unknown argument 'file_path' (the arguments are: path, offset, limit)",
        ),
        ("content_search", {"pattern": "x", "max_results": 5000}, "Invalid 'max_results': must be at most 1000"),
        ("content_search", {"pattern": "x", "case_sensitive": "no"}, "Invalid 'case_sensitive': expected true or false"),
        ("ask_user", {"question": "?", "choices": ["ok", 3]}, "Invalid 'choices': expected a list of non-empty strings"),
        ("ask_user", {"question": "?", "choices": ["a"] * 21}, "Too many choices: 21 (limit: 20)"),
        ("ask_user", {"question": "x" * 4001}, "'question' is too long (limit: 4000 characters)"),
        ("escalate_to_human", {"summary": "s", "urgency": "meh"}, "Invalid 'urgency': 'meh' (one of low, medium, high, critical)"),
        ("todo_write", {"todos": "a"}, "Missing or invalid 'todos': expected a list of objects with content and status"),
        ("todo_write", {"todos": [1]}, "Invalid 'todos[0]': expected an object with content and status"),
        (
            "todo_write",
            {"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "done"}]},
            "Invalid 'todos[1].status': 'done' (one of pending, in_progress, completed)",
        ),
        ("http_request", {"url": "u", "headers": {"A": 1}}, "Invalid 'headers': expected an object of strings"),
        ("http_request", {"url": "u", "method": "FETCH"}, "Invalid 'method': 'FETCH' (one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS)"),
        ("notes__add", {"msg": "m"}, "Missing or invalid 'file-name': expected a string"),
        ("file_read", {"path": "x\ud800"}, "Invalid 'path': contains the unpaired surrogate \\ud800 at position 1, which is not text"),
    ],
)  # fmt: skip
def test_refusals_name_the_argument_and_what_it_should_be(
    tool_name: str, arguments: dict[str, Any], message: str
) -> None:
    [tool] = [tool for tool in registry() if tool.name == tool_name]
    with pytest.raises(RefusedCall) as refused:
        parse(tool, arguments)
    assert str(refused.value) == message


def test_what_the_hand_written_checks_accepted_is_still_accepted() -> None:
    tools = {tool.name: tool for tool in registry()}
    read = parse(tools["file_read"], {"path": "a", "offset": 3.0, "limit": None})
    assert (read.offset, read.limit) == (3, None)
    request = parse(tools["http_request"], {"url": "u", "method": "post", "body": None})
    assert request.method == "POST"
    assert parse(tools["ask_user"], {"question": "?", "choices": []}).choices == []
    todo = {"content": "a", "status": "pending", "id": "1", "priority": None}
    [item] = parse(tools["todo_write"], {"todos": [todo]}).todos
    assert item.priority is None


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(seen_by_the_model(), indent=2, sort_keys=True) + "\n")
    sys.exit(0)
