"""A session's built-in tools made on first use (agent/tools/builtin_set.py) are the
registry's: the same names in the same order, the same tools once one is looked at."""

from __future__ import annotations

from acp_server.agent.tools.builtin_set import BUILTIN_TOOL_NAMES, BuiltinTools
from acp_server.agent.tools.registry import BUILTIN_TOOL_CLASSES, build_tools
from acp_server.config.values import WebConfig
from tests.meta.fresh_interpreter import modules_loaded_by


def test_the_names_are_the_registrys_in_its_order() -> None:
    assert tuple(tool_class.name for tool_class in BUILTIN_TOOL_CLASSES) == BUILTIN_TOOL_NAMES


def test_the_set_equals_what_the_registry_builds() -> None:
    web = WebConfig()
    lazy = BuiltinTools(web)
    built = build_tools(web=web)
    assert list(lazy) == list(built)
    assert len(lazy) == len(built)
    assert {name: type(tool) for name, tool in lazy.items()} == {
        name: type(tool) for name, tool in built.items()
    }
    assert lazy["http_request"].name == "http_request"
    assert "shell" in lazy
    assert "memory_recall" not in lazy
    assert lazy.get("memory_recall") is None


def test_each_tool_is_made_once() -> None:
    tools = BuiltinTools()
    assert tools["shell"] is tools["shell"]


def test_naming_the_tools_loads_none_of_their_modules() -> None:
    named = (
        "from acp_server.agent.tools.builtin_set import BuiltinTools\n"
        "tools = BuiltinTools(); names = tuple(tools); assert 'shell' in tools"
    )
    assert modules_loaded_by(named, ("acp_server",)) == [
        "acp_server",
        "acp_server.agent",
        "acp_server.agent.tools",
        "acp_server.agent.tools.builtin_set",
    ]
