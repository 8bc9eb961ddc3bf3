from __future__ import annotations

import pytest

from acp_core.aliases import AgentInfo, resolve_restore_alias, resolve_session_alias
from acp_core.errors import ErrorCode, InvalidParamsError

TWO = {"alpha": True, "beta": True}


def resolve(
    explicit: str | None = None,
    connection: str | None = None,
    config: str | None = None,
    agents: dict[str, bool] | list[AgentInfo] | None = None,
) -> str:
    return resolve_session_alias(
        explicit=explicit,
        connection_default=connection,
        config_default=config,
        agents=TWO if agents is None else agents,
    )


def test_explicit_alias_wins_over_every_default() -> None:
    assert resolve("alpha", "beta", "beta") == "alpha"


def test_connection_default_beats_config_default() -> None:
    assert resolve(None, "beta", "alpha") == "beta"


def test_config_default_used_when_nothing_else() -> None:
    assert resolve(None, None, "beta") == "beta"


def test_sole_agent_is_auto_selected() -> None:
    assert resolve(agents={"only": True}) == "only"


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_blank_values_fall_through_at_every_step(blank: str) -> None:
    assert resolve(blank, blank, "beta") == "beta"
    assert resolve(blank, "beta", blank) == "beta"
    assert resolve(blank, blank, blank, agents={"only": True}) == "only"


def test_aliases_are_trimmed() -> None:
    assert resolve("  alpha  ") == "alpha"


def test_no_alias_with_several_agents_is_invalid_params() -> None:
    with pytest.raises(InvalidParamsError) as info:
        resolve()
    assert info.value.code == ErrorCode.INVALID_PARAMS
    assert info.value.message == (
        "session/new requires `agentAlias` (alias of a configured [agents.<alias>] entry)"
    )


def test_no_agents_at_all_is_the_same_error() -> None:
    with pytest.raises(InvalidParamsError, match="requires `agentAlias`"):
        resolve(agents={})


@pytest.mark.parametrize("step", [0, 1, 2])
def test_unknown_alias_from_any_step_is_rejected(step: int) -> None:
    candidates: list[str | None] = [None, None, None]
    candidates[step] = "ghost"
    explicit, connection, config = candidates
    with pytest.raises(InvalidParamsError) as info:
        resolve(explicit, connection, config)
    assert info.value.message == "Unknown agent `ghost` — no [agents.ghost] entry configured"


def test_unknown_explicit_alias_does_not_fall_through() -> None:
    with pytest.raises(InvalidParamsError, match="ghost"):
        resolve("ghost", "alpha", "alpha")


def test_disabled_alias_is_rejected_with_its_name() -> None:
    agents = [AgentInfo(alias="alpha"), AgentInfo(alias="off", enabled=False)]
    with pytest.raises(InvalidParamsError) as info:
        resolve(None, "off", agents=agents)
    assert info.value.message == "Agent `off` is not enabled for dispatch"


def test_sole_agent_that_is_not_dispatchable_is_rejected() -> None:
    with pytest.raises(InvalidParamsError, match="Agent `solo` is not enabled for dispatch"):
        resolve(agents={"solo": False})


def restore(stored: str | None, config: str | None, agents: dict[str, bool]) -> str:
    return resolve_restore_alias(stored=stored, config_default=config, agents=agents)


def test_restore_keeps_dispatchable_owner() -> None:
    assert restore("beta", "alpha", TWO) == "beta"


def test_restore_skips_disabled_owner_to_default_agent() -> None:
    assert restore("beta", "alpha", {"alpha": True, "beta": False}) == "alpha"


def test_restore_skips_deleted_owner_and_disabled_default_to_sole_dispatchable() -> None:
    agents = {"alpha": False, "gamma": True}
    assert restore("deleted", "alpha", agents) == "gamma"


def test_restore_with_no_candidate_explains_how_to_fix() -> None:
    with pytest.raises(InvalidParamsError) as info:
        restore("deleted", None, {"a": True, "b": True})
    assert "deleted" in info.value.message
    assert "[acp].default_agent" in info.value.message
    with pytest.raises(InvalidParamsError, match="no agent is enabled"):
        restore("x", None, {"a": False})
