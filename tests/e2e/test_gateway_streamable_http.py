"""`zeroclaw gateway` serves ACP's Streamable HTTP at ``/acp`` beside the WebSocket.

Through a real gateway process: the official Python SDK's HTTP client (``acp.http``) and
the official TypeScript SDK's HTTP and WebSocket clients (installed at test time, outside
the repository) run initialize, session/new, a streamed prompt with a permission request
answered, a cancel, and session/load on a second connection; the Python SDK's WebSocket
client still works; the bearer token is checked before any body is read; a connection
belongs to the token that opened it; the draft's request rules answer as it says; a
broken SSE stream resumes with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import acp
import httpx
import pytest
import trio
from acp.ws import create_websocket_stream

from acp_server.gateway.auth import hash_token
from tests.acp_ts_sdk import install_ts_sdk, run_ts_client
from tests.e2e.acp_sdk_http import FIRST_PROMPT, FIRST_TEXT, RecordingClient, run_python_sdk_flow
from tests.e2e.gateway_harness import run_gateway
from tests.e2e.streamable_http_client import HttpAcpClient
from tests.helpers import echo_config, session_dir, write_config
from tests.jsonrpc_peer import JsonDict

pytestmark = pytest.mark.e2e

TIMEOUT = 90
TOKEN_A = "zc_" + "a" * 64
TOKEN_B = "zc_" + "b" * 64


def _config(tmp_path: Path, *, chunk_delay_ms: int = 20, **gateway: object) -> Path:
    document = echo_config(chunk_delay_ms=chunk_delay_ms)
    document["gateway"] = {
        "require_pairing": True,
        "paired_tokens": [hash_token(TOKEN_A), hash_token(TOKEN_B)],
        **gateway,
    }
    return write_config(tmp_path / "cfg", document)


async def test_official_python_sdk_http_client_runs_a_whole_session(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    cwd = str(session_dir(tmp_path))
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.base_url + "/acp"
            seen = await trio.to_thread.run_sync(run_python_sdk_flow, url, TOKEN_A, cwd)
            await gateway.wait_for_connections(0)
    assert seen["init"].protocol_version == 1
    assert seen["init"].agent_capabilities.load_session is True
    assert seen["stop_reason"] == "end_turn"
    assert seen["first_text"] == FIRST_TEXT
    assert seen["permissions"] == ["`ls`"]
    assert seen["tool_statuses"] == ["in_progress", "completed"]
    assert seen["cancelled"] == "cancelled"
    assert seen["replayed_prompt"] == [FIRST_PROMPT]
    assert gateway.stderr().count("over Streamable HTTP") == 2


@pytest.mark.parametrize("transport", ["http", "ws"])
async def test_official_typescript_sdk_clients_run_a_whole_session(
    tmp_path: Path, transport: str
) -> None:
    package = install_ts_sdk()
    config_dir = _config(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url() if transport == "ws" else gateway.base_url + "/acp"
            seen = await run_ts_client(
                package,
                transport=transport,
                url=url,
                token=TOKEN_A,
                cwd=str(session_dir(tmp_path)),
            )
            await gateway.wait_for_connections(0)
    assert seen["protocolVersion"] == 1
    assert seen["loadSession"] is True
    assert seen["stopReason"] == "end_turn"
    assert seen["permissions"] == ["`ls`"]
    assert seen["firstText"] == "Streaming through the SDK\n\nshell returned: (no output)"
    assert seen["toolStatuses"] == ["in_progress", "completed"]
    assert seen["cancelledStopReason"] == "cancelled"
    assert seen["replayedUserTexts"] == ['Streaming through the SDK\n/tool shell {"command": "ls"}']
    assert seen["replayedText"] == seen["firstText"]


async def _python_sdk_websocket_turn(url: str, token: str, cwd: str) -> tuple[str, str]:
    client = RecordingClient()
    transport = await create_websocket_stream(url, headers={"Authorization": f"Bearer {token}"})
    connection = acp.connect_to_agent(cast(Any, client), transport)
    await connection.initialize(protocol_version=1)
    session = await connection.new_session(cwd=cwd, mcp_servers=[])
    result = await connection.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
    await connection.close()
    return result.stop_reason, client.text()


async def test_official_python_sdk_websocket_client_still_works(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    cwd = str(session_dir(tmp_path))
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            stop_reason, text = await trio.to_thread.run_sync(
                lambda: asyncio.run(
                    asyncio.wait_for(_python_sdk_websocket_turn(url, TOKEN_A, cwd), 30)
                )
            )
    assert (stop_reason, text) == ("end_turn", "hi")


# ---------------------------------------------------------------- auth and the draft's rules


async def test_no_token_is_refused_before_the_body_is_read(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            owner = HttpAcpClient(gateway.base_url, TOKEN_A)
            await owner.initialize()
            for token in (None, "zc_" + "0" * 64):
                stranger = HttpAcpClient(gateway.base_url, token)
                response = await stranger.client.post(
                    stranger.url, content=b"not json", headers=stranger.headers()
                )
                assert response.status_code == 401, response.text
                assert response.headers["WWW-Authenticate"] == "Bearer"
                # A body past the message limit, announced and never sent: answered 401 at
                # once, so nothing of it was waited for.
                head = await _raw_post_head(gateway.port, token, content_length=25 * 2**20)
                assert head.startswith(b"HTTP/1.1 401 "), head
                # Nor may it use (or probe) the owner's connection, stream or DELETE.
                stranger.connection_id = owner.connection_id
                get = await stranger.client.get(
                    stranger.url, headers={**stranger.headers(), "Accept": "text/event-stream"}
                )
                delete = await stranger.client.delete(stranger.url, headers=stranger.headers())
                assert (get.status_code, delete.status_code) == (401, 401)
                await stranger.aclose()
            # The refused requests opened nothing: only the owner's connection is there.
            await gateway.wait_for_connections(1)
            assert gateway.stderr().count("over Streamable HTTP") == 1
            await owner.aclose()


async def _raw_post_head(port: int, token: str | None, *, content_length: int) -> bytes:
    """A POST head announcing ``content_length`` bytes, then the response's head."""
    lines = [
        "POST /acp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        f"Content-Length: {content_length}",
    ]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
        response = b""
        with trio.fail_after(10):
            while b"\r\n\r\n" not in response:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                response += chunk
    return response.partition(b"\r\n\r\n")[0]


async def test_a_connection_belongs_to_the_token_that_opened_it(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            owner = HttpAcpClient(gateway.base_url, TOKEN_A)
            await owner.initialize()
            other = HttpAcpClient(gateway.base_url, TOKEN_B, connection_id=owner.connection_id)
            new = other.request("session/new", {"cwd": str(session_dir(tmp_path))})
            refused = await other.post(new)
            unknown = HttpAcpClient(gateway.base_url, TOKEN_A, connection_id="0" * 32)
            never = await unknown.post(new)
            # Another token's connection answers exactly as one that does not exist.
            assert refused.status_code == never.status_code == 404
            assert refused.json()["error"] == never.json()["error"]
            delete = await other.client.delete(other.url, headers=other.headers())
            assert delete.status_code == 404
            async with owner.events() as stream:
                assert (await owner.post(new)).status_code == 202
                _, reply = await stream.message()
                assert reply["id"] == new["id"]
                assert "sessionId" in reply["result"]
            for client in (owner, other, unknown):
                await client.aclose()


async def test_requests_are_checked_as_the_draft_says(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            client = HttpAcpClient(gateway.base_url, TOKEN_A)
            init = client.request("initialize", {"protocolVersion": 1})

            async def post(body: bytes, **headers: str) -> httpx.Response:
                return await client.client.post(
                    client.url, content=body, headers={**client.headers(), **headers}
                )

            wrong_type = await post(json.dumps(init).encode(), **{"Content-Type": "text/plain"})
            assert wrong_type.status_code == 415
            batch = await post(json.dumps([init]).encode())
            assert batch.status_code == 501
            garbled = await post(b'{"jsonrpc":')
            assert garbled.status_code == 400
            assert garbled.json()["error"]["code"] == -32700
            first = client.request("session/list", {})
            no_connection = await post(json.dumps(first).encode())
            assert no_connection.status_code == 400
            assert "Acp-Connection-Id" in no_connection.json()["error"]["message"]
            assert no_connection.json()["id"] == first["id"]

            await client.initialize()
            plain_get = await client.client.get(client.url, headers=client.headers())
            assert plain_get.status_code == 406
            prompt = client.request(
                "session/prompt", {"sessionId": "s1", "prompt": [{"type": "text", "text": "x"}]}
            )
            missing_session = await client.post(prompt)
            assert missing_session.status_code == 400
            assert "Acp-Session-Id" in missing_session.json()["error"]["message"]
            other_session = await client.post(prompt, session_id="s2")
            assert other_session.status_code == 400
            put = await client.client.put(client.url, headers=client.headers())
            assert (put.status_code, put.headers["Allow"]) == (405, "DELETE, GET, POST")
            # A GET that asks for neither transport keeps the WebSocket's hint.
            bare = await client.client.get(client.url)
            assert bare.status_code == 426
            assert "Streamable HTTP" in bare.text
            # A web page on an allowed origin may use the transport (CORS), another may not.
            page = {"Origin": "http://localhost:5173"}
            preflight = await client.client.options(client.url, headers=page)
            assert preflight.status_code == 204
            assert preflight.headers["Access-Control-Allow-Origin"] == page["Origin"]
            assert "Acp-Session-Id" in preflight.headers["Access-Control-Allow-Headers"]
            listed = await client.client.post(
                client.url,
                content=json.dumps(client.request("session/list", {})),
                headers={**client.headers(), **page},
            )
            assert listed.status_code == 202
            assert listed.headers["Access-Control-Expose-Headers"] == "Acp-Connection-Id"
            foreign = {"Origin": "https://evil.example"}
            assert (await client.client.options(client.url, headers=foreign)).status_code == 403
            # DELETE ends the connection; what it named is then unknown.
            delete = await client.client.delete(client.url, headers=client.headers())
            assert delete.status_code == 202
            await gateway.wait_for_connections(0)
            assert (await client.post(client.request("session/list", {}))).status_code == 404
            await client.aclose()


# ---------------------------------------------------------------- resuming a stream


async def _open_session(client: HttpAcpClient, cwd: Path) -> str:
    async with client.events() as stream:
        new = client.request("session/new", {"cwd": str(cwd)})
        assert (await client.post(new)).status_code == 202
        replies = await stream.until(lambda message: message.get("id") == new["id"])
    session_id: str = replies[-1]["result"]["sessionId"]
    return session_id


def _chunk_words(messages: list[JsonDict]) -> list[str]:
    return [
        message["params"]["update"]["content"]["text"]
        for message in messages
        if message.get("method") == "session/update"
        and message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]


async def test_a_broken_stream_resumes_with_last_event_id(tmp_path: Path) -> None:
    config_dir = _config(tmp_path, chunk_delay_ms=30)
    words = [f"w{index}" for index in range(40)]
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            client = HttpAcpClient(gateway.base_url, TOKEN_A)
            await client.initialize()
            session_id = await _open_session(client, session_dir(tmp_path))
            prompt = client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": " ".join(words)}]},
            )
            received: list[JsonDict] = []
            async with client.events(session_id) as stream:
                assert (await client.post(prompt, session_id=session_id)).status_code == 202
                while len(_chunk_words(received)) < 5:
                    last_id, message = await stream.message()
                    received.append(message)
                # The client thinks the stream broke mid-turn and opens it again; events go
                # on meanwhile and are held. The old GET is told it was replaced, and ends.
                async with client.events(session_id, last_event_id=last_id) as resumed:
                    event_id, message = await stream.next()
                    while event_id is not None or message == {"comment": "keepalive"}:
                        event_id, message = await stream.next()  # written before the takeover
                    assert message == {"comment": "another GET took this stream over"}
                    with pytest.raises(StopAsyncIteration):
                        await stream.next()
                    received += await resumed.until(
                        lambda message: message.get("id") == prompt["id"]
                    )
            assert received[-1]["result"]["stopReason"] == "end_turn"
            assert " ".join(_chunk_words(received)).split() == words  # no gap, no repeat
            # A resume from an event never sent is refused, saying why.
            async with client.events(session_id, last_event_id=10**9) as bogus:
                assert bogus.status == 400, bogus.body
            await client.aclose()
