"""``--shared-filesystem``: the IDE's ``initialize`` reaches the gateway, on the first
connection and on every replay, with ``_meta.zeroclaw.sharedFilesystem: true`` added and
everything else it said kept."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.messages import Forward, classify_line, with_shared_filesystem
from acp_bridge.relay_state import RelayState, SendToGateway

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


def _initialize(params: dict[str, Any]) -> Forward:
    line = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    [action] = classify_line(line)
    assert isinstance(action, Forward)
    return action


def _sent_params(action: object) -> Any:
    assert isinstance(action, SendToGateway), action
    return json.loads(action.text)["params"]


@given(
    params=st.dictionaries(st.text(max_size=5), JSON_VALUES),
    meta=st.none() | st.dictionaries(st.text(max_size=5), JSON_VALUES),
)
def test_the_flag_is_added_and_nothing_else_changes(
    params: dict[str, Any], meta: dict[str, Any] | None
) -> None:
    if meta is not None:
        params = {**params, "_meta": meta}
    rewritten = json.loads(with_shared_filesystem(_initialize(params).text))["params"]
    raw_meta = params.get("_meta")
    given_meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    given_zeroclaw = given_meta.get("zeroclaw")
    expected_zeroclaw = given_zeroclaw if isinstance(given_zeroclaw, dict) else {}
    assert rewritten == {
        **params,
        "_meta": {**given_meta, "zeroclaw": {**expected_zeroclaw, "sharedFilesystem": True}},
    }


def test_a_message_without_object_params_is_left_for_the_gateway_to_judge() -> None:
    text = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":[1]}'
    assert with_shared_filesystem(text) == text


def test_the_initialize_sent_and_replayed_says_the_filesystem_is_shared() -> None:
    params = {"protocolVersion": 1, "_meta": {"zeroclaw": {"other": 1}, "editor": "x"}}
    expected = {
        "protocolVersion": 1,
        "_meta": {"zeroclaw": {"other": 1, "sharedFilesystem": True}, "editor": "x"},
    }
    state = RelayState(
        url="ws://127.0.0.1:1/acp",
        max_held_messages=10,
        max_held_bytes=1 << 20,
        shared_filesystem=True,
    )
    state.connection_opened()
    assert state.next_held() is None
    state.connection_ready()
    assert _sent_params(state.client_message(_initialize(params))) == expected
    state.connection_closed(1)
    state.connection_lost("gone", reconnecting=True)
    state.connection_opened()
    assert _sent_params(state.start_replay()) == expected


def test_without_the_flag_initialize_goes_as_the_ide_wrote_it() -> None:
    state = RelayState(url="ws://127.0.0.1:1/acp", max_held_messages=10, max_held_bytes=1 << 20)
    state.connection_opened()
    state.connection_ready()
    action = _initialize({"protocolVersion": 1})
    sent = state.client_message(action)
    assert isinstance(sent, SendToGateway)
    assert sent.text == action.text
