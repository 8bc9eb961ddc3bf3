"""The runtime profile's action budget and the cost configuration: the pure pieces, and
the budget through a real connection on trio's fake clock."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.limits.actions import (
    ACTION_WINDOW_SECS,
    RATE_LIMIT_ERROR,
    ActionBudget,
    counts_as_action,
)
from acp_server.config import ConfigError, load_config
from acp_server.config.values import CostConfig, ModelPrice
from tests.helpers import echo_config, make_config, session_dir, write_config
from tests.server.server_harness import (
    ScriptedProvider,
    StubTool,
    open_server,
    text_round,
    tool_round,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_budget_refuses_beyond_the_limit_and_frees_slots_an_hour_after_each_call() -> None:
    clock = FakeClock()
    budget = ActionBudget(2, clock)
    assert budget.reserve()
    budget.settle(ran=True)
    clock.now += 600
    assert budget.reserve()
    budget.settle(ran=True)
    assert not budget.reserve()
    clock.now += ACTION_WINDOW_SECS - 600  # the first call leaves the window
    assert budget.reserve()
    assert not budget.reserve()  # one in flight plus one still in the window


def test_only_a_call_refused_before_running_gives_its_slot_back() -> None:
    budget = ActionBudget(1, FakeClock())
    assert budget.reserve()
    budget.settle(ran=False)
    assert budget.reserve()
    assert not budget.reserve()
    budget.settle(ran=True)  # it ran, whatever its outcome
    assert not budget.reserve()


def test_no_limit_and_zero() -> None:
    unlimited = ActionBudget(None, FakeClock())
    for _ in range(10_000):
        assert unlimited.reserve()
        unlimited.settle(ran=True)
    assert not ActionBudget(0, FakeClock()).reserve()


@given(st.lists(st.tuples(st.floats(0, 7200), st.booleans()), max_size=60), st.integers(0, 8))
def test_budget_never_holds_more_than_the_limit(steps: list[tuple[float, bool]], cap: int) -> None:
    clock = FakeClock()
    budget = ActionBudget(cap, clock)
    started: list[float] = []
    for advance, ran in steps:
        clock.now += advance
        recent = [t for t in started if t > clock.now - ACTION_WINDOW_SECS]
        allowed = budget.reserve()
        assert allowed == (len(recent) < cap)
        if allowed:
            budget.settle(ran=ran)
            if ran:
                started.append(clock.now)


def test_counted_tools_are_the_references() -> None:
    for name in ("shell", "file_read", "glob_search", "web_fetch", "http_request", "ask_user"):
        assert counts_as_action(name)
    for name in ("todo_write", "read_skill", "mcp__server__tool"):
        assert not counts_as_action(name)
    assert counts_as_action("deploy__run")  # a skill's shell tool


def runtime_config(tmp_path: Path, runtime: dict[str, Any]) -> Any:
    return make_config(tmp_path / "cfg", runtime=runtime)


def test_runtime_profile_budget_keys(tmp_path: Path) -> None:
    config = runtime_config(tmp_path, {"max_actions_per_hour": 5, "max_cost_per_day_cents": 250})
    profile = config.runtime_profiles["default"]
    assert profile.max_actions_per_hour == 5
    assert profile.max_cost_per_day_cents == 250
    unset = runtime_config(tmp_path / "b", {}).runtime_profiles["default"]
    assert unset.max_actions_per_hour is None
    assert unset.max_cost_per_day_cents is None


@pytest.mark.parametrize(
    ("key", "value"), [("max_actions_per_hour", -1), ("max_cost_per_day_cents", "5")]
)
def test_bad_budget_values_name_the_key(tmp_path: Path, key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"runtime_profiles.default.{key}"):
        runtime_config(tmp_path, {key: value})


def test_cost_table_defaults_and_rates(tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path / "a", echo_config()), environ={}).cost == (
        CostConfig()
    )
    document = echo_config()
    document["cost"] = {
        "daily_limit_usd": 2,
        "monthly_limit_usd": 20.5,
        "warn_at_percent": 80,
        "rates": {
            "providers": {
                "models": {"openai": {"gpt-x": {"input_per_mtok": 3, "output_per_mtok": 15}}}
            }
        },
    }
    cost = load_config(write_config(tmp_path / "b", document), environ={}).cost
    assert cost.daily_limit_usd == 2.0
    assert cost.monthly_limit_usd == 20.5
    assert cost.rates == {("openai", "gpt-x"): ModelPrice(3.0, 15.0)}


@given(
    st.dictionaries(
        st.sampled_from(["enabled", "daily_limit_usd", "monthly_limit_usd"]),
        st.one_of(st.booleans(), st.integers(-5, 5), st.floats(-5, 50), st.text(max_size=3)),
    )
)
def test_cost_table_is_parsed_or_refused_by_name(table: dict[str, Any]) -> None:
    document = echo_config()
    document["cost"] = table

    def valid(key: str, value: object) -> bool:
        if key == "enabled":
            return isinstance(value, bool)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and float(value) >= 0  # type: ignore[arg-type]

    with tempfile.TemporaryDirectory() as directory:
        config_dir = write_config(Path(directory), document)
        if not all(valid(key, value) for key, value in table.items()):
            with pytest.raises(ConfigError, match=r"`cost\."):
                load_config(config_dir, environ={})
            return
        cost = load_config(config_dir, environ={}).cost
    for key, value in table.items():
        assert getattr(cost, key) == value


async def test_action_budget_trips_and_refills_after_an_hour(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    config = make_config(tmp_path / "cfg", level="full", runtime={"max_actions_per_hour": 2})
    tool = StubTool(name="file_read", side_effects=False)

    class Provider:
        model = "scripted"

        def __init__(self) -> None:
            self.calls = 0
            self.tool_results: list[str] = []

        async def stream(self, request: Any) -> Any:
            self.calls += 1
            last = request.messages[-1]
            if last.role == "tool":
                self.tool_results.append(last.content)
            script = text_round("done") if self.calls % 4 == 0 else tool_round("file_read", {})
            for event in script:
                yield event

    provider = Provider()
    async with open_server(config, provider=provider, tools=[tool]) as client:
        session_id = await client.new_session(session_dir(tmp_path))
        first = await client.result("session/prompt", _prompt(session_id))
        assert first["stopReason"] == "end_turn"
        assert len(tool.calls) == 2
        assert provider.tool_results == ["stub output", "stub output", f"Error: {RATE_LIMIT_ERROR}"]
        await trio.sleep(ACTION_WINDOW_SECS + 1)
        await client.result("session/prompt", _prompt(session_id))
        assert len(tool.calls) == 4


def _prompt(session_id: str) -> dict[str, Any]:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}


async def test_a_call_cut_off_by_a_cancel_keeps_its_slot(tmp_path: Path) -> None:
    """It started (and may have done its work): the next counted call is over the budget."""
    config = make_config(tmp_path / "cfg", level="full", runtime={"max_actions_per_hour": 1})
    blocking = StubTool(name="file_read", side_effects=False, block=trio.Event())
    provider = ScriptedProvider(
        [tool_round("file_read", {}), tool_round("file_read", {}, "call-2"), text_round("done")]
    )
    with trio.fail_after(10):
        async with open_server(config, provider=provider, tools=[blocking]) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            request_id = await client.prompt_request(session_id, "go")
            while not blocking.started.is_set():
                client.notifications.append(await client.receive())
            await client.notify("session/cancel", {"sessionId": session_id})
            cancelled = await client.wait_response(request_id)
            blocking.block = None
            second = await client.result("session/prompt", _prompt(session_id))
    assert cancelled["result"]["stopReason"] == "cancelled"
    assert blocking.cancelled
    assert len(blocking.calls) == 1  # the second call never ran
    assert second["stopReason"] == "end_turn"
    assert provider.requests[-1].messages[-1].content == f"Error: {RATE_LIMIT_ERROR}"
