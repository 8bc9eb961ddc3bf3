"""The session states and their one table of moves (acp_server/protocol/services/
session_state.py): what the table allows, what it refuses, and that no sequence of events
leads anywhere the table does not name."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.protocol.services.session_state import (
    ACTIVE_STATES,
    LIVE_STATES,
    RESTING_STATES,
    TRANSITIONS,
    SessionEvent,
    SessionState,
    SessionStateError,
    next_state,
)

S = SessionState
E = SessionEvent


def test_every_event_has_moves() -> None:
    assert set(TRANSITIONS) == set(SessionEvent)
    assert all(TRANSITIONS.values())


@pytest.mark.parametrize(
    ("state", "event", "expected"),
    [
        (S.CLOSED, E.CREATE, S.RESERVED),
        (S.RESERVED, E.GO_LIVE, S.IDLE),
        (S.IDLE, E.PROMPT, S.PROMPTING),
        (S.PROMPTING, E.TURN_ENDS, S.IDLE),
        (S.PROMPTING, E.DETACH, S.CLOSING),
        (S.IDLE, E.DETACH, S.CLOSED),
        (S.CLOSING, E.TURN_ENDS, S.CLOSED),
        (S.CLOSING, E.BEGIN_RESTORE, S.OPENING),
        (S.REAPED, E.BEGIN_RESTORE, S.OPENING),
        (S.TAKEN_OVER, E.BEGIN_RESTORE, S.OPENING),
        (S.OPENING, E.RESERVE, S.RESERVED),
        (S.OPENING, E.ABANDON, S.CLOSED),
        (S.IDLE, E.REAP, S.REAPED),
        (S.PROMPTING, E.TAKE_OVER, S.TAKEN_OVER),
        (S.RESERVED, E.TAKE_OVER, S.TAKEN_OVER),
    ],
)
def test_the_moves_a_session_makes(state: S, event: E, expected: S) -> None:
    assert next_state("s1", state, event) is expected


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (S.PROMPTING, E.PROMPT),  # one turn at a time
        (S.CLOSED, E.DETACH),
        (S.OPENING, E.GO_LIVE),  # a restore holds a slot before it goes live
        (S.PROMPTING, E.REAP),  # a running turn is never reaped
        (S.IDLE, E.BEGIN_RESTORE),  # an active id is never restored again
        (S.RESERVED, E.CREATE),
        (S.CLOSED, E.TAKE_OVER),
    ],
)
def test_a_move_the_table_does_not_list_is_refused_with_a_clear_error(state: S, event: E) -> None:
    with pytest.raises(SessionStateError) as refused:
        next_state("s1", state, event)
    assert str(refused.value).startswith(
        f"session s1: {event.value} cannot happen while it is {state.value} (allowed while "
    )
    assert (refused.value.session_id, refused.value.event, refused.value.state) == (
        "s1",
        event,
        state,
    )


def test_active_live_and_resting_states() -> None:
    assert LIVE_STATES < ACTIVE_STATES
    assert not ACTIVE_STATES & RESTING_STATES
    assert set(SessionState) == ACTIVE_STATES | RESTING_STATES | {S.CLOSING}
    # A restore starts from rest or from an older copy's close, never from an active id.
    assert set(TRANSITIONS[E.BEGIN_RESTORE]) == RESTING_STATES | {S.CLOSING}


def _reachable_from(start: S) -> set[S]:
    seen, queue = {start}, deque([start])
    while queue:
        state = queue.popleft()
        for moves in TRANSITIONS.values():
            target = moves.get(state)
            if target is not None and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def test_every_state_is_reached_from_closed_and_comes_to_rest() -> None:
    assert _reachable_from(S.CLOSED) == set(SessionState)
    for state in SessionState:
        assert _reachable_from(state) & RESTING_STATES, state


@given(st.lists(st.sampled_from(list(SessionEvent)), max_size=60))
def test_any_sequence_of_events_follows_the_table_or_is_refused(
    events: list[SessionEvent],
) -> None:
    state = S.CLOSED
    for event in events:
        allowed = TRANSITIONS[event]
        if state not in allowed:
            with pytest.raises(SessionStateError) as refused:
                next_state("s1", state, event)
            assert (refused.value.state, refused.value.event) == (state, event)
            continue  # a refused move leaves the state as it was
        moved = next_state("s1", state, event)
        assert moved is allowed[state]
        assert moved in set(SessionState)
        state = moved
