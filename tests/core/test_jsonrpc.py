from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_core.connection import ResponseReceived, RpcConnection
from acp_core.errors import (
    ErrorCode,
    InvalidParamsError,
    MethodNotFoundError,
    RemoteProtocolError,
    SessionBusyError,
    SessionLimitError,
    SessionNotFoundError,
)
from acp_core.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    Response,
    encode_notification,
    encode_request,
    encode_result,
    parse_frame,
    parse_message,
    serialize_message,
)
from acp_core.schema import (
    AgentMessageChunk,
    EmptyResult,
    SessionNotification,
    StopResult,
    TextContent,
)


def reply_of(data: str | bytes) -> dict[str, Any] | None:
    with pytest.raises(RemoteProtocolError) as info:
        parse_message(data)
    hint = info.value.reply_hint
    return None if hint is None else json.loads(serialize_message(hint))


@pytest.mark.parametrize(
    "data", ["{", "not json", "", '{"a":1} trailing', b'"\xff"', "[" * 100_000]
)
def test_invalid_json_is_parse_error_with_null_id(data: str | bytes) -> None:
    reply = reply_of(data)
    assert reply is not None
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    assert reply["error"]["message"].startswith("Parse error")


def test_batch_gets_a_clear_invalid_request() -> None:
    reply = reply_of('[{"jsonrpc":"2.0","id":1,"method":"initialize"}]')
    assert reply == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Invalid Request: batches are not supported; send one JSON-RPC object per line",
            "data": {
                "details": "Invalid Request: batches are not supported; "
                "send one JSON-RPC object per line"
            },
        },
    }


@pytest.mark.parametrize("data", ["1", '"x"', "null", "true"])
def test_scalar_is_invalid_request(data: str) -> None:
    reply = reply_of(data)
    assert reply is not None
    assert reply["error"]["code"] == -32600


def test_wrong_version_is_answered_with_the_request_id() -> None:
    reply = reply_of('{"jsonrpc":"1.0","id":7,"method":"initialize"}')
    assert reply is not None
    assert reply["id"] == 7
    assert reply["error"]["code"] == -32600
    assert "JSON-RPC version" in reply["error"]["message"]


def test_broken_notification_gets_no_reply() -> None:
    assert reply_of('{"jsonrpc":"1.0","method":"session/cancel"}') is None
    assert reply_of('{"jsonrpc":"2.0","method":""}') is None


@pytest.mark.parametrize("raw_id", ["true", "[1]", '{"a":1}'])
def test_unusable_ids_are_invalid_request_with_null_id(raw_id: str) -> None:
    reply = reply_of(f'{{"jsonrpc":"2.0","id":{raw_id},"method":"initialize"}}')
    assert reply is not None
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600


def test_scalar_params_are_invalid_params() -> None:
    reply = reply_of('{"jsonrpc":"2.0","id":"a","method":"m","params":3}')
    assert reply is not None
    assert (reply["id"], reply["error"]["code"]) == ("a", -32602)


@pytest.mark.parametrize(
    ("raw_id", "value"),
    [
        ("1", 1),
        ("0", 0),
        ("-5", -5),
        ("18446744073709551615", 2**64 - 1),
        ("1.5", 1.5),
        ('"zc-out-0"', "zc-out-0"),
        ('""', ""),
        ("null", None),
    ],
)
def test_ids_round_trip_with_their_json_type(raw_id: str, value: object) -> None:
    message = parse_message(f'{{"jsonrpc":"2.0","id":{raw_id},"method":"initialize"}}')
    assert isinstance(message, Request)
    assert message.id == value
    assert type(message.id) is type(value)
    out = json.loads(encode_result(message.id, EmptyResult()))
    assert out["id"] == value
    assert type(out["id"]) is type(value)


def test_classification() -> None:
    assert isinstance(parse_message('{"jsonrpc":"2.0","method":"session/cancel"}'), Notification)
    assert parse_message('{"jsonrpc":"2.0","id":"x","result":null}') == Response(
        id="x", result=None
    )
    error = parse_message('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}')
    assert error == ErrorResponse(id=1, error=ErrorObject(code=-32601, message="no"))


def test_response_without_id_is_dropped_without_reply() -> None:
    assert reply_of('{"jsonrpc":"2.0","result":1}') is None


def test_error_response_with_bad_error_object_is_rejected() -> None:
    assert reply_of('{"jsonrpc":"2.0","id":1,"error":"boom"}') is None


def test_error_codes_and_messages() -> None:
    message = "Method not found: session/set_model"
    assert MethodNotFoundError("session/set_model").to_response(1) == ErrorResponse(
        id=1, error=ErrorObject(code=-32601, message=message, data={"details": message})
    )
    assert SessionNotFoundError("s").code == ErrorCode.SESSION_NOT_FOUND
    assert int(ErrorCode.SESSION_NOT_FOUND) == -32000
    assert SessionLimitError(10).message == "Maximum session limit reached (10)"
    assert SessionLimitError(10).code == -32001
    assert SessionBusyError("s").code == -32002
    assert InvalidParamsError("x").code == -32602


def test_structs_encode_directly_in_envelopes() -> None:
    assert json.loads(encode_request("zc-out-0", "m", StopResult(session_id="s"))) == {
        "jsonrpc": "2.0",
        "id": "zc-out-0",
        "method": "m",
        "params": {"sessionId": "s", "stopped": True},
    }
    assert json.loads(encode_notification("n")) == {"jsonrpc": "2.0", "method": "n"}
    assert json.loads(encode_result(3, {"a": [1]})) == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"a": [1]},
    }


def test_serialize_message_never_emits_raw_newlines() -> None:
    data = serialize_message(Notification(method="m", params={"text": "a\nb\r\n"}))
    assert b"\n" not in data
    assert b"\r" not in data
    assert json.loads(data)["params"]["text"] == "a\nb\r\n"


def test_frame_decodes_params_straight_into_a_struct() -> None:
    frame = parse_frame(
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
        b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}'
    )
    assert (frame.kind, frame.id, frame.method) == ("notification", None, "session/update")
    note = frame.decode_payload(SessionNotification)
    assert note == SessionNotification(
        session_id="s", update=AgentMessageChunk(content=TextContent(text="hi"))
    )


def test_frame_payload_errors_name_the_path() -> None:
    frame = parse_frame(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","stopped":"yes"}}')
    assert frame.kind == "response"
    with pytest.raises(InvalidParamsError, match=r"Invalid result: .*\$\.stopped"):
        frame.decode_payload(StopResult)
    absent = parse_frame(b'{"jsonrpc":"2.0","method":"x","params":null}')
    assert absent.payload_value() is None
    with pytest.raises(InvalidParamsError, match="Invalid params"):
        absent.decode_payload(SessionNotification)


def test_frame_to_message_matches_parse_message() -> None:
    data = b'{"jsonrpc":"2.0","id":"a","error":{"code":-32000,"message":"Session not found: s"}}'
    frame = parse_frame(data)
    assert frame.kind == "error"
    assert frame.to_message() == parse_message(data)


@pytest.mark.parametrize("raw_id", ["123456789012345678901234567890", "-9223372036854775809"])
def test_integer_ids_of_any_size_are_echoed_exactly(raw_id: str) -> None:
    frame = parse_frame(f'{{"jsonrpc":"2.0","id":{raw_id},"method":"initialize"}}')
    assert frame.id == int(raw_id)
    assert (
        encode_result(frame.id, {}) == f'{{"jsonrpc":"2.0","id":{raw_id},"result":{{}}}}'.encode()
    )


@pytest.mark.parametrize("line", ["{}", '{"jsonrpc":"2.0"}', '{"jsonrpc":"2.0","params":{}}'])
def test_an_object_with_neither_method_nor_id_is_answered_with_a_null_id(line: str) -> None:
    reply = reply_of(line)
    assert reply is not None
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600


def test_a_number_no_double_holds_fails_only_its_own_message() -> None:
    # Inside params the envelope stays readable: the request is answered -32602 with its id.
    with pytest.raises(RemoteProtocolError) as info:
        parse_frame('{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"x":1e400}}')
    assert info.value.reply_hint is not None
    assert (info.value.reply_hint.id, info.value.reply_hint.error.code) == (7, -32602)
    # A notification's is never answered.
    with pytest.raises(RemoteProtocolError) as info:
        parse_frame('{"jsonrpc":"2.0","method":"session/update","params":{"x":-1e400}}')
    assert info.value.reply_hint is None


HUGE_NUMBERS = st.sampled_from(
    ["1e400", "-2.5E+310", "1.7e308", "1.8e308", "0.1e310", "9" * 310 + ".5"]
)
JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)  # fmt: skip
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


def _with_huge_number(value: object, huge: str, path: list[int]) -> str:
    """``value`` as JSON with ``huge`` put in at a place ``path`` picks (deep or shallow)."""
    if isinstance(value, dict) and value and path:
        key = sorted(value)[path[0] % len(value)]
        parts = [
            f"{json.dumps(k)}:{_with_huge_number(v, huge, path[1:]) if k == key else json.dumps(v)}"
            for k, v in value.items()
        ]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list) and value and path:
        index = path[0] % len(value)
        items = [
            _with_huge_number(item, huge, path[1:]) if i == index else json.dumps(item)
            for i, item in enumerate(value)
        ]
        return "[" + ",".join(items) + "]"
    return "[" + json.dumps(value) + "," + huge + "]"


@given(
    params=st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=3),
    huge=HUGE_NUMBERS,
    path=st.lists(st.integers(0, 5), max_size=4),
    request_id=st.one_of(st.integers(), st.text(max_size=5)),
)
def test_a_huge_number_anywhere_in_a_call_is_refused_with_its_id(
    params: dict[str, object], huge: str, path: list[int], request_id: int | str
) -> None:
    body = _with_huge_number(params, huge, path)
    line = f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"x/y","params":{body}}}'
    if huge == "1.7e308":  # just below the largest double: a number like any other
        assert parse_frame(line).payload_value() is not None
        return
    for data in (line, line.encode()):
        with pytest.raises(RemoteProtocolError) as info:
            parse_frame(data)
        assert info.value.reply_hint is not None
        assert info.value.reply_hint.id == request_id
        assert info.value.reply_hint.error.code == -32602


@given(text=st.text(alphabet="0123456789eE.+- x", max_size=40))
def test_a_huge_looking_string_is_not_a_number(text: str) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x/y", "params": {"t": text + "e400"}})
    assert parse_frame(line).payload_value() == {"t": text + "e400"}


def test_an_unreadable_answer_fails_the_request_it_answers() -> None:
    connection = RpcConnection()
    request_id, _ = connection.send_request("session/request_permission", {})
    event = connection.receive_frame(
        f'{{"jsonrpc":"2.0","id":"{request_id}","result":{{"x":1e400}}}}'
    )
    assert isinstance(event, ResponseReceived)
    assert isinstance(event.response, ErrorResponse)
    assert "out of range" in event.response.error.message
    assert connection.pending_requests == {}
