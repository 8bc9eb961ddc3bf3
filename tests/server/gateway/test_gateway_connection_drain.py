"""What a gateway drain asks of the ACP connection: refuse new requests, let running ones end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from acp_server.protocol.connection import AcpConnection
from acp_server.protocol.services.context import AcpApp
from tests.helpers import make_config, rpc_error, session_dir
from tests.server.server_harness import MemoryTransport, ScriptedProvider, text_round


class Peer:
    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport

    async def send(self, message: dict[str, Any]) -> None:
        await self.transport.client_send.send(json.dumps({"jsonrpc": "2.0", **message}))

    async def until(self, wanted: Any) -> dict[str, Any]:
        """The next message for which ``wanted(message)`` is true (others are skipped)."""
        while True:
            message: dict[str, Any] = json.loads(await self.transport.client_receive.receive())
            if wanted(message):
                return message


async def test_running_requests_are_awaited_and_new_ones_refused(tmp_path: Path) -> None:
    gate = trio.Event()
    provider = ScriptedProvider([text_round("slow", " answer")], gate=gate)
    app = AcpApp(
        config=make_config(tmp_path),
        store=None,
        provider_factory=lambda _config: provider,
        tools_factory=lambda _agent, _workspace, _config: {},
        launch_dir=tmp_path,
    )
    transport = MemoryTransport()
    connection = AcpConnection(app, transport)
    peer = Peer(transport)
    idle = trio.Event()

    async def wait_idle() -> None:
        await connection.wait_idle()
        idle.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.run)
            await peer.send(
                {"id": 1, "method": "session/new", "params": {"cwd": str(session_dir(tmp_path))}}
            )
            created = await peer.until(lambda message: message.get("id") == 1)
            session_id = created["result"]["sessionId"]
            prompt = [{"type": "text", "text": "hi"}]
            await peer.send(
                {
                    "id": 7,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": prompt},
                }
            )
            # The turn has started (its first chunk is out) and is held at the gate.
            await peer.until(lambda message: message.get("method") == "session/update")
            assert connection.active_requests == 1

            connection.refuse_new_requests("draining")
            nursery.start_soon(wait_idle)
            await peer.send(
                {"id": 9, "method": "session/new", "params": {"cwd": str(session_dir(tmp_path))}}
            )
            refusal = await peer.until(lambda message: message.get("id") == 9)
            assert refusal == {
                "jsonrpc": "2.0",
                "id": 9,
                "error": rpc_error(-32603, "draining"),
            }
            # Only the request accepted before the refusal is awaited by a drain.
            assert connection.active_requests == 1
            assert not idle.is_set()

            # A cancel notification still gets through, so the running turn can end.
            await peer.send({"method": "session/cancel", "params": {"sessionId": session_id}})
            gate.set()
            answered = await peer.until(lambda message: message.get("id") == 7)
            assert answered["result"]["stopReason"] == "cancelled"
            await idle.wait()
            assert connection.active_requests == 0
            await transport.client_send.aclose()
