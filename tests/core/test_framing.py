from __future__ import annotations

import pytest

from acp_core.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from acp_core.framing import DEFAULT_MAX_LINE_BYTES, LineDecoder, encode_line


def drain(decoder: LineDecoder) -> list[str]:
    lines = []
    while (line := decoder.next_line()) is not None:
        lines.append(line)
    return lines


def test_default_limit_fits_a_10_mib_blob_in_base64() -> None:
    assert DEFAULT_MAX_LINE_BYTES >= 16 * 1024 * 1024
    assert DEFAULT_MAX_LINE_BYTES > (10 * 1024 * 1024 * 4) // 3 + 64 * 1024


def test_partial_lines_across_feeds_crlf_and_blank_lines() -> None:
    decoder = LineDecoder()
    decoder.feed(b'{"a":')
    assert decoder.next_line() is None
    decoder.feed(b"1}\r\n\r\n   \n{")
    assert drain(decoder) == ['{"a":1}']
    decoder.feed(b'"b":2}\n')
    assert drain(decoder) == ['{"b":2}']


def test_final_line_without_newline_is_returned_at_eof() -> None:
    decoder = LineDecoder()
    decoder.feed(b"last")
    assert decoder.next_line() is None
    decoder.feed(b"")
    assert decoder.at_eof
    assert drain(decoder) == ["last"]


def test_feed_after_eof_is_a_caller_bug() -> None:
    decoder = LineDecoder()
    decoder.feed(b"")
    decoder.feed(b"")
    with pytest.raises(LocalProtocolError):
        decoder.feed(b"x")


def test_overlong_line_in_one_chunk_is_reported_and_decoder_recovers() -> None:
    decoder = LineDecoder(max_line_bytes=8)
    decoder.feed(b"123456789\nok\n")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_line()
    assert info.value.reply_hint is not None
    assert info.value.reply_hint.error.code == ErrorCode.INVALID_REQUEST
    assert info.value.reply_hint.id is None
    assert "8-byte line limit" in str(info.value)
    assert drain(decoder) == ["ok"]


def test_overlong_line_streamed_in_pieces_keeps_memory_bounded() -> None:
    decoder = LineDecoder(max_line_bytes=16)
    decoder.feed(b"x" * 20)
    assert decoder.next_line() is None
    assert decoder.buffered_bytes == 0  # discarded, not held
    for _ in range(100):
        decoder.feed(b"y" * 1000)
        assert decoder.next_line() is None
        assert decoder.buffered_bytes == 0
    decoder.feed(b"zz\nnext\n")
    with pytest.raises(RemoteProtocolError, match="exceeds the 16-byte line limit"):
        decoder.next_line()
    assert drain(decoder) == ["next"]


def test_line_exactly_at_the_limit_is_accepted() -> None:
    decoder = LineDecoder(max_line_bytes=4)
    decoder.feed(b"abcd\r\n")
    assert drain(decoder) == ["abcd"]


def test_invalid_utf8_is_a_parse_error_and_the_stream_continues() -> None:
    decoder = LineDecoder()
    decoder.feed(b"\xff\xfe\nfine\n")
    with pytest.raises(RemoteProtocolError) as info:
        decoder.next_line()
    assert info.value.reply_hint is not None
    assert info.value.reply_hint.error.code == ErrorCode.PARSE_ERROR
    assert "UTF-8" in info.value.reply_hint.error.message
    assert drain(decoder) == ["fine"]


def test_zero_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineDecoder(max_line_bytes=0)


def test_encode_line_appends_one_newline_and_refuses_embedded_ones() -> None:
    assert encode_line(b"{}") == b"{}\n"
    for bad in (b"{\n}", b"{\r}"):
        with pytest.raises(LocalProtocolError):
            encode_line(bad)


def test_overlong_final_line_is_reported_at_eof() -> None:
    decoder = LineDecoder(max_line_bytes=4)
    decoder.feed(b"ok\n123456")
    assert drain(decoder) == ["ok"]
    decoder.feed(b"789")
    decoder.feed(b"")
    with pytest.raises(RemoteProtocolError, match="exceeds the 4-byte line limit"):
        decoder.next_line()
    assert decoder.next_line() is None
