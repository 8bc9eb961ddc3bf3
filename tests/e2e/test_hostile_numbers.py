"""Numbers and envelopes JSON allows but a naive reader chokes on, through the real
`zeroclaw acp` and `zeroclaw gateway`: each fails only its own message, with the error
JSON-RPC 2.0 requires, and serving goes on."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import RpcPipeClient, open_session, spawn_acp
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e

TOO_BIG = "1e400"
"""A JSON number no IEEE double holds."""
BIG_ID = "123456789012345678901234567890"
BEYOND_DOUBLE = "-2.5E+310"
"""Another spelling of a number no double holds."""


async def _next_response(client: RpcPipeClient) -> dict[str, object]:
    while True:
        message = await client.receive()
        if "method" not in message:
            return message


async def test_zeroclaw_acp_answers_each_hostile_line_and_keeps_serving(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(60):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)

            # In a request's params: -32602 with that request's id.
            await client.send_raw(
                '{"jsonrpc":"2.0","id":41,"method":"session/prompt","params":'
                f'{{"sessionId":"{session_id}","prompt":"hi","weight":{TOO_BIG}}}}}'
            )
            refused = await _next_response(client)
            assert refused["id"] == 41
            assert refused["error"]["code"] == -32602  # type: ignore[index]

            # Anywhere in it, also where the typed reader skips a field (a block's _meta).
            await client.send_raw(
                '{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":'
                f'{{"sessionId":"{session_id}","prompt":[{{"type":"text","text":"hi",'
                f'"_meta":{{"x":{BEYOND_DOUBLE}}}}}]}}}}'
            )
            refused = await _next_response(client)
            assert refused["id"] == 42
            assert refused["error"]["code"] == -32602  # type: ignore[index]

            # In a notification: nothing to answer, and nothing breaks.
            await client.send_raw(
                f'{{"jsonrpc":"2.0","method":"session/update","params":{{"x":-{TOO_BIG}}}}}'
            )

            # Neither method nor id: -32600 with a null id.
            await client.send_raw("{}")
            empty = await _next_response(client)
            assert empty["id"] is None
            assert empty["error"]["code"] == -32600  # type: ignore[index]

            # An integer id of any size comes back exactly.
            await client.send_raw(
                f'{{"jsonrpc":"2.0","id":{BIG_ID},"method":"initialize","params":{{}}}}'
            )
            answered = await _next_response(client)
            assert answered["id"] == int(BIG_ID)
            assert f'"id":{BIG_ID}' in client.raw_lines[-1]

            # The answer to a permission request carries one: the request fails (denied),
            # the turn still ends normally.
            async def unreadable_answer(request: dict[str, object]) -> None:
                await client.send_raw(
                    f'{{"jsonrpc":"2.0","id":"{request["id"]}","result":'
                    f'{{"outcome":{{"outcome":"selected","optionId":"allow-once"}},"n":{TOO_BIG}}}}}'
                )

            prompt = 'go\n/tool shell {"command": "echo should-not-run"}'
            response = await client.prompt(session_id, prompt, on_request=unreadable_answer)
            assert response["result"]["stopReason"] == "end_turn"
            [done] = [
                u
                for u in client.updates(session_id)
                if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
            ]
            assert done["status"] == "failed"  # not approved: the command never ran
            assert "should-not-run" not in done["rawOutput"].splitlines()

            # And the session still serves an ordinary turn.
            again = await client.prompt(session_id, "still here")
            assert again["result"]["content"].startswith("still here")
        assert client.process.returncode == 0


async def test_the_gateway_keeps_a_connection_that_sent_a_hostile_number(tmp_path: Path) -> None:
    document = echo_config(chunk_delay_ms=20)
    document["gateway"] = {"require_pairing": False}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway, ws_connect(gateway.ws_url()) as ws:
            rpc = WsRpc(ws)
            session_id = await rpc.new_session(session_dir(tmp_path))
            prompt_id = await rpc.request(
                "session/prompt", {"sessionId": session_id, "prompt": "one two three four"}
            )
            # Mid-turn, a notification and a request the old reader died on.
            await rpc.send_raw(
                f'{{"jsonrpc":"2.0","method":"session/update","params":{{"x":{TOO_BIG}}}}}'
            )
            bad_id = await rpc.request("session/cancel", {"sessionId": session_id})
            await rpc.send_raw(
                '{"jsonrpc":"2.0","id":"hostile","method":"session/stop","params":'
                f'{{"sessionId":{TOO_BIG}}}}}'
            )
            hostile = await rpc.wait_response("hostile")
            assert hostile["error"]["code"] == -32602
            await rpc.send_raw(
                '{"jsonrpc":"2.0","id":"in-meta","method":"session/prompt","params":'
                f'{{"sessionId":"{session_id}","prompt":[{{"type":"text","text":"x",'
                f'"_meta":{{"x":{BEYOND_DOUBLE}}}}}]}}}}'
            )
            in_meta = await rpc.wait_response("in-meta")
            assert in_meta["error"]["code"] == -32602
            # The running prompt is still answered on the same connection.
            answered = await rpc.wait_response(prompt_id)
            assert answered["result"]["stopReason"] in ("end_turn", "cancelled")
            assert "result" in await rpc.wait_response(bad_id)
