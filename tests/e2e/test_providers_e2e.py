"""`zeroclaw acp` against a local server speaking each real provider's streaming format.

The fake model server (tests/e2e/fake_llm.py) runs in the test; the real ``zeroclaw
acp`` process reaches it through ``uri`` in config.toml, exactly as it would reach OpenAI,
OpenRouter, an Ollama box or Anthropic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.storage.sqlite import SessionStore
from tests.e2e.fake_llm import (
    Reply,
    anthropic_events,
    anthropic_text_reply,
    json_error,
    openai_chunk,
    openai_stream,
    openai_text_reply,
    openai_usage,
    serve_fake_llm,
    split_evenly,
    sse,
)
from tests.e2e.helpers import JsonDict, RpcPipeClient, open_session, spawn_acp, unused_port
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e

CEILING_SECS = 45
FILE_TEXT = "the secret word is teapot\n"
CHAT_TYPES = ("openai", "openrouter", "openai_compatible")


def provider_entry(provider_type: str, base_url: str, **extra: Any) -> JsonDict:
    uri = base_url if provider_type == "anthropic" else f"{base_url}/v1"
    return {"model": "fake-model", "api_key": "sk-e2e-key", "uri": uri, **extra}


def llm_config(providers: dict[str, JsonDict]) -> JsonDict:
    """One agent per ``providers`` entry (alias = provider type), all on one risk profile."""
    return echo_config(
        providers={kind: {"default": entry} for kind, entry in providers.items()},
        agents={kind: {"model_provider": f"{kind}.default"} for kind in providers},
    )


def tool_call_then_text(provider_type: str, text: str) -> tuple[Reply, Reply]:
    """First answer: think, then call file_read (auto-approved) in fragments; second: text."""
    arguments = {"path": "notes.txt"}
    if provider_type == "anthropic":
        first = Reply(
            chunks=anthropic_events(
                [
                    ("thinking", ["I should read ", "the notes."]),
                    ("tool_use", ("toolu_e2e", "file_read", arguments)),
                ],
                stop_reason="tool_use",
            )
        )
        return first, anthropic_text_reply(*split_evenly(text, 3))
    call_start = {"index": 0, "id": "call_e2e", "type": "function"}
    chunks = [
        openai_chunk({"role": "assistant", "reasoning": "I should read the notes."}),
        openai_chunk({"tool_calls": [{**call_start, "function": {"name": "file_read"}}]}),
        *(
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in split_evenly(json.dumps(arguments), 3)
        ),
        openai_chunk({}, finish_reason="tool_calls"),
        openai_chunk(usage=openai_usage(40, 12, reasoning=5)),
    ]
    return Reply(chunks=openai_stream(chunks)), openai_text_reply(*split_evenly(text, 3))


def tool_result_in(request_body: JsonDict) -> str:
    """The file_read result the model received, whichever wire format carried it."""
    for message in request_body["messages"]:
        if message["role"] == "tool":
            content: str = message["content"]
            return content
        if message["role"] == "user" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    result: str = block["content"]
                    return result
    raise AssertionError(f"no tool result in {request_body['messages']}")


async def prompt(client: RpcPipeClient, session_id: str, text: str) -> JsonDict:
    return await client.prompt(session_id, text)


@pytest.mark.parametrize("provider_type", [*CHAT_TYPES, "anthropic"])
async def test_whole_turn_with_reasoning_and_a_tool_call(
    tmp_path: Path, provider_type: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(FILE_TEXT)
    answer = "The secret word is teapot."
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(*tool_call_then_text(provider_type, answer)) as llm:
            config_dir = write_config(
                tmp_path / "cfg",
                llm_config({provider_type: provider_entry(provider_type, llm.base_url)}),
            )
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, workspace)
                response = await prompt(client, session_id, "What is the secret word?")
    assert response["result"]["stopReason"] == "end_turn"
    assert response["result"]["content"] == answer
    updates = client.updates(session_id)
    thoughts = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_thought_chunk"
    )
    assert thoughts == "I should read the notes."
    started = next(u for u in updates if u["sessionUpdate"] == "tool_call")
    finished = next(
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
    )
    assert started["name"] == "file_read"
    assert started["rawInput"] == {"path": "notes.txt"}
    assert finished["toolCallId"] == started["toolCallId"]
    assert finished["status"] == "completed"
    assert client.server_requests == []  # file_read is auto-approved
    streamed = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert streamed == answer
    first, second = llm.requests
    assert first.json()["stream"] is True
    assert "teapot" in tool_result_in(second.json())
    # Usage figures are kept: the session's token count in the store is input + output of
    # both model calls (reasoning tokens are part of the output, not added again).
    store = SessionStore.open(config_dir / "data" / "sessions" / "acp-sessions.db")
    try:
        stored = store.load_session(session_id)
    finally:
        store.close()
    assert stored is not None
    assert stored.info.token_count == (
        (25 + 7) * 2 if provider_type == "anthropic" else (40 + 12) + (12 + 5)
    )


async def test_each_failure_ends_the_turn_clearly_and_the_session_stays_usable(
    tmp_path: Path,
) -> None:
    """One session survives every failure kind, each answered with -32603 and a message
    a person can act on; the next prompt always works, with no half answer in history."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    no_retry_wait = [("Retry-After", "0")]
    cut = Reply(
        chunks=openai_stream([openai_chunk({"content": "Half an ans"})], done=False), ending="cut"
    )
    script: list[tuple[Reply, ...]] = [
        (json_error(401, "Incorrect API key provided"),),
        (json_error(429, "slow down", headers=no_retry_wait), openai_text_reply("after 429")),
        tuple(json_error(503, "upstream down", headers=no_retry_wait) for _ in range(3)),
        (cut,),
        (Reply(chunks=(sse(openai_chunk({"content": "zzz"})),), ending="hang"),),
    ]
    expected = [
        "Check your key",
        None,
        "server error (HTTP 503) on 3 attempt(s)",
        "ended before the response was complete",
        "sent nothing for 1 s",
    ]
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm() as llm:
            providers = {
                "openai": provider_entry("openai", llm.base_url, timeout_secs=1),
                "ollama": {"model": "llama3", "uri": f"http://127.0.0.1:{unused_port()}/v1"},
            }
            config_dir = write_config(tmp_path / "cfg", llm_config(providers))
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, workspace, agentAlias="openai")
                for replies, needle in zip(script, expected, strict=True):
                    llm.add(*replies, openai_text_reply("all good"))
                    response = await prompt(client, session_id, "go")
                    if needle is None:
                        assert response["result"]["content"] == "after 429"
                        llm.replies.clear()
                        continue
                    assert response["error"]["code"] == -32603, response
                    assert needle in response["error"]["message"]
                    recovered = await prompt(client, session_id, "again")
                    assert recovered["result"]["content"] == "all good"
                last_history = json.dumps(llm.requests[-1].json()["messages"])
                assert "Half an ans" not in last_history
                assert "zzz" not in last_history

                refused_session = await open_session(client, workspace, agentAlias="ollama")
                refused = await prompt(client, refused_session, "hello?")
    assert refused["error"]["code"] == -32603
    assert "connection refused" in refused["error"]["message"]
    assert "providers.models.ollama.default" in refused["error"]["message"]


async def test_missing_key_is_named_at_session_prompt(tmp_path: Path) -> None:
    config = llm_config(
        {"anthropic": {"model": "claude-fake", "uri": "http://127.0.0.1:9"}}
    )  # no api_key, and the helpers scrub ANTHROPIC_API_KEY from the environment
    config_dir = write_config(tmp_path / "cfg", config)
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, session_dir(tmp_path))
            response = await prompt(client, session_id, "hi")
    assert response["error"]["code"] == -32603
    assert "ANTHROPIC_API_KEY" in response["error"]["message"]


@pytest.mark.parametrize("provider_type", ["openrouter", "anthropic"])
async def test_cancel_mid_stream_aborts_the_http_stream(tmp_path: Path, provider_type: str) -> None:
    if provider_type == "anthropic":
        opening = anthropic_events([("text", ["Once upon"])], stop=False)[:4]
    else:
        opening = (sse(openai_chunk({"content": "Once upon"})),)
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(Reply(chunks=opening, ending="hang")) as llm:
            config_dir = write_config(
                tmp_path / "cfg",
                llm_config({provider_type: provider_entry(provider_type, llm.base_url)}),
            )
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, session_dir(tmp_path))
                request_id = await client.prompt_request(session_id, "tell me a story")
                await _wait_first_chunk(client, session_id)
                await client.notify("session/cancel", {"sessionId": session_id})
                response = await client.wait_response(request_id)
                await llm.wait_client_gone()
    result = response["result"]
    assert result["stopReason"] == "cancelled"
    assert result["content"].startswith("Once upon")


async def _wait_first_chunk(client: RpcPipeClient, session_id: str) -> None:
    while not any(u["sessionUpdate"] == "agent_message_chunk" for u in client.updates(session_id)):
        message = await client.receive()
        if message.get("method") == "session/update":
            client.notifications.append(message)
        else:
            raise AssertionError(f"unexpected message before the first chunk: {message}")


async def test_anthropic_failures_end_the_turn_clearly_and_the_session_stays_usable(
    tmp_path: Path,
) -> None:
    """The Messages API's own failure shapes through a real zeroclaw acp: a rejected key,
    overload (529) past the retries, an `error` event mid-stream and a cut stream."""
    no_retry_wait = [("Retry-After", "0")]
    overloaded = json_error(529, "Overloaded", headers=no_retry_wait, kind="overloaded_error")
    mid_stream_error = Reply(
        chunks=(
            *anthropic_events([("text", ["Partial"])], stop=False)[:4],
            sse(
                {"type": "error", "error": {"type": "api_error", "message": "boom"}}, event="error"
            ),
        )
    )
    cut = Reply(chunks=anthropic_events([("text", ["Half"])], stop=False)[:4], ending="cut")
    script: list[tuple[tuple[Reply, ...], str]] = [
        ((json_error(401, "invalid x-api-key", kind="authentication_error"),), "Check your key"),
        ((overloaded, overloaded, overloaded), "try again later"),
        ((mid_stream_error,), "boom"),
        ((cut,), "ended before the response was complete"),
    ]
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm() as llm:
            config_dir = write_config(
                tmp_path / "cfg",
                llm_config({"anthropic": provider_entry("anthropic", llm.base_url)}),
            )
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, session_dir(tmp_path))
                for replies, needle in script:
                    llm.add(*replies, anthropic_text_reply("all good"))
                    response = await prompt(client, session_id, "go")
                    assert response["error"]["code"] == -32603, response
                    assert needle in response["error"]["message"], response
                    assert "sk-e2e-key" not in response["error"]["message"]
                    recovered = await prompt(client, session_id, "again")
                    assert recovered["result"]["content"] == "all good"
                history = json.dumps(llm.requests[-1].json()["messages"])
    assert "Partial" not in history
    assert "Half" not in history
