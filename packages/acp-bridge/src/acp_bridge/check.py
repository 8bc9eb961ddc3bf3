"""``zeroclaw-acp-bridge --check``: the doctor an admin runs first.

Connects and authenticates exactly as the relay would, runs ``initialize``, and reports the
gateway URL, how the bridge authenticated, the agent, the protocol version and round-trip
latency. The report goes to stdout: ``--check`` is not stdio mode, and stdout is where a
person (or a script) looks for a command's answer. Failures go to stderr with the usual
exit codes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import msgspec
import trio
from websockets.exceptions import ConnectionClosed

from acp_bridge import __version__
from acp_bridge.connection import GatewayConnection
from acp_bridge.errors import BridgeExit, ExitCode
from acp_bridge.gateway import ConnectOptions, describe_close, open_gateway
from acp_bridge.messages import response_id
from acp_core import methods

CHECK_REQUEST_ID: Final = "zeroclaw-acp-bridge-check"
DEFAULT_CHECK_TIMEOUT_SECS: Final = 10.0
ACP_PROTOCOL_VERSION: Final = 1


def initialize_request() -> bytes:
    return msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "id": CHECK_REQUEST_ID,
            "method": methods.INITIALIZE,
            "params": {
                "protocolVersion": ACP_PROTOCOL_VERSION,
                "clientCapabilities": {},
                "clientInfo": {"name": "zeroclaw-acp-bridge", "version": __version__},
            },
        }
    )


async def run_check(options: ConnectOptions, write: Callable[[str], object]) -> int:
    """Run the check, writing the report with ``write``; returns 0 or raises BridgeExit."""
    timeout = DEFAULT_CHECK_TIMEOUT_SECS
    async with open_gateway(options) as connection:
        try:
            with trio.move_on_after(timeout) as scope:
                started = time.perf_counter()
                await connection.send(initialize_request())
                frame = await _response_to(connection, CHECK_REQUEST_ID)
                initialize_ms = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                pong = await connection.ping()
                while not pong.is_set():
                    await connection.receive()  # the pong is read with whatever comes
                ping_ms = (time.perf_counter() - started) * 1000
        except ConnectionClosed as exc:
            raise BridgeExit(
                ExitCode.CONNECTION,
                f"ERROR: {describe_close(exc, connection)} ({options.url}) during initialize.",
            ) from None
        if scope.cancelled_caught:
            raise BridgeExit(
                ExitCode.CONNECTION,
                f"ERROR: the gateway at {options.url} accepted the connection but did not "
                f"answer initialize within {timeout:g} s.",
            )
        reply: Any = msgspec.json.decode(frame)
        error = reply.get("error")
        if error is not None:
            raise BridgeExit(
                ExitCode.CONNECTION,
                f"ERROR: the gateway at {options.url} answered initialize with an error: "
                f"{msgspec.json.encode(error).decode()}",
            )
        result = reply.get("result")
        result = result if isinstance(result, dict) else {}
        write(_report(options, result, initialize_ms, ping_ms))
    return int(ExitCode.OK)


async def _response_to(connection: GatewayConnection, request_id: str) -> bytes:
    """The gateway's response to ``request_id`` (other frames are skipped)."""
    while True:
        for frame in await connection.receive():
            is_response, answered = response_id(frame)
            if is_response and answered == request_id:
                return frame


def _report(
    options: ConnectOptions, result: dict[str, Any], initialize_ms: float, ping_ms: float
) -> str:
    info = result.get("agentInfo")
    info = info if isinstance(info, dict) else {}
    name = info.get("title") or info.get("name") or "(no agentInfo)"
    version = info.get("version")
    agent = f"{name} {version}" if version else str(name)
    if info.get("name") and info.get("title"):
        agent += f" ({info['name']})"
    rows = [
        ("gateway", options.url),
        ("auth", options.credentials.describe()),
        ("agent", agent),
        ("protocol", str(result.get("protocolVersion", "(none)"))),
        ("latency", f"initialize {initialize_ms:.1f} ms, WebSocket ping {ping_ms:.1f} ms"),
    ]
    width = max(len(label) for label, _ in rows) + 1
    lines = [f"{label + ':':<{width}} {value}" for label, value in rows]
    return "\n".join([*lines, "OK: the bridge can reach and use this gateway", ""])
