"""A model server for the benchmarks: stdlib ``http.server`` in a thread, answering at once.

It speaks both real streaming wire formats, built by the same helpers the end-to-end tests
use (tests/e2e/fake_llm.py): Chat Completions chunks on ``…/chat/completions`` (OpenAI,
OpenRouter, OpenAI-compatible servers) and Messages API events on ``…/v1/messages``
(Anthropic). Unlike the tests' server it keeps connections alive (HTTP/1.1, chunked
transfer encoding, one HTTP chunk per server-sent event) as the real services do, and every
body is built once, before the first request.

What it answers depends on the conversation's last message:

- a tool result → ``AFTER_TOOL_TEXT`` (the model's summary);
- a user message containing ``TOOL_TRIGGER`` → a ``shell`` call of ``echo hi``;
- a user message containing ``LONG_TRIGGER`` → ``long_words`` words, one chunk each;
- anything else → ``SHORT_REPLY`` (five words).

``take_server_seconds`` returns the time spent answering since the last call: from the
moment a request's head was read to the moment its last byte was handed to the kernel. A
benchmark subtracts it from a turn's time to get what the agent itself added.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from tests.e2e.fake_llm import (
    anthropic_text_reply,
    anthropic_tool_reply,
    openai_text_reply,
    openai_tool_reply,
)

SHORT_REPLY: Final = ("Hello", " there,", " how", " are", " you?")
AFTER_TOOL_TEXT: Final = ("The", " command", " printed", " hi.")
TOOL_TRIGGER: Final = "run echo"
LONG_TRIGGER: Final = "long answer"
SHELL_CALL: Final = ("call_bench_1", "shell", {"command": "echo hi"})
ANTHROPIC_SHELL_CALL: Final = ("toolu_bench_1", "shell", {"command": "echo hi"})
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024


def chunked(events: Iterable[bytes]) -> bytes:
    """One HTTP/1.1 chunk per event, then the last chunk (RFC 9112, chunked coding)."""
    parts = [b"%x\r\n%s\r\n" % (len(event), event) for event in events if event]
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


def long_text(words: int) -> list[str]:
    return [f"word{index} " for index in range(words)]


def build_bodies(long_words: int) -> dict[tuple[str, str], bytes]:
    """(wire format, answer kind) → the whole chunked response body."""
    words = long_text(long_words)
    return {
        ("openai", "short"): chunked(openai_text_reply(*SHORT_REPLY).chunks),
        ("openai", "after_tool"): chunked(openai_text_reply(*AFTER_TOOL_TEXT).chunks),
        ("openai", "tool"): chunked(openai_tool_reply([SHELL_CALL]).chunks),
        ("openai", "long"): chunked(openai_text_reply(*words).chunks),
        ("anthropic", "short"): chunked(anthropic_text_reply(*SHORT_REPLY).chunks),
        ("anthropic", "after_tool"): chunked(anthropic_text_reply(*AFTER_TOOL_TEXT).chunks),
        ("anthropic", "tool"): chunked(anthropic_tool_reply([ANTHROPIC_SHELL_CALL]).chunks),
        ("anthropic", "long"): chunked(anthropic_text_reply(*words).chunks),
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return ""


def answer_kind(wire: str, request: dict[str, Any]) -> str:
    messages = request.get("messages") or [{}]
    last = messages[-1]
    content = last.get("content")
    if wire == "openai" and last.get("role") == "tool":
        return "after_tool"
    if (
        wire == "anthropic"
        and isinstance(content, list)
        and any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content)
    ):
        return "after_tool"
    text = _text_of(content)
    if TOOL_TRIGGER in text:
        return "tool"
    if LONG_TRIGGER in text:
        return "long"
    return "short"


class FakeProvider:
    """Serve on 127.0.0.1 (an ephemeral port) until ``close``."""

    def __init__(self, *, long_words: int) -> None:
        self.bodies = build_bodies(long_words)
        self._lock = threading.Lock()
        self._server_seconds = 0.0
        self.requests = 0
        self.connections = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real services
            disable_nagle_algorithm = True  # head and body go out at once

            def setup(self) -> None:
                super().setup()
                with provider._lock:
                    provider.connections += 1

            def do_POST(self) -> None:
                started = time.perf_counter()
                length = int(self.headers.get("content-length") or 0)
                if length > MAX_REQUEST_BYTES:
                    self.send_error(413)
                    return
                request = json.loads(self.rfile.read(length))
                wire = "anthropic" if self.path.endswith("/messages") else "openai"
                body = provider.bodies[(wire, answer_kind(wire, request))]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(body)
                provider._add(time.perf_counter() - started)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the benchmark's output is its figures

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _add(self, seconds: float) -> None:
        with self._lock:
            self._server_seconds += seconds
            self.requests += 1

    def take_server_seconds(self) -> float:
        with self._lock:
            seconds, self._server_seconds = self._server_seconds, 0.0
        return seconds

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
