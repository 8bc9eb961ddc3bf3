"""The store's JSON columns read and write with msgspec, and keep what the standard library
kept: rows written before the switch (``NaN``, ``Infinity``, escaped lone surrogates) read
back as they were, integers past 64 bits survive, and text no UTF-8 can hold is stored."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.model import (
    ChatMessage,
    DeliveredRecord,
    PlanStep,
    StreamedPlan,
    StreamedText,
    ToolCall,
    ToolRecord,
)
from acp_server.storage.codec import (
    decode_messages,
    encode_message,
    plan_from_json,
    plan_to_json,
    record_from_json,
    record_to_json,
)

# Any code point, lone surrogates included (hypothesis never draws category Cs itself).
_any_text = st.text(
    st.characters() | st.integers(0xD800, 0xDFFF).map(chr) | st.sampled_from('\x00\x01"\\'),
    max_size=30,
).filter(
    # A high surrogate right before a low one is written as the two escapes JSON reads back
    # as the one character they spell (json.loads as well): that pair is left out.
    lambda text: text == text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
)


def _stored_arguments(payload: str) -> dict[str, Any]:
    """What a session load makes of one stored 'in' row."""
    rows = [(1, "call-1", "shell", "in", payload, None, None)]
    [message] = decode_messages([(1, "assistant", "", None)], rows)
    [call] = message.tool_calls
    return call.arguments


def test_arguments_stored_with_nan_and_infinity_read_back_as_they_were() -> None:
    # json.dumps wrote these into rows before the switch, and still writes arguments.
    arguments = _stored_arguments('{"ratio":NaN,"limit":Infinity,"floor":-Infinity,"n":1}')
    assert math.isnan(arguments["ratio"])
    assert arguments["limit"] == math.inf
    assert arguments["floor"] == -math.inf
    assert arguments["n"] == 1


def test_arguments_with_non_finite_numbers_are_stored_as_the_model_sent_them() -> None:
    call = ToolCall(id="c", name="shell", arguments={"ratio": math.inf, "n": 2})
    [row] = encode_message(ChatMessage(role="assistant", content="", tool_calls=(call,))).tool_rows
    assert _stored_arguments(row[3]) == {"ratio": math.inf, "n": 2}


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**40])
def test_integers_past_64_bits_survive_arguments_and_records(number: int) -> None:
    call = ToolCall(id="c", name="shell", arguments={"n": number, "l": [number]})
    [row] = encode_message(ChatMessage(role="assistant", content="", tool_calls=(call,))).tool_rows
    assert _stored_arguments(row[3]) == {"n": number, "l": [number]}
    delivered = DeliveredRecord(
        uri="zeroclaw://d/x", filename="x", title="x", mime_type="text/plain", size=number
    )
    assert record_from_json(record_to_json(ToolRecord(delivered=delivered))).delivered == delivered


def test_a_stored_argument_escape_of_a_lone_surrogate_reads_back() -> None:
    assert _stored_arguments('{"path":"a\\ud800b"}') == {"path": "a\ud800b"}


@given(text=_any_text)
def test_a_record_or_plan_holding_any_text_is_stored_and_read_back(text: str) -> None:
    record = ToolRecord(
        streamed=(StreamedText(text), StreamedPlan((PlanStep(content=text, active_form=text),)))
    )
    encoded = record_to_json(record)
    encoded.encode("utf-8")  # what a database stores
    assert record_from_json(encoded) == record
    plan = (PlanStep(content=text, status="in_progress"),)
    encoded_plan = plan_to_json(plan)
    encoded_plan.encode("utf-8")
    assert plan_from_json(encoded_plan, "s") == plan


def test_columns_are_compact_json_with_text_as_it_is() -> None:
    record = ToolRecord(streamed=(StreamedText("café ✓"),))
    assert record_to_json(record) == '{"streamed":[{"text":"café ✓"}]}'
    assert json.loads(plan_to_json((PlanStep(content="é"),))) == [
        {"content": "é", "status": "pending", "priority": "medium"}
    ]


def test_a_damaged_record_or_plan_still_reads_as_empty() -> None:
    assert record_from_json('{"streamed": [') == ToolRecord()
    assert record_from_json("[1, 2]") == ToolRecord()
    assert plan_from_json("not json", "s") is None
    assert _stored_arguments("not json") == {"arguments": "not json"}
