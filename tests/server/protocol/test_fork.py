"""How a fork copies its source's history: cut into the turns the store keeps, and the
window of it the live fork holds."""

from __future__ import annotations

import pytest

from acp_server.model import ChatMessage, PlanStep
from acp_server.protocol.services import fork
from acp_server.protocol.services.fork import as_turns, fork_title, restored_window


def conversation(turns: int) -> list[ChatMessage]:
    messages = []
    for index in range(turns):
        messages += [
            ChatMessage(role="user", content=f"ask {index}"),
            ChatMessage(role="assistant", content=f"answer {index}"),
        ]
    return messages


def test_the_history_is_cut_at_each_prompt_and_the_plan_goes_with_the_last_turn() -> None:
    plan = (PlanStep("ship it"),)
    turns = as_turns(conversation(3), plan)
    assert [[m.content for m in turn.messages] for turn in turns] == [
        ["ask 0", "answer 0"],
        ["ask 1", "answer 1"],
        ["ask 2", "answer 2"],
    ]
    assert [turn.plan for turn in turns] == [None, None, plan]
    assert as_turns([], plan) == []


def test_the_live_fork_keeps_the_newest_whole_turns_within_the_restore_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fork, "DEFAULT_MAX_RESTORED_MESSAGES", 5)
    kept = restored_window(as_turns(conversation(4), None))
    assert [m.content for m in kept] == ["ask 2", "answer 2", "ask 3", "answer 3"]
    monkeypatch.setattr(fork, "DEFAULT_MAX_RESTORED_MESSAGES", 1)
    # Always at least the newest turn, as a load keeps it.
    assert [m.content for m in restored_window(as_turns(conversation(2), None))] == [
        "ask 1",
        "answer 1",
    ]


def test_a_fork_is_titled_after_its_source_and_an_untitled_one_stays_untitled() -> None:
    assert fork_title("Fix the tests") == "Fix the tests (fork)"
    assert fork_title(None) is None
