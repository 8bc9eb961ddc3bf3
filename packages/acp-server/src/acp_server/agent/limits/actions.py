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

A gateway principal may have a budget of its own (``[actions] per_principal_per_hour``,
``[actions.principals.<name>] max_actions_per_hour``): one window per principal and
process, shared by every session and connection that principal drives there, taken
after the session's own slot and with the same rules. A call over it is refused the same
way, the text naming the principal's cap. The windows live in the process's memory, so
each gateway replica counts its own calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from acp_server.agent.tools.builtin_set import BUILTIN_TOOL_NAMES
from acp_server.agent.tools.mcp_names import MCP_TOOL_PREFIX

ACTION_WINDOW_SECS: Final = 3600.0
RATE_LIMIT_ERROR: Final = "Rate limit exceeded: too many actions in the last hour"
"""ZeroClaw's tool result text for a call over the budget (behind ``Error: ``)."""


def principal_rate_limit_error(principal: str, cap: int) -> str:
    """The tool result text (behind ``Error: ``) for a call over ``principal``'s own
    hourly cap: ``RATE_LIMIT_ERROR`` first, so whatever reads that reads this too."""
    return (
        f"{RATE_LIMIT_ERROR} by principal `{principal}` ([actions] per_principal_per_hour "
        f"or [actions.principals.{principal}]: {cap} actions per hour)"
    )


COUNTED_TOOLS: Final = frozenset(BUILTIN_TOOL_NAMES) - {"todo_write"}
"""The built-in tools ZeroClaw's implementation counts as actions: all but todo_write,
which only records the plan."""


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


class PrincipalBudget(ActionBudget):
    """One gateway principal's budget: an ``ActionBudget`` that knows whose it is."""

    def __init__(self, principal: str, cap: int, clock: Callable[[], float]) -> None:
        super().__init__(cap, clock)
        self.principal = principal
        self.cap = cap

    @property
    def refusal(self) -> str:
        return principal_rate_limit_error(self.principal, self.cap)


class PrincipalBudgets:
    """Each gateway principal's ``PrincipalBudget`` on this process, made on first use
    with the cap ``cap_of`` gives it (None: that principal has none)."""

    def __init__(
        self, cap_of: Callable[[str | None], int | None], clock: Callable[[], float]
    ) -> None:
        self._cap_of = cap_of
        self._clock = clock
        self._budgets: dict[str, PrincipalBudget] = {}

    def for_principal(self, principal: str | None) -> PrincipalBudget | None:
        """The budget every session ``principal`` drives shares (None: not capped, as
        the local operator never is)."""
        if principal is None:
            return None
        budget = self._budgets.get(principal)
        if budget is None:
            cap = self._cap_of(principal)
            if cap is None:
                return None
            budget = self._budgets[principal] = PrincipalBudget(principal, cap, self._clock)
        return budget


class SessionActions:
    """The budgets one session's counted calls take a slot from: its own (the runtime
    profile's) and, over the gateway, its principal's."""

    def __init__(self, own: ActionBudget, shared: PrincipalBudget | None = None) -> None:
        self.own = own
        self.shared = shared

    def reserve(self) -> str | None:
        """Take a slot in each budget for a call about to run; the refusal text (behind
        ``Error: ``) when one is full, holding no slot then."""
        if not self.own.reserve():
            return RATE_LIMIT_ERROR
        if self.shared is not None and not self.shared.reserve():
            self.own.settle(ran=False)
            return self.shared.refusal
        return None

    def settle(self, *, ran: bool) -> None:
        """The reserved call ended (``ActionBudget.settle``, for each budget)."""
        self.own.settle(ran=ran)
        if self.shared is not None:
            self.shared.settle(ran=ran)
