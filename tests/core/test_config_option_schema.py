"""The acp-core shapes of ACP session config options and usage."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_core import methods, schema
from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonObject

values = st.builds(
    schema.ConfigOptionValue,
    value=st.text(),
    name=st.text(),
    description=st.none() | st.text(),
)
options = st.builds(
    schema.ConfigOption,
    id=st.text(),
    name=st.text(),
    description=st.none() | st.text(),
    category=st.none() | st.sampled_from(["model", "mode", "_custom"]),
    type=st.just("select"),
    current_value=st.text(),
    options=st.lists(values, max_size=4),
)


@given(st.lists(options, max_size=3))
def test_config_options_round_trip_and_always_say_their_type(
    config_options: list[schema.ConfigOption],
) -> None:
    update = schema.ConfigOptionUpdate(config_options=config_options)
    wire = json.loads(schema.encode(update))
    assert wire["sessionUpdate"] == "config_option_update"
    assert all(entry["type"] == "select" for entry in wire["configOptions"])
    assert all("currentValue" in entry for entry in wire["configOptions"])
    assert schema.decode(schema.ConfigOptionUpdate, schema.encode(update)) == update


def test_set_config_option_params_read_the_id_option_and_value() -> None:
    spec = methods.METHODS[methods.SESSION_SET_CONFIG_OPTION]
    assert spec.inbound_params is schema.SetConfigOptionParams
    assert spec.result is schema.SetConfigOptionResult
    params = schema.decode_params(
        schema.SetConfigOptionParams,
        {"session_id": "s-1", "configId": "mode", "value": "readonly"},
    )
    assert (params.session_id, params.config_id, params.value) == ("s-1", "mode", "readonly")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"configId": "mode", "value": "readonly"}, "sessionId"),
        ({"sessionId": "s-1", "value": "readonly"}, "configId"),
        ({"sessionId": "s-1", "configId": "mode"}, "value"),
        ({"sessionId": "s-1", "configId": "mode", "type": "boolean", "value": True}, "value"),
    ],
)
def test_set_config_option_params_refuse_what_is_missing_or_not_a_value_id(
    params: JsonObject, message: str
) -> None:
    with pytest.raises(InvalidParamsError, match=message):
        schema.decode_params(schema.SetConfigOptionParams, params)


def test_usage_shapes() -> None:
    update = schema.UsageUpdate(used=17, size=0)
    assert json.loads(schema.encode(update)) == {
        "sessionUpdate": "usage_update",
        "used": 17,
        "size": 0,
    }
    result = schema.PromptResult(
        session_id="s",
        stop_reason="end_turn",
        content="x",
        usage=schema.PromptUsage(total_tokens=3, input_tokens=1, output_tokens=2),
    )
    assert json.loads(schema.encode(result))["usage"] == {
        "totalTokens": 3,
        "inputTokens": 1,
        "outputTokens": 2,
    }
    restored = schema.RestoredSessionResult()
    assert json.loads(schema.encode(restored)) == {}
