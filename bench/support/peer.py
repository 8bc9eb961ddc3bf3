"""The benchmarks' ACP client: just enough JSON-RPC over a child's pipes to run turns fast.

The client must not be the bottleneck: lines are split in C and only a line that can be a
response (no ``"method"``) or a permission request is decoded; notifications are merely
counted. A ``session/request_permission`` request is answered with the option named
``allow_option`` (the bench user approves every tool call once).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
import trio

from acp_core.framing import encode_line

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode

RECEIVE_BYTES: Final = 1 << 18
PERMISSION_METHOD: Final = b'"session/request_permission"'


class Peer:
    """A JSON-RPC client over a child process's stdin/stdout."""

    def __init__(self, process: trio.Process, *, allow_option: str = "allow-once") -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.allow_option = allow_option
        self.pending = b""
        self.next_id = 0
        self.permissions_answered = 0

    async def call(self, method: str, params: dict[str, Any]) -> tuple[Any, int]:
        """Returns (result, notifications received before it)."""
        self.next_id += 1
        request_id = self.next_id
        await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        notes = 0
        while True:
            data = await self.stdout.receive_some(RECEIVE_BYTES)
            if not data:
                raise EOFError("agent closed stdout")
            lines = (self.pending + bytes(data)).split(b"\n")
            self.pending = lines.pop()
            for index, line in enumerate(lines):
                if b'"method"' in line:
                    if PERMISSION_METHOD in line:
                        await self._approve(_decode(line))
                    else:
                        notes += 1
                    continue
                message = _decode(line)
                if message.get("id") != request_id:
                    continue
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                rest = lines[index + 1 :]
                self.pending = b"".join(line + b"\n" for line in rest) + self.pending
                return message["result"], notes

    async def _approve(self, request: dict[str, Any]) -> None:
        if "id" not in request:
            return
        self.permissions_answered += 1
        outcome = {"outcome": "selected", "optionId": self.allow_option}
        await self._send({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}})

    async def _send(self, message: dict[str, Any]) -> None:
        await self.stdin.send_all(encode_line(_encode(message)))
