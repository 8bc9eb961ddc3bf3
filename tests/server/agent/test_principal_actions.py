"""Each gateway principal's hourly action budget (``[actions]``, agent/limits/actions.py):
the counter, its configuration, and the budget through real connections on trio's fake
clock, shared by every connection of one principal and by no one else."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.agent.limits.actions import (
    ACTION_WINDOW_SECS,
    RATE_LIMIT_ERROR,
    ActionBudget,
    PrincipalBudgets,
    SessionActions,
    principal_rate_limit_error,
)
from acp_server.agent.providers.base import ModelRequest, ProviderEvent
from acp_server.config import Config, ConfigError, load_config
from acp_server.config.values import ActionsConfig
from acp_server.testing import MemoryClient
from tests.helpers import echo_config, session_dir, write_config
from tests.server.server_harness import StubTool, harness_app, open_server, text_round, tool_round


def config_with(tmp_path: Path, actions: Any, **options: Any) -> Config:
    document = echo_config(**options)
    document["actions"] = actions
    return load_config(write_config(tmp_path / "cfg", document), environ={})


# -- configuration ---------------------------------------------------------------------


def test_actions_table_default_and_overrides(tmp_path: Path) -> None:
    actions = config_with(
        tmp_path,
        {
            "per_principal_per_hour": 30,
            "principals": {"ci-runner": {"max_actions_per_hour": 500}, "eve": {}},
        },
    ).actions
    assert actions.per_principal_per_hour == 30
    assert actions.principal_per_hour == {"ci-runner": 500}
    assert actions.principal_cap("ci-runner") == 500
    assert actions.principal_cap("alice") == 30
    assert actions.principal_cap("eve") == 30  # a table without the key keeps the default
    assert actions.principal_cap(None) is None  # the local operator is never held to it


def test_no_actions_table_caps_nobody(tmp_path: Path) -> None:
    document = echo_config()
    actions = load_config(write_config(tmp_path / "cfg", document), environ={}).actions
    assert actions == ActionsConfig()
    assert actions.principal_cap("alice") is None
    only_one = config_with(tmp_path / "b", {"principals": {"bob": {"max_actions_per_hour": 0}}})
    assert only_one.actions.principal_cap("bob") == 0
    assert only_one.actions.principal_cap("alice") is None


@pytest.mark.parametrize(
    ("actions", "key", "problem"),
    [
        ({"per_principal_per_hour": -1}, "actions.per_principal_per_hour", "must not be negative"),
        ({"per_principal_per_hour": "10"}, "actions.per_principal_per_hour", "expected"),
        ({"per_principal_per_hour": True}, "actions.per_principal_per_hour", "expected"),
        ({"per_principal_per_hour": 1.5}, "actions.per_principal_per_hour", "expected"),
        ({"principals": 3}, "actions.principals", "expected a table"),
        ({"principals": {"bob": 5}}, "actions.principals.bob", "expected a table"),
        (
            {"principals": {"bob": {"max_actions_per_hour": -2}}},
            "actions.principals.bob.max_actions_per_hour",
            "must not be negative",
        ),
        (
            {"principals": {"bob": {"max_actions_per_hour": "lots"}}},
            "actions.principals.bob.max_actions_per_hour",
            "expected",
        ),
        (
            {"principals": {"alice smith": {"max_actions_per_hour": 5}}},
            "actions.principals.alice smith",
            "only letters, digits",
        ),
        ({"principals": {"-x": {"max_actions_per_hour": 5}}}, "actions.principals.-x", "starts"),
    ],
)
def test_bad_values_name_the_key_and_the_problem(
    tmp_path: Path, actions: Any, key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_with(tmp_path, actions)
    message = str(caught.value)
    assert f"`{key}`" in message
    assert problem in message


def test_unknown_keys_are_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config_with(
            tmp_path,
            {"max_actions_per_hour": 5, "principals": {"bob": {"max_cost_per_day_cents": 1}}},
        )
    assert "unknown key `actions.max_actions_per_hour` ignored" in caplog.text
    assert "unknown key `actions.principals.bob.max_cost_per_day_cents` ignored" in caplog.text


# -- the counter -----------------------------------------------------------------------


def test_each_principal_has_one_budget_and_the_operator_none() -> None:
    caps = ActionsConfig(per_principal_per_hour=2, principal_per_hour={"bob": 5})
    budgets = PrincipalBudgets(caps.principal_cap, trio.current_time)
    alice = budgets.for_principal("alice")
    assert alice is not None
    assert budgets.for_principal("alice") is alice  # every session of alice's shares it
    bob = budgets.for_principal("bob")
    assert bob is not None
    assert bob is not alice
    assert (alice.max_per_hour, bob.max_per_hour) == (2, 5)
    assert budgets.for_principal(None) is None
    uncapped = PrincipalBudgets(ActionsConfig().principal_cap, trio.current_time)
    assert uncapped.for_principal("alice") is None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_principals_refusal_gives_the_sessions_slot_back() -> None:
    clock = FakeClock()
    shared = PrincipalBudgets(lambda _name: 1, clock).for_principal("alice")
    own = ActionBudget(5, clock)
    first, second = SessionActions(own, shared), SessionActions(ActionBudget(5, clock), shared)
    assert first.reserve() is None
    first.settle(ran=True)
    refusal = second.reserve()
    assert refusal == principal_rate_limit_error("alice", 1)
    assert refusal.startswith(RATE_LIMIT_ERROR)
    assert "`alice`" in refusal
    assert second.own.used == 0  # the refused call holds nothing
    assert own.used == 1
    clock.now += ACTION_WINDOW_SECS
    assert second.reserve() is None


def test_the_sessions_own_budget_is_checked_first_and_keeps_its_text() -> None:
    clock = FakeClock()
    shared = PrincipalBudgets(lambda _name: 10, clock).for_principal("alice")
    assert shared is not None
    actions = SessionActions(ActionBudget(1, clock), shared)
    assert actions.reserve() is None
    actions.settle(ran=False)  # refused before running: both slots come back
    assert shared.used == 0
    assert actions.reserve() is None
    actions.settle(ran=True)
    assert actions.reserve() == RATE_LIMIT_ERROR
    assert shared.used == 1  # the session's refusal took nothing from the principal


# -- through real connections ----------------------------------------------------------


class ToolsThenDone:
    """A provider whose every turn asks for ``calls`` tool calls of ``tool``, one per
    model call, then ends; it keeps each tool result it is sent."""

    model = "scripted"

    def __init__(self, tool: str, calls: int) -> None:
        self.tool = tool
        self.calls = calls
        self.serial = 0
        self.results: list[str] = []

    async def stream(self, request: ModelRequest) -> Any:
        done = 0
        for message in reversed(request.messages):
            if message.role == "user":
                break
            if message.role == "tool":
                done += 1
        if done:
            self.results.append(request.messages[-1].content)
        events: list[ProviderEvent]
        if done < self.calls:
            self.serial += 1
            events = tool_round(self.tool, {}, f"call-{self.serial}")
        else:
            events = text_round("done")
        for event in events:
            yield event


async def _turn(client: MemoryClient, cwd: Path) -> str:
    session_id = await client.new_session(cwd)
    result = await client.result(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    )
    stop: str = result["stopReason"]
    return stop


async def test_a_principals_budget_spans_its_connections_and_spares_the_others(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    config = config_with(
        tmp_path,
        {"per_principal_per_hour": 3, "principals": {"bob": {"max_actions_per_hour": 10}}},
        level="full",
    )
    tool = StubTool(name="file_read", side_effects=False)
    provider = ToolsThenDone("file_read", 2)
    app = harness_app(config, provider=provider, tools=[tool])
    cwd = session_dir(tmp_path)
    over = f"Error: {principal_rate_limit_error('alice', 3)}"
    ran = "stub output"
    async with (
        open_server(config, app=app, principal="alice") as alice_one,
        open_server(config, app=app, principal="alice") as alice_two,
        open_server(config, app=app, principal="bob") as bob,
        open_server(config, app=app) as operator,
    ):
        assert await _turn(alice_one, cwd) == "end_turn"
        # A second connection and a new session of alice's: one slot left, then refused,
        # and the turn goes on to its end.
        assert await _turn(alice_two, cwd) == "end_turn"
        assert provider.results == [ran, ran, ran, over]
        assert len(tool.calls) == 3
        provider.results.clear()
        assert await _turn(bob, cwd) == "end_turn"
        assert await _turn(operator, cwd) == "end_turn"
        assert provider.results == [ran] * 4
        assert await _turn(alice_one, cwd) == "end_turn"
        assert provider.results[4:] == [over, over]
        await trio.sleep(ACTION_WINDOW_SECS + 1)
        provider.results.clear()
        assert await _turn(alice_two, cwd) == "end_turn"
        assert provider.results == [ran, ran]
    assert len(tool.calls) == 9
