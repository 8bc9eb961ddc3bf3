"""The relay's per-line and per-frame decisions (no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.messages import (
    EnvelopeHead,
    Forward,
    FrameError,
    Kind,
    Peek,
    ReplyToClient,
    ReplyToGateway,
    StdinAction,
    StdinFramer,
    error_line,
    frame_to_line,
    peek,
    response_id,
    session_id_of,
    sniff_envelope,
    with_id,
)


def replies(actions: list[StdinAction]) -> list[Any]:
    return [json.loads(a.line) for a in actions if isinstance(a, ReplyToClient)]


def feed_all(framer: StdinFramer, *chunks: bytes) -> list[StdinAction]:
    actions: list[StdinAction] = []
    for chunk in chunks:
        actions += framer.feed(chunk)
    return actions


class TestStdinFramer:
    def test_requests_are_forwarded_verbatim_and_tracked(self) -> None:
        line = '{"jsonrpc":"2.0",  "id":"a1","method":"session/new","params":{"cwd":"/é"}}'
        assert StdinFramer().feed(line.encode() + b"\n") == [Forward(line, "a1", "session/new")]

    @pytest.mark.parametrize(
        "line",
        [
            '{"jsonrpc":"2.0","method":"session/cancel","params":{}}',  # notification
            '{"jsonrpc":"2.0","id":true,"method":"x"}',  # not a valid id: the gateway says so
            '{"jsonrpc":"2.0","id":null,"method":"x"}',
            '{"jsonrpc":"2.0","id":null,"result":{}}',
        ],
    )
    def test_other_objects_are_forwarded_untracked(self, line: str) -> None:
        assert StdinFramer().feed(line.encode() + b"\n") == [Forward(line)]

    @pytest.mark.parametrize(
        ("line", "answers"),
        [
            ('{"jsonrpc":"2.0","id":"zc-out-0","result":{}}', "zc-out-0"),
            ('{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"no"}}', 3),
            ('{"id":1}', 1),
        ],
    )
    def test_client_responses_say_what_they_answer(self, line: str, answers: Any) -> None:
        assert StdinFramer().feed(line.encode() + b"\n") == [Forward(line, response_to=answers)]

    def test_lines_split_across_chunks_crlf_and_blank_lines(self) -> None:
        actions = feed_all(
            StdinFramer(), b'{"id":1,"met', b'hod":"a"}\r\n\n  \n{"id":2,', b'"method":"b"}'
        )
        assert actions == [Forward('{"id":1,"method":"a"}', 1, "a")]
        # The last line has no newline: it is delivered at end of input.
        assert StdinFramer().feed(b'{"id":2,"method":"b"}') == []
        framer = StdinFramer()
        framer.feed(b'{"id":2,"method":"b"}')
        assert framer.feed(b"") == [Forward('{"id":2,"method":"b"}', 2, "b")]

    def test_over_long_request_is_answered_with_its_id(self) -> None:
        framer = StdinFramer(max_line_bytes=100)
        head = b'{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"text":"'
        actions = feed_all(framer, head, b"x" * 300, b"x" * 300, b'"}}\n{"id":1,"method":"m"}\n')
        [error] = replies(actions)
        assert error["id"] == 42
        assert error["error"]["code"] == -32600
        assert "100-byte line limit" in error["error"]["message"]
        assert actions[-1] == Forward('{"id":1,"method":"m"}', 1, "m")

    def test_over_long_line_is_dropped_without_buffering_it(self) -> None:
        framer = StdinFramer(max_line_bytes=1000)
        framer.feed(b'{"id":1,"method":"m","params":"' + b"x" * 5000)
        framer.feed(b"x" * 100_000)
        assert framer._decoder.buffered_bytes < 2000

    def test_over_long_client_response_becomes_an_error_to_the_gateway(self) -> None:
        framer = StdinFramer(max_line_bytes=50)
        line = b'{"jsonrpc":"2.0","id":"zc-out-3","result":{"content":"' + b"y" * 100 + b'"}}\n'
        [action] = framer.feed(line)
        assert isinstance(action, ReplyToGateway)
        reply = json.loads(action.text)
        assert reply["id"] == "zc-out-3"
        assert reply["error"]["code"] == -32603
        assert "dropped by the bridge" in reply["error"]["message"]

    def test_not_utf8_is_a_parse_error_with_the_id(self) -> None:
        [error] = replies(StdinFramer().feed(b'{"id":5,"method":"m","params":"\xff\xfe"}\n'))
        assert (error["id"], error["error"]["code"]) == (5, -32700)
        assert "not valid UTF-8" in error["error"]["message"]

    @pytest.mark.parametrize(
        ("line", "request_id", "code"),
        [
            (b'{"id":7,"method":"m","params":{oops}}', 7, -32700),
            (b'{"id":"s","method":"m"', "s", -32700),  # truncated
            (b"not json at all", None, -32700),
            (b"[1,2,3]", None, -32600),
            (b'"just a string"', None, -32600),
            (b"42", None, -32600),
        ],
    )
    def test_lines_that_are_not_json_objects(self, line: bytes, request_id: Any, code: int) -> None:
        [error] = replies(StdinFramer().feed(line + b"\n"))
        assert (error["id"], error["error"]["code"]) == (request_id, code)
        assert error["error"]["message"].startswith("zeroclaw-acp-bridge: ")

    def test_several_bad_lines_in_one_chunk_keep_their_own_ids(self) -> None:
        framer = StdinFramer(max_line_bytes=40)
        chunk = b"".join(
            [
                b'{"id":1,"method":"m","params":"' + b"z" * 50 + b'"}\n',
                b'{"id":2,"method":"m","params":"\xff"}\n',
                b'{"id":3,"method":"m"}\n',
                b'{"id":4,"method":"m","params":"' + b"z" * 50 + b'"}\n',
            ]
        )
        actions = framer.feed(chunk)
        assert [e["id"] for e in replies(actions)] == [1, 2, 4]
        assert Forward('{"id":3,"method":"m"}', 3, "m") in actions

    @given(
        messages=st.lists(
            st.dictionaries(
                st.sampled_from(["id", "method", "params", "x"]),
                st.one_of(st.integers(), st.text(max_size=8)),
                min_size=1,
            ),
            min_size=1,
            max_size=8,
        ),
        cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
    )
    def test_chunking_never_changes_what_is_forwarded(
        self, messages: list[dict[str, Any]], cuts: list[int]
    ) -> None:
        lines = [json.dumps(m, ensure_ascii=False) for m in messages]
        stream = "\n".join(lines).encode() + b"\n"
        whole = StdinFramer().feed(stream)
        framer = StdinFramer()
        pieces: list[StdinAction] = []
        previous = 0
        for cut in sorted({min(c, len(stream)) for c in cuts} - {0}):
            pieces += framer.feed(stream[previous:cut])  # never b"": that means EOF
            previous = cut
        pieces += framer.feed(stream[previous:]) + framer.feed(b"")
        assert pieces == whole
        assert [a.text for a in whole if isinstance(a, Forward)] == lines


class TestSniff:
    @pytest.mark.parametrize(
        ("head", "expected"),
        [
            ('{"jsonrpc":"2.0","id":3,"method":"m","params":{"a', EnvelopeHead(True, 3, True)),
            ('{"id" : "x" , "result": {"big', EnvelopeHead(True, "x", False, True)),
            ('{"params":{"id":9},"id":1,"method":"m"}', EnvelopeHead(True, 1, True)),
            ('{"params":{"id":9', EnvelopeHead()),
            ('{"id":null,"method":"m"}', EnvelopeHead(True, None, True)),
            ('{"id":{"x":1},"method":"m"}', EnvelopeHead(False, None, True)),
            ('{"id":1.5,"error":{}}', EnvelopeHead(True, 1.5, False, True)),
            ("[1]", EnvelopeHead()),
            ("", EnvelopeHead()),
            ('{"id":12', EnvelopeHead()),  # maybe 123: not readable
        ],
    )
    def test_reads_top_level_id_and_kind(self, head: str, expected: EnvelopeHead) -> None:
        assert sniff_envelope(head) == expected


@given(
    request_id=st.one_of(st.integers(), st.text(max_size=20)),
    method=st.text(min_size=1, max_size=20),
    extra=st.integers(min_value=1, max_value=300),
)
def test_sniff_reads_the_id_once_it_is_complete(request_id: Any, method: str, extra: int) -> None:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"t": "x" * 99}}
    line = json.dumps(message)
    id_end = len(json.dumps({"jsonrpc": "2.0", "id": request_id})) - 1
    envelope = sniff_envelope(line[: id_end + extra])
    assert (envelope.has_id, envelope.id) == (True, request_id)
    # Cut right after the value, the id may be incomplete (12 of 123): no guess is made.
    assert not sniff_envelope(line[:id_end]).has_id


class TestFrameToLine:
    def test_compact_frames_pass_byte_for_byte(self) -> None:
        frame = '{"jsonrpc":"2.0", "method":"x","params":{"t":"é ✓"}}'.encode()
        assert frame_to_line(frame) == frame + b"\n"

    @pytest.mark.parametrize("separator", [b"\n", b"\r\n", b"\r"])
    def test_raw_newlines_are_reserialized(self, separator: bytes) -> None:
        frame = b"{" + separator + b' "a": "x\\ny",' + separator + b' "b": [1, 2]}'
        line = frame_to_line(frame)
        assert line == b'{"a":"x\\ny","b":[1,2]}\n'
        assert json.loads(line) == json.loads(frame)

    def test_not_utf8_is_refused(self) -> None:
        with pytest.raises(FrameError, match="not UTF-8"):
            frame_to_line(b'{"a":"\xff"}')

    def test_newline_in_non_json_is_refused(self) -> None:
        with pytest.raises(FrameError, match="raw newline"):
            frame_to_line(b"hello\nworld")


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', (True, 1)),
        (b'{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":""}}', (True, "a")),
        (b'{"jsonrpc":"2.0","id":"zc-out-0","method":"session/request_permission"}', (False, None)),
        (b'{"jsonrpc":"2.0","method":"session/update","params":{"id":1}}', (False, None)),
        (b"[]", (False, None)),
        (b"{", (False, None)),
    ],
)
def test_response_id(frame: bytes, expected: tuple[bool, Any]) -> None:
    assert response_id(frame) == expected


def test_error_line_is_one_compact_json_rpc_error() -> None:
    line = error_line(7, -32603, "lost", {"bridge": "connection_lost"})
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32603,
            "message": "lost",
            "data": {"bridge": "connection_lost", "details": "lost"},
        },
    }


class TestHelpersForReconnecting:
    @pytest.mark.parametrize(
        ("frame", "expected"),
        [
            (
                b'{"jsonrpc":"2.0","id":"zc-out-1","method":"fs/read"}',
                Peek(Kind.REQUEST, "zc-out-1", "fs/read"),
            ),
            (
                b'{"jsonrpc":"2.0","method":"session/update"}',
                Peek(Kind.NOTIFICATION, method="session/update"),
            ),
            (b'{"jsonrpc":"2.0","id":3,"result":null}', Peek(Kind.RESPONSE, 3)),
            (b'{"jsonrpc":"2.0","id":3,"error":{"code":1}}', Peek(Kind.RESPONSE, 3, is_error=True)),
            (b'{"jsonrpc":"2.0","id":[1],"method":"m"}', Peek(Kind.OTHER)),
            (b"not json", Peek(Kind.OTHER)),
        ],
    )
    def test_peek(self, frame: bytes, expected: Peek) -> None:
        assert peek(frame) == expected

    @pytest.mark.parametrize(
        ("message", "expected"),
        [
            (
                '{"id":1,"method":"session/prompt","params":{"prompt":[{"t":"x"}],"sessionId":"s1"}}',
                "s1",
            ),
            ('{"id":1,"method":"session/prompt","params":{"sessionId":7}}', None),
            ('{"id":1,"method":"session/prompt","params":[1]}', None),
            ('{"id":1,"method":"session/prompt"}', None),
            ("{", None),
        ],
    )
    def test_session_id_of(self, message: str, expected: str | None) -> None:
        assert session_id_of(message) == expected

    def test_with_id_keeps_everything_else(self) -> None:
        renamed = with_id(b'{"jsonrpc":"2.0","id":"zc-out-0","result":{"a":[1,"\\u00e9"]}}', "x")
        assert json.loads(renamed) == {"jsonrpc": "2.0", "id": "x", "result": {"a": [1, "é"]}}
        with pytest.raises(FrameError):
            with_id(b"[1]", "x")
