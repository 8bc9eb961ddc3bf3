"""avante.nvim's sidebar, as it draws an ACP agent's frames and answers its approvals.

A pure model kept from the agent's messages; each part follows one file of
yetone/avante.nvim (read at a933431):

* ``lua/avante/llm.lua`` (``add_tool_call_message``, the ``tool_call_update`` branch of
  ``on_session_update``, ``on_request_permission``): a ``tool_call`` opens a tool message
  whose input is its ``rawInput``; a ``tool_call_update`` or a permission request's
  ``toolCall`` (the same ``toolCallId``) is deep-merged into it, title included. Any
  ``tool_call`` opens a message, so one sent after a cancel is drawn as a tool.
* ``lua/avante/history/render.lua`` (``get_tool_display_name``): a tool is shown as its
  title followed by ``("<param>")``, the param being the input's command (first line),
  pattern or query, else its path, else the first location, relative to the project.
* ``lua/avante/ui/acp_confirm_adapter.lua`` (``generate_buttons_for_acp_options``,
  ``map_acp_options``) and ``lua/avante/llm_tools/helpers.lua`` (``M.confirm``,
  ``confirm_inline``): the buttons are the options' names sorted by name; a click
  approves only when the clicked optionId is ``allow``, ``allow_once`` or
  ``allow_always`` (the last also sets the session's "always yes"); the answer sent is
  then the last option of kind ``allow_once`` (yes), ``allow_always`` (always) or
  ``reject_once`` (no). With ``behaviour.auto_approve_tool_permissions`` (its default)
  nothing is shown and the answer is "yes".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tests.client_session import SessionModel

APPROVING_IDS: Final = frozenset({"allow", "allow_once", "allow_always"})


@dataclass
class ToolMessage:
    tool_call_id: str
    input: dict[str, Any]
    acp: dict[str, Any]


@dataclass
class AvanteChat(SessionModel):
    project_root: str
    messages: dict[str, ToolMessage] = field(default_factory=dict)
    always_yes: bool = False
    """Set by clicking an ``allow_always`` button: later requests are approved unseen."""

    def on_update(self, update: Mapping[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "tool_call":
            self.messages[update["toolCallId"]] = ToolMessage(
                update["toolCallId"], dict(update.get("rawInput") or {}), dict(update)
            )
        elif kind == "tool_call_update":
            self._merge(update)

    def on_permission(self, params: Mapping[str, Any]) -> None:
        self._merge(params["toolCall"])

    def _merge(self, update: Mapping[str, Any]) -> None:
        call_id = update["toolCallId"]
        tool = self.messages.get(call_id)
        if tool is None:
            tool = self.messages[call_id] = ToolMessage(call_id, {}, {})
        incoming = dict(update)
        if incoming.get("content") == []:
            del incoming["content"]
        tool.acp = _deep_extend(tool.acp, incoming)

    def display_name(self, tool_call_id: str) -> str:
        """What the sidebar shows as the tool's name (``get_tool_display_name``)."""
        tool = self.messages[tool_call_id]
        name = str(tool.acp.get("title") or tool.acp.get("kind") or "")
        param: str | None = None
        path: str | None = None
        for key in ("path", "rel_path", "filepath", "file_path"):
            if isinstance(tool.input.get(key), str):
                path = tool.input[key]
        for key in ("query", "pattern"):
            if isinstance(tool.input.get(key), str):
                param = tool.input[key]
        command = tool.input.get("command")
        if isinstance(command, str):
            first, *rest = command.split("\n")
            param = first + "..." if rest else first
        if param is None and path is not None:
            param = self._relative(path)
        if param is None:
            for location in tool.acp.get("locations") or ():
                if location.get("path"):
                    param = self._relative(location["path"])
                    break
        return name if param is None else f"{name}({json.dumps(param, ensure_ascii=False)})"

    def _relative(self, path: str) -> str:
        root = self.project_root.rstrip("/") + "/"
        return path[len(root) :] if path.startswith(root) else path

    def buttons(self, request: Mapping[str, Any]) -> list[str]:
        """The inline buttons of a permission request, as drawn."""
        return sorted(option["name"] for option in request["params"]["options"])

    def answer(
        self, request: Mapping[str, Any], clicked: str | None, *, auto_approve: bool = False
    ) -> str | None:
        """The optionId avante sends when the button named ``clicked`` is clicked (or,
        with ``auto_approve``, without showing anything)."""
        options = request["params"]["options"]
        by_kind: dict[str, str] = {}
        for option in options:  # the last option of each kind wins
            if option["kind"] in ("allow_once", "allow_always", "reject_once"):
                by_kind[option["kind"]] = option["optionId"]
        if self.always_yes or auto_approve:
            approved = True
        else:
            [clicked_id] = [o["optionId"] for o in options if o["name"] == clicked]
            approved = clicked_id in APPROVING_IDS
            if clicked_id == "allow_always":
                self.always_yes = True
        if approved and self.always_yes:
            return by_kind.get("allow_always")
        return by_kind.get("allow_once" if approved else "reject_once")


def _deep_extend(base: Mapping[str, Any], incoming: Mapping[str, Any]) -> dict[str, Any]:
    """``vim.tbl_deep_extend("force", base, incoming)`` for JSON objects."""
    merged = dict(base)
    for key, value in incoming.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_extend(merged[key], value)
        else:
            merged[key] = value
    return merged
