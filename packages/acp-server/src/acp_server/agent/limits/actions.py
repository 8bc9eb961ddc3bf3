"""The runtime profile's ``max_actions_per_hour``: a sliding one-hour window per session.

A counted tool call takes a slot before it runs, and a call that started keeps it
(stamped with the time it ended) for the next hour whatever its outcome: a command that
did its damage and then exited 1 was an action, as was one cancelled halfway. Only a
call refused before running uses nothing: the policy denied it, the operator rejected it,
or the tool refused its arguments before doing anything (``ToolOutput.ran`` False). A
call refused because every slot is taken does not run: the model gets
``RATE_LIMIT_ERROR`` as its result and the turn goes on. The approval prompt, when the
policy asks, comes first. The window lives in memory: a session restored with
``session/load`` or ``session/resume`` starts with a full budget.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from acp_server.agent.tools.mcp_names import MCP_TOOL_PREFIX

ACTION_WINDOW_SECS: Final = 3600.0
RATE_LIMIT_ERROR: Final = "Rate limit exceeded: too many actions in the last hour"
"""ZeroClaw's tool result text for a call over the budget (behind ``Error: ``)."""

COUNTED_TOOLS: Final = frozenset(
    {
        "shell",
        "file_read",
        "file_write",
        "file_edit",
        "glob_search",
        "content_search",
        "deliver_file",
        "web_fetch",
        "http_request",
        "ask_user",
        "escalate_to_human",
    }
)
"""The built-in tools ZeroClaw's implementation counts as actions (todo_write is not one)."""


def counts_as_action(tool_name: str) -> bool:
    """Whether a call of ``tool_name`` uses the budget: the counted built-ins and skill
    tools (``<skill>__<tool>``, shell commands); MCP tools are not counted."""
    if tool_name in COUNTED_TOOLS:
        return True
    return "__" in tool_name and not tool_name.startswith(MCP_TOOL_PREFIX)


class ActionBudget:
    """At most ``max_per_hour`` counted calls started in any ``ACTION_WINDOW_SECS``
    (None: no limit). ``clock`` returns seconds on a monotonic scale (trio's clock in a
    session, so tests can run the hour on a fake clock)."""

    def __init__(self, max_per_hour: int | None, clock: Callable[[], float]) -> None:
        self.max_per_hour = max_per_hour
        self._clock = clock
        self._committed: deque[float] = deque()
        self._in_flight = 0

    def reserve(self) -> bool:
        """Take a slot for a call about to run; False when the window is full."""
        if self.max_per_hour is None:
            return True
        horizon = self._clock() - ACTION_WINDOW_SECS
        while self._committed and self._committed[0] <= horizon:
            self._committed.popleft()
        if len(self._committed) + self._in_flight >= self.max_per_hour:
            return False
        self._in_flight += 1
        return True

    def settle(self, *, ran: bool) -> None:
        """The reserved call ended: one that ran (whatever its outcome) keeps its slot for
        an hour from now; one refused before doing anything gives it back."""
        if self.max_per_hour is None:
            return
        self._in_flight = max(0, self._in_flight - 1)
        if ran:
            self._committed.append(self._clock())

    @property
    def used(self) -> int:
        """Slots taken now (calls that ran in the window plus calls still running)."""
        return len(self._committed) + self._in_flight
