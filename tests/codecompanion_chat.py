"""CodeCompanion.nvim's chat buffer, as it draws an ACP agent's frames.

A pure model of what a person sees, kept from the agent's messages; each part follows
one file of olimorris/codecompanion.nvim (read at f1afd02):

* ``lua/codecompanion/interactions/chat/acp/handler.lua`` (``process_tool_call``,
  ``merge_tool_call``): a tool call's fields are merged by ``toolCallId`` (a ``null``
  never overwrites); a ``pending`` call is held back; otherwise its one line is drawn.
* ``lua/codecompanion/interactions/chat/acp/formatters.lua`` (``tool_message``,
  ``build_label``, ``parse_title``, ``clean_for_buffer``): the line is
  ``"<Kind>: <target>"``, the target being the diff's path, else the first location's,
  else what ``parse_title`` takes from the title (a leading backticked span whole), with
  backticks and the working directory removed.
* ``lua/codecompanion/interactions/chat/acp/request_permission.lua`` (``M.confirm``,
  ``build_choices``, ``ACP_OPTIONS``): a request with a diff shows
  ``Proposed edits for `<path>`:``; any other shows ``"<Kind>: <title>"`` and no content.
  The choices are labelled by kind (never by the option's name), only the kinds that
  have a key are listed, and options of one kind share that key, so pressing it sends
  the last of them.
* ``lua/codecompanion/interactions/chat/slash_commands/builtin/resume.lua``
  (``format_session``): ``/resume`` lists each session as its title, else its id; a
  ``null`` title is a truthy ``vim.NIL`` that ``table.concat`` refuses (the picker fails).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tests.client_session import SessionModel

KIND_LABELS: Final = {
    "allow_once": "Accept",
    "allow_always": "Always accept",
    "reject_once": "Reject",
}
"""``ACP_OPTIONS`` entries that have a keymap (``reject_always`` has a label, no key)."""
MAX_TITLE_BYTES: Final = 60


class ResumePickerCrashed(Exception):
    """``/resume`` failed: ``table.concat`` met a ``vim.NIL`` (a ``null`` title)."""


@dataclass
class PermissionPrompt:
    """One approval prompt: the line shown and the choices under it."""

    option_ids: list[str]
    text: str
    choices: list[tuple[str, str]]
    """``(label, optionId)`` in the order listed."""

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.choices]

    def press(self, label: str) -> str:
        """The optionId sent when the key of ``label`` is pressed: options of one kind
        share a key, and the last mapping of a key wins."""
        return [option_id for shown, option_id in self.choices if shown == label][-1]


@dataclass
class CodeCompanionChat(SessionModel):
    cwd: str
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines: dict[str, str] = field(default_factory=dict)
    """The tool line of each call drawn so far, by ``toolCallId``."""
    prompts: list[PermissionPrompt] = field(default_factory=list)

    def on_update(self, update: Mapping[str, Any]) -> None:
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            self._tool(update)

    def on_permission(self, params: Mapping[str, Any]) -> None:
        self.prompts.append(self.prompt_of(params))

    def _tool(self, update: Mapping[str, Any]) -> None:
        call_id = update["toolCallId"]
        merged = dict(self.tools.get(call_id, {}))
        merged.update({key: value for key, value in update.items() if value is not None})
        self.tools[call_id] = merged
        if merged.get("status") == "pending":
            return
        self.lines[call_id] = self._clean(self._label(merged))

    def _label(self, call: Mapping[str, Any]) -> str:
        kind = _format_kind(call.get("kind") or "other")
        for block in call.get("content") or ():
            if block.get("type") == "diff" and isinstance(block.get("path"), str):
                return f"{kind}: {self._relative(block['path'])}"
        locations = call.get("locations") or ()
        if locations and isinstance(locations[0].get("path"), str):
            return f"{kind}: {self._relative(locations[0]['path'])}"
        return f"{kind}: {parse_title(call.get('title') or 'Tool call')}"

    def _relative(self, path: str) -> str:
        if path.startswith(self.cwd.rstrip("/") + "/"):
            return posixpath.normpath(path[len(self.cwd.rstrip("/")) + 1 :])
        return posixpath.normpath(path)

    def _clean(self, text: str) -> str:
        return text.replace("`", "").replace(self.cwd.rstrip("/") + "/", "")

    def prompt_of(self, params: Mapping[str, Any]) -> PermissionPrompt:
        """The approval prompt drawn for a request's params."""
        tool_call = params.get("toolCall") or {}
        options = params.get("options") or []
        choices = [
            (KIND_LABELS[option["kind"]], option["optionId"])
            for option in options
            if option.get("kind") in KIND_LABELS
        ]
        content = tool_call.get("content") or []
        first = content[0] if content else {}
        if first.get("type") == "diff" and (first.get("oldText") or first.get("newText")):
            locations = tool_call.get("locations") or []
            path = locations[0]["path"] if locations else first["path"]
            text = f"Proposed edits for `{self._relative(path)}`:"
        else:
            kind = str(tool_call.get("kind") or "Permission")
            text = f"{kind[:1].upper()}{kind[1:]}: {tool_call.get('title') or 'Agent requested permission'}"
        return PermissionPrompt([o["optionId"] for o in options], text, choices)


def parse_title(title: str) -> str:
    """``parse_title`` of formatters.lua, byte for byte on its Lua patterns."""
    title = title.lstrip()
    if not title:
        return "Tool call"
    backticked = re.match(r"`([^`]+)`", title)
    if backticked:
        return backticked.group(1)
    quoted = re.match(r'"([^"]+)"', title)
    if quoted:
        return quoted.group(1)
    title = re.sub(r"\s*=>.*\Z", "", title, flags=re.DOTALL)
    title = re.sub(r"\s*—.*\Z", "", title, flags=re.DOTALL)
    before = re.match(r"\s*([^:]+)\s*:", title)
    if before and len(before.group(1).encode()) < 40:
        after = re.match(r"\s*[^:]+\s*:\s*(.+)", title, flags=re.DOTALL)
        if not (after and re.match(r"//|https?://", after.group(1))):
            title = before.group(1)
    title = title.rstrip()
    raw = title.encode()
    if len(raw) > MAX_TITLE_BYTES:
        title = raw[: MAX_TITLE_BYTES - 3].decode(errors="ignore") + "..."
    return title or "Tool call"


def _format_kind(kind: str) -> str:
    spaced = kind.replace("_", " ")
    return spaced[:1].upper() + spaced[1:]


def resume_picker(sessions: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``/resume`` picker's entries (without the relative time): each session's title,
    else its id.

    Raises:
        ResumePickerCrashed: a session's ``title`` is ``null``.
    """
    entries = []
    for session in sessions:
        if "title" in session:
            if session["title"] is None:
                raise ResumePickerCrashed("invalid value (userdata) in table for 'concat'")
            entries.append(str(session["title"]))
        else:
            entries.append(str(session["sessionId"]))
    return entries
