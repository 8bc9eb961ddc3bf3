"""acpx's terminal output for an ACP agent's frames, and how it answers approvals.

A pure model kept from the agent's messages; each part follows a file of the npm
package ``acpx`` (read at 0.19.1):

* ``dist/output-*.js`` (``TextOutputFormatter.renderToolUpdate``, ``mergeToolTitle``,
  ``renderToolState``, ``toStatusLabel``): tool calls are merged by ``toolCallId`` (a
  title only when it is a non-blank string); ``[tool] <title> (<status>)`` is printed
  once when a call is first seen unfinished (``running`` for anything but ``pending``)
  and once when it ends. Every ``tool_call`` is printed, so one sent after a cancel is
  drawn as a tool.
* ``dist/queue-owner-runtime-*.js`` (``promptForToolPermission``,
  ``resolvePermissionByPolicy``, ``pickOption``): a permission request is the question
  ``[permission] Allow <title> [<kind>]? (y/N)``; "y" (or the ``approve-all`` mode, or
  ``approve-reads`` for ``read``/``search`` kinds) sends the first ``allow_once`` option
  (else ``allow_always``), "N" (or ``deny-all``, or no terminal) the first
  ``reject_once`` (else ``reject_always``).
* ``dist/queue-owner-runtime-*.js`` (the ``current_mode_update`` handler of the session
  record) and ``dist/cli.js`` (``printTextStatus``): ``acpx <agent> status`` prints
  ``mode: <id>``, the ``currentModeId`` of the last ``current_mode_update``, else
  ``mode: -``; ``set-mode`` is ``session/set_mode`` only (no config option fallback).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tests.client_session import SessionModel

FINAL: Final = frozenset({"completed", "failed"})


def _pick(options: Iterable[Mapping[str, Any]], kinds: tuple[str, ...]) -> str | None:
    listed = list(options)
    for kind in kinds:
        for option in listed:
            if option.get("kind") == kind:
                return str(option["optionId"])
    return None


@dataclass
class AcpxOutput(SessionModel):
    lines: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    """The ``[permission] …`` questions asked, in order."""
    current_mode_id: str | None = None
    """What ``status`` shows as ``mode:`` (from ``current_mode_update`` only)."""
    _states: dict[str, dict[str, Any]] = field(default_factory=dict)
    _started: set[str] = field(default_factory=set)

    def on_update(self, update: Mapping[str, Any]) -> None:
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif update.get("sessionUpdate") == "current_mode_update":
            self.current_mode_id = update["currentModeId"]

    @property
    def status_mode_line(self) -> str:
        """The ``mode:`` line of ``acpx <agent> status``."""
        return f"mode: {self.current_mode_id or '-'}"

    def on_permission(self, params: Mapping[str, Any]) -> None:
        tool_call = params["toolCall"]
        title = tool_call.get("title") or "tool"
        self.questions.append(
            f"[permission] Allow {title} [{tool_call.get('kind') or 'other'}]? (y/N)"
        )

    def _tool(self, update: Mapping[str, Any]) -> None:
        call_id = update["toolCallId"]
        state = self._states.setdefault(call_id, {})
        title = update.get("title")
        if isinstance(title, str) and title.strip():
            state["title"] = title
        for key in ("status", "kind"):
            if key in update:
                state[key] = update[key]
        status = state.get("status")
        if status not in FINAL:
            if call_id in self._started:
                return
            self._started.add(call_id)
        label = status if status in FINAL or status == "pending" else "running"
        self.lines.append(f"[tool] {state.get('title', call_id)} ({label})")

    @staticmethod
    def answer(request: Mapping[str, Any], *, yes: bool) -> str | None:
        """The optionId acpx sends when the person types "y" (``yes``) or "N"."""
        options = request["params"]["options"]
        kinds = ("allow_once", "allow_always") if yes else ("reject_once", "reject_always")
        return _pick(options, kinds)
