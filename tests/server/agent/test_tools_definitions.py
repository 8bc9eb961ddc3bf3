"""Each built-in tool's one ToolDefinition: kind, policy rules, presentation, lookup."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from acp_core.tools import approval_kind, tool_kind
from acp_server.agent.tools.base import ToolDefinition
from acp_server.agent.tools.registry import BUILTIN_TOOL_CLASSES, builtin_tools, definition_for
from acp_server.config import RiskProfileConfig
from acp_server.protocol.presentation.permissions import Asking, approval_request
from acp_server.security import Approval, SecurityPolicy

BUILTIN_NAMES = [tool.name for tool in builtin_tools()]


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_each_builtin_tool_carries_its_own_definition(name: str) -> None:
    definition = definition_for(name)
    assert definition.name == name
    [tool_class] = [cls for cls in BUILTIN_TOOL_CLASSES if cls.name == name]
    assert tool_class.definition is definition
    # ZeroClaw's name tables agree with what the tools declare.
    assert definition.kind == tool_kind(name)
    assert definition.presentation.approval_kind == approval_kind(name)


def test_tools_without_a_definition_get_zeroclaw_kind() -> None:
    assert definition_for("mcp__weather__get") == ToolDefinition("mcp__weather__get", "other")
    assert definition_for("cron_remove").kind == "delete"


def test_declared_path_arguments_are_jailed_before_asking(tmp_path: Path) -> None:
    policy = SecurityPolicy(RiskProfileConfig(), tmp_path)
    escapes = {
        "file_read": {"path": "../secret"},
        "file_write": {"path": "../x", "content": ""},
        "file_edit": {"path": "../x", "old_string": "a", "new_string": "b"},
        "content_search": {"pattern": "x", "path": "/etc"},
        "deliver_file": {"path": "sub/../a.txt"},  # any `..` at all
    }
    for name, arguments in escapes.items():
        decision = policy.decide(
            name, arguments, side_effects=False, rules=definition_for(name).rules
        )
        assert decision.approval is Approval.DENY, name
    # The same arguments under a name that declares no path argument are not judged here.
    plain = policy.decide("mcp__x__y", {"path": "../secret"}, side_effects=False)
    assert plain.approval is Approval.ASK


def test_edit_tools_present_a_diff_everywhere() -> None:
    arguments = {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}
    asking = Asking(reject_with_edit=True)
    params = approval_request("s", definition_for("file_edit"), arguments, asking=asking)
    prompt = msgspec.to_builtins(params.tool_call)
    assert prompt["kind"] == "edit"
    assert prompt["rawInput"] == {
        "tool": "file_edit",
        "summary": "path: a.py, old_string: x = 1, new_string: x = 2",
    }
    assert prompt["_meta"] == {"zeroclaw": {"proposedEdit": "x = 2"}}
    assert prompt["content"] == [
        {"type": "diff", "path": "a.py", "oldText": "x = 1", "newText": "x = 2"}
    ]
    shell = approval_request("s", definition_for("shell"), {"command": "ls"})
    assert msgspec.to_builtins(shell.tool_call)["rawInput"] == {"tool": "shell", "summary": "ls"}
