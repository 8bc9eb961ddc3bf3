"""Newline-delimited JSON framing (ACP stdio transport), sans-IO.

Feed bytes in any chunking with ``LineDecoder.feed``; pull complete lines with
``LineDecoder.next_line`` until it returns None before feeding again (memory then stays
within one line limit plus one chunk). A line that is too long or not UTF-8 raises
``RemoteProtocolError`` (its ``reply_hint`` says how to answer) and the decoder
resynchronises at the next newline, so one bad line never stops the stream.

ACP: "Messages are delimited by newlines (\\n), and MUST NOT contain embedded newlines."
CRLF is tolerated on input and blank lines are skipped.
"""

from __future__ import annotations

from typing import Final

from acp_core.errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from acp_core.jsonrpc import ErrorResponse, error_object

MIB: Final = 1024 * 1024
DEFAULT_MAX_LINE_BYTES: Final = 24 * MIB
"""Room for a 10 MiB blob in base64 (≈13.4 MiB) plus the envelope and other parts."""


class LineDecoder:
    """Splits a byte stream into lines.

    Args:
        max_line_bytes: the longest line accepted, newline excluded. Longer lines are
            discarded as they stream in (memory stays bounded) and reported once.
    """

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._buffer = bytearray()
        self._scan_from = 0
        self._discarding = False  # inside an over-long line, waiting for its newline
        self._discarded_bytes = 0
        self._overlong_pending = False
        self._eof = False

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    @property
    def at_eof(self) -> bool:
        return self._eof

    def feed(self, data: bytes) -> None:
        """Add bytes from the peer. ``b""`` means end of stream."""
        if self._eof:
            if data:
                raise LocalProtocolError("feed() after end of stream")
            return
        if not data:
            self._eof = True
            if self._discarding:
                # The over-long line ended with the stream: still report it once.
                self._discarding = False
                self._overlong_pending = True
            return
        if self._discarding:
            newline = data.find(b"\n")
            if newline < 0:
                self._discarded_bytes += len(data)
                return
            self._discarded_bytes += newline
            self._discarding = False
            self._overlong_pending = True
            data = data[newline + 1 :]
        self._buffer += data

    def next_line(self) -> str | None:
        """Return the next complete line (without its newline), or None if more data is needed.

        At end of stream a final line without a newline is still returned.

        Raises:
            RemoteProtocolError: the next line was too long or not valid UTF-8; it has been
                consumed, so calling again continues with the following line.
        """
        while True:
            if self._overlong_pending:
                self._overlong_pending = False
                raise _too_long(self._discarded_bytes, self.max_line_bytes)
            newline = self._buffer.find(b"\n", self._scan_from)
            if newline < 0:
                if len(self._buffer) > self.max_line_bytes:
                    # Drop what we hold and skip the rest of this line as it arrives.
                    self._discarded_bytes = len(self._buffer)
                    self._buffer.clear()
                    self._scan_from = 0
                    self._discarding = True
                    return None
                self._scan_from = len(self._buffer)
                if self._eof and self._buffer:
                    raw = bytes(self._buffer)
                    self._buffer.clear()
                    self._scan_from = 0
                    line = _decode(raw.rstrip(b"\r"), self.max_line_bytes)
                    if line.strip():
                        return line
                return None
            raw = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            self._scan_from = 0
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if len(raw) > self.max_line_bytes:
                raise _too_long(len(raw), self.max_line_bytes)
            if not raw.strip():
                continue
            return _decode(raw, self.max_line_bytes)


def _decode(raw: bytes, limit: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"Parse error: line is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        raise RemoteProtocolError(
            msg,
            reply_hint=ErrorResponse(id=None, error=error_object(int(ErrorCode.PARSE_ERROR), msg)),
        ) from None


def _too_long(size: int, limit: int) -> RemoteProtocolError:
    msg = (
        f"Invalid Request: message of {size}+ bytes exceeds the {limit}-byte line limit; "
        "it was discarded"
    )
    return RemoteProtocolError(
        msg,
        reply_hint=ErrorResponse(id=None, error=error_object(int(ErrorCode.INVALID_REQUEST), msg)),
    )


def encode_line(payload: bytes) -> bytes:
    """Frame one serialised message as one line.

    Raises:
        LocalProtocolError: the payload contains a raw newline (it would split the message).
    """
    if b"\n" in payload or b"\r" in payload:
        raise LocalProtocolError("a message must not contain a raw newline")
    return payload + b"\n"
