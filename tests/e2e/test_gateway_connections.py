"""Each gateway connection is its own ACP server: own session map, own
`max_sessions` budget, own `zc-out-N` counter, over one shared store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

MAX_SESSIONS_REACHED = -32001
SESSION_NOT_FOUND = -32000


async def _ask_and_reject(rpc: WsRpc, session_id: str, path: str) -> str:
    """Prompt a file write (needs approval in supervised mode), reject it; return the
    permission request's id."""
    prompt = f'/tool file_write {{"path": "{path}", "content": "x"}}'
    request_id = await rpc.prompt_request(session_id, prompt)
    while True:
        message = await rpc.receive()
        if message.get("method") == "session/request_permission":
            break
    await rpc.send(
        {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "reject-once"}},
        }
    )
    reply = await rpc.wait_response(request_id)
    assert reply["result"]["stopReason"] == "end_turn", reply
    permission_id: str = message["id"]
    return permission_id


async def test_each_connection_has_its_own_budget_sessions_and_request_ids(
    tmp_path: Path,
) -> None:
    document = echo_config(max_sessions=1)
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(60):
        async with (
            run_gateway(config_dir) as gateway,
            ws_connect(gateway.ws_url()) as ws_a,
            ws_connect(gateway.ws_url()) as ws_b,
        ):
            a, b = WsRpc(ws_a), WsRpc(ws_b)
            session_a = await a.new_session(workspace)
            # max_sessions = 1 is this connection's budget...
            refused: dict[str, Any] = await a.call("session/new", {"cwd": str(workspace)})
            assert refused["error"]["code"] == MAX_SESSIONS_REACHED, refused
            # ...not the daemon's: the other connection still gets its session.
            session_b = await b.new_session(workspace)

            # Sessions are per connection: B cannot drive A's live session.
            foreign = await b.prompt(session_a, "hi")
            assert foreign["error"]["code"] == SESSION_NOT_FOUND, foreign

            # Server → client request ids count per connection, from zc-out-0.
            assert await _ask_and_reject(a, session_a, "a.txt") == "zc-out-0"
            assert await _ask_and_reject(b, session_b, "b.txt") == "zc-out-0"
            assert await _ask_and_reject(a, session_a, "a2.txt") == "zc-out-1"
    assert not list(workspace.iterdir())  # every write was rejected
