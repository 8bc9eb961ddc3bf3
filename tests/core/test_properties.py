"""Property tests: framing under any chunking, robustness to garbage, codec round trips."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_core.blobs import plan_prompt
from acp_core.errors import InvalidParamsError, RemoteProtocolError
from acp_core.framing import LineDecoder, encode_line
from acp_core.jsonrpc import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    Response,
    message_from_object,
    parse_message,
    serialize_message,
)
from acp_core.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    InboundParams,
    InboundUpdateParams,
    InitializeParams,
    NewSessionParams,
    PlanEntry,
    PlanUpdate,
    PromptParams,
    RestoreParams,
    SessionIdParams,
    SessionNotification,
    TextContent,
    ToolCallDiff,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
    decode,
    decode_inbound,
    decode_params,
    encode,
    text_tool_content,
)

# The CI machine is small and shared: judge properties by their examples, not wall time.
relaxed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
thorough = settings(relaxed, max_examples=300)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
json_containers = st.lists(json_values, max_size=3) | st.dictionaries(
    st.text(max_size=8), json_values, max_size=4
)
ids = (
    st.none()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
methods = st.text(min_size=1, max_size=20)

messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Request, id=ids, method=methods, params=st.none() | json_containers),
    st.builds(Notification, method=methods, params=st.none() | json_containers),
    st.builds(Response, id=ids, result=json_values),
    st.builds(
        ErrorResponse,
        id=ids,
        error=st.builds(
            ErrorObject, code=st.integers(-(2**31), 2**31), message=st.text(), data=json_values
        ),
    ),
)


def same_message(a: Message, b: Message) -> bool:
    # Compare through the wire form: -0.0 == 0.0 and 1 == 1.0 must not hide a type change.
    return type(a) is type(b) and serialize_message(a) == serialize_message(b)


@relaxed
@given(messages)
def test_serialize_parse_round_trip(message: Message) -> None:
    parsed = parse_message(serialize_message(message))
    assert same_message(parsed, message)
    if not isinstance(message, Notification):
        assert type(parsed.id) is type(message.id)  # type: ignore[union-attr]


@relaxed
@given(
    st.lists(messages, min_size=1, max_size=6),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    st.booleans(),
    st.booleans(),
)
def test_any_chunking_yields_the_same_messages(
    batch: list[Message], cuts: list[int], crlf: bool, blank_lines: bool
) -> None:
    stream = b""
    for message in batch:
        framed = encode_line(serialize_message(message))
        if crlf:
            framed = framed[:-1] + b"\r\n"
        stream += framed
        if blank_lines:
            stream += b"\n \r\n"
    points = sorted({cut % (len(stream) + 1) for cut in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    decoder = LineDecoder()
    lines: list[str] = []
    for chunk in chunks:
        if chunk:
            decoder.feed(chunk)
        while (line := decoder.next_line()) is not None:
            lines.append(line)
    decoder.feed(b"")
    while (line := decoder.next_line()) is not None:
        lines.append(line)
    parsed = [parse_message(line) for line in lines]
    assert len(parsed) == len(batch)
    assert all(same_message(a, b) for a, b in zip(parsed, batch, strict=True))


def _pump(chunks: list[bytes], max_line_bytes: int) -> int:
    """Feed chunks, parse every line; return how many framing errors lacked a reply hint.

    Any exception other than RemoteProtocolError propagates and fails the test.
    """
    decoder = LineDecoder(max_line_bytes=max_line_bytes)
    unanswerable = 0
    # b"" means end of stream, so empty pieces only appear as the final feed.
    for chunk in [*(c for c in chunks if c), b""]:
        decoder.feed(chunk)
        while True:
            try:
                line = decoder.next_line()
            except RemoteProtocolError as exc:
                # Framing errors always say how to answer (-32700 / -32600 with id null).
                unanswerable += exc.reply_hint is None
                continue
            if line is None:
                break
            try:
                parse_message(line)
            except RemoteProtocolError:
                pass
    return unanswerable


@relaxed
@given(st.lists(st.binary(max_size=64), max_size=10), st.integers(min_value=1, max_value=48))
def test_arbitrary_bytes_raise_only_remote_protocol_errors(chunks: list[bytes], limit: int) -> None:
    assert _pump(chunks, limit) == 0


json_ish = st.text(alphabet='{}[]":,0123456789.-+eEtrufalsn \\\n\r\t', max_size=80)


@relaxed
@given(st.lists(json_ish, max_size=6))
def test_json_like_garbage_raises_only_remote_protocol_errors(pieces: list[str]) -> None:
    assert _pump([piece.encode() for piece in pieces], 1024) == 0


inbound_types: list[type[InboundParams]] = [
    InitializeParams,
    NewSessionParams,
    PromptParams,
    SessionIdParams,
    RestoreParams,
    InboundUpdateParams,
]
prompt_like = st.fixed_dictionaries(
    {"sessionId": st.text(max_size=5)},
    optional={
        "prompt": st.text(max_size=5)
        | st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "type": st.sampled_from(
                        ["text", "resource", "resource_link", "image", "audio", "x"]
                    ),
                    "text": json_values,
                    "resource": st.fixed_dictionaries(
                        {},
                        optional={
                            "uri": json_values,
                            "text": json_values,
                            "blob": st.sampled_from(["aGk=", "!!", "", "aGk"]) | json_values,
                            "mimeType": json_values,
                        },
                    )
                    | json_values,
                    "uri": json_values,
                    "name": json_values,
                    "data": json_values,
                    "mimeType": json_values,
                },
            )
            | json_values,
            max_size=4,
        )
        | json_values
    },
)


@thorough
@given(st.sampled_from(inbound_types), json_values | prompt_like)
def test_inbound_params_fail_only_with_invalid_params(
    params_type: type[InboundParams], raw: Any
) -> None:
    try:
        parsed = decode_params(params_type, raw)
    except InvalidParamsError:
        return
    if isinstance(parsed, PromptParams):
        try:
            plan = plan_prompt(parsed.prompt, uploads_dir="/ws/uploads")
        except InvalidParamsError:
            return
        assert all(write.path.startswith("/ws/uploads/") for write in plan.writes)


texts = st.text(max_size=20)
statuses = st.sampled_from(["pending", "in_progress", "completed", "failed"])
kinds = st.sampled_from(["read", "edit", "delete", "execute", "think", "other"])
updates = st.one_of(
    st.builds(AgentMessageChunk, content=st.builds(TextContent, text=texts)),
    st.builds(AgentThoughtChunk, content=st.builds(TextContent, text=texts)),
    st.builds(UserMessageChunk, content=st.builds(TextContent, text=texts)),
    st.builds(
        ToolCallStart,
        tool_call_id=texts,
        title=texts,
        kind=kinds,
        status=statuses,
        raw_input=json_values,
        content=st.none()
        | st.lists(
            st.builds(ToolCallDiff, path=texts, old_text=st.none() | texts, new_text=texts),
            max_size=2,
        ),
    ),
    st.builds(
        ToolCallUpdate,
        tool_call_id=texts,
        status=statuses,
        raw_output=json_values,
        name=st.none() | texts,
        body=st.none() | texts,
        content=st.none() | st.lists(texts.map(text_tool_content), max_size=2),
    ),
    st.builds(
        PlanUpdate,
        entries=st.lists(
            st.builds(
                PlanEntry,
                content=texts,
                status=st.sampled_from(["pending", "in_progress", "completed"]),
                priority=st.sampled_from(["high", "medium", "low"]),
                meta=st.none() | st.builds(lambda text: {"zeroclaw": {"activeForm": text}}, texts),
            ),
            max_size=3,
        ),
    ),
)


@relaxed
@given(st.builds(SessionNotification, session_id=texts, update=updates))
def test_session_notifications_round_trip(notification: SessionNotification) -> None:
    data = encode(notification)
    assert encode(decode(SessionNotification, data)) == data


message_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": ids | json_values,
        "method": st.sampled_from(["session/new", ""]) | json_values,
        "params": json_values,
        "result": json_values,
        "error": st.fixed_dictionaries({"code": json_values, "message": json_values}) | json_values,
    },
)


def _outcome(parse: Any, data: Any) -> tuple[str, bytes]:
    try:
        return "message", serialize_message(parse(data))
    except RemoteProtocolError as exc:
        hint = exc.reply_hint
        return "error", b"" if hint is None else serialize_message(hint)


@thorough
@given(message_like | json_values)
def test_bytes_and_builtins_paths_apply_the_same_rules(value: Any) -> None:
    data = msgspec.json.encode(value)
    assert _outcome(parse_message, data) == _outcome(message_from_object, value)


def _lenient(params_type: type[InboundParams], raw: Any) -> Any:
    try:
        return decode_params(params_type, raw)
    except InvalidParamsError as exc:
        return ("error", exc.message)


def _from_bytes(params_type: type[InboundParams], raw: Any) -> Any:
    try:
        return decode_inbound(params_type, msgspec.json.encode(raw))
    except InvalidParamsError as exc:
        return ("error", exc.message)


well_formed_prompts = st.fixed_dictionaries(
    {
        "sessionId": st.text(max_size=8),
        "prompt": st.lists(
            st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)}),
                st.fixed_dictionaries(
                    {"type": st.just("resource_link"), "uri": st.text(max_size=8)},
                    optional={"name": st.text(max_size=4), "size": st.integers(0, 10)},
                ),
                st.fixed_dictionaries(
                    {
                        "type": st.just("resource"),
                        "resource": st.fixed_dictionaries(
                            {"uri": st.text(max_size=8)},
                            optional={"text": st.text(max_size=4), "blob": st.just("aGk=")},
                        ),
                    }
                ),
            ),
            max_size=4,
        ),
    }
)


@thorough
@given(st.sampled_from(inbound_types), json_values | prompt_like | well_formed_prompts)
def test_decoding_from_bytes_reads_params_as_the_lenient_reader_does(
    params_type: type[InboundParams], raw: Any
) -> None:
    """The typed fast path never accepts what the lenient rules read differently, and
    every refusal carries the lenient reader's message."""
    assert _from_bytes(params_type, raw) == _lenient(params_type, raw)


@thorough
@given(well_formed_prompts)
def test_prompts_read_from_bytes_equal_the_lenient_reading(raw: Any) -> None:
    assert _from_bytes(PromptParams, raw) == _lenient(PromptParams, raw)


typed_prompts = st.fixed_dictionaries(
    {
        "sessionId": st.text(max_size=8),
        "prompt": st.lists(
            st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)}),
                st.fixed_dictionaries(
                    {
                        "type": st.just("resource_link"),
                        "uri": st.text(max_size=8),
                        "name": st.text(min_size=1, max_size=4),
                    }
                ),
                st.fixed_dictionaries(
                    {
                        "type": st.just("resource"),
                        "resource": st.fixed_dictionaries(
                            {"uri": st.text(max_size=8), "text": st.text(max_size=4)}
                        ),
                    }
                ),
            ),
            max_size=4,
        ),
    }
)


@given(typed_prompts)
def test_well_formed_prompts_decode_to_their_typed_shape(raw: Any) -> None:
    data = msgspec.json.encode(raw)
    assert decode_inbound(PromptParams, data) == msgspec.json.decode(data, type=PromptParams)


def _expected_reply_id(value: Any) -> tuple[bool, Any]:
    """Whether a malformed ``value`` must be answered (JSON-RPC 2.0 §5), and with which id.

    Anything that is not an object, or carries an unusable id, is answered with id null; a
    broken call (``method`` present, or neither ``result`` nor ``error``) with its own id,
    or with id null when it has no id and no method string (it cannot be a notification,
    as ``{}``); a broken notification or response is never answered.
    """
    if not isinstance(value, dict):
        return True, None
    has_id = "id" in value
    request_id = value.get("id")
    usable = request_id is None or (
        isinstance(request_id, int | float | str) and not isinstance(request_id, bool)
    )
    if has_id and not usable:
        return True, None
    is_call = value.get("method") is not None or ("result" not in value and "error" not in value)
    if not is_call:
        return False, None
    if has_id:
        return True, request_id
    return not isinstance(value.get("method"), str), None


@thorough
@given(message_like | json_values)
def test_any_json_value_parses_or_gets_the_reply_json_rpc_requires(value: Any) -> None:
    try:
        parse_message(msgspec.json.encode(value))
    except RemoteProtocolError as exc:
        hint, reason = exc.reply_hint, str(exc)
    else:
        return
    must_answer, reply_id = _expected_reply_id(value)
    if not must_answer:
        assert hint is None, hint
        return
    assert hint is not None, f"{value!r} must be answered: {reason}"
    assert hint.id == reply_id
    assert hint.error.code in (-32600, -32601, -32602)
    assert hint.error.message
