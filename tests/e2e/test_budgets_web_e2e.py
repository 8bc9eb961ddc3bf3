"""Budgets and web tools as a user meets them: a real ``zeroclaw acp`` talking to a local
fake OpenAI-compatible server (tests/e2e/fake_llm.py) that records every request.

The action budget trips after N counted calls (the model gets the rate-limit error and
the turn goes on); a cost cap fails the next turn with -32603 naming the cap, and
``zeroclaw cost`` shows what was spent; web_fetch reaches a local page only with
``[web] allow_private_hosts = true``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.agent.limits.actions import RATE_LIMIT_ERROR
from tests.e2e.fake_llm import (
    Reply,
    openai_chunk,
    openai_stream,
    openai_text_reply,
    openai_tool_reply,
    openai_usage,
    serve_fake_llm,
)
from tests.e2e.helpers import (
    JsonDict,
    allow_once,
    child_env,
    console_script,
    offline_prefix,
    open_session,
    reject_once,
    spawn_acp,
)
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e  # binds 127.0.0.1

CEILING_SECS = 60
AGENT = "coder"


def config_for(base_url: str, **sections: Any) -> JsonDict:
    runtime = sections.pop("runtime", None)
    document = echo_config(
        providers={
            "openai": {"default": {"model": "fake-model", "api_key": "sk-e2e", "uri": base_url}}
        },
        agents={AGENT: {"model_provider": "openai.default"}},
        runtime=runtime,
    )
    document.update(sections)
    return document


def tool_results(request_json: JsonDict) -> list[str]:
    return [m["content"] for m in request_json["messages"] if m["role"] == "tool"]


async def test_action_budget_trips_after_n_calls_and_the_turn_goes_on(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("note-marker\n")
    read = ("file_read", {"path": "notes.txt"})
    replies = [openai_tool_reply([(f"call-{n}", *read)]) for n in range(3)]
    replies.append(openai_text_reply("done"))
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(*replies) as llm:
            config = config_for(f"{llm.base_url}/v1", runtime={"max_actions_per_hour": 2})
            config_dir = write_config(tmp_path / "cfg", config)
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, project)
                response = await client.prompt(session_id, "read it three times")
    assert response["result"]["stopReason"] == "end_turn", response
    results = tool_results(llm.requests[-1].json())
    assert len(results) == 3
    assert "note-marker" in results[0]
    assert "note-marker" in results[1]
    assert results[2] == f"Error: {RATE_LIMIT_ERROR}"
    finished = [
        update
        for update in client.updates(session_id)
        if update.get("sessionUpdate") == "tool_call_update" and update.get("toolCallId") == "call-2"
        and update.get("status") in ("completed", "failed")
    ]  # fmt: skip
    assert RATE_LIMIT_ERROR in str(finished[-1]["content"])


async def test_a_call_that_ran_keeps_its_slot_even_when_it_failed(tmp_path: Path) -> None:
    """Failing commands still ran their side effects: they use the budget. Calls refused
    before running (bad arguments, the jail, a rejected approval) do not."""
    project = tmp_path / "project"
    project.mkdir()
    failing = '/tool shell {"command": "echo ran >> marker.txt; cat no-such-file"}'
    prompt = "\n".join(
        [
            '/tool file_read {"path": 5}',
            '/tool file_read {"path": "/etc/hostname"}',
            '/tool shell {"command": "echo rejected >> marker.txt"}',
            *[failing] * 6,
        ]
    )
    answers = iter([reject_once, *[allow_once] * 6])

    def answer(request: JsonDict) -> JsonDict:
        return next(answers)(request)

    config = echo_config(runtime={"max_actions_per_hour": 2})
    config_dir = write_config(tmp_path / "cfg", config)
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, project)
            response = await client.prompt(session_id, prompt, on_request=answer)
    assert response["result"]["stopReason"] == "end_turn", response
    assert (project / "marker.txt").read_text() == "ran\nran\n"
    outputs = [
        update.get("rawOutput")
        for update in client.updates(session_id)
        if update.get("sessionUpdate") == "tool_call_update"
        and update.get("status") in ("completed", "failed")
    ]  # fmt: skip
    assert len(outputs) == 9
    assert [RATE_LIMIT_ERROR in str(output) for output in outputs] == [False] * 5 + [True] * 4


def priced_reply(text: str, cost_usd: float) -> Reply:
    """A text answer whose usage carries OpenRouter's ``cost`` field."""
    usage = {**openai_usage(12, 5), "cost": cost_usd}
    chunks = [
        openai_chunk({"role": "assistant", "content": text}),
        openai_chunk({}, finish_reason="stop"),
        openai_chunk(usage=usage),
    ]
    return Reply(chunks=openai_stream(chunks))


async def test_a_cost_cap_fails_the_turn_with_the_cap_and_zeroclaw_cost_shows_it(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        async with serve_fake_llm(priced_reply("first", 0.03)) as llm:
            config = config_for(f"{llm.base_url}/v1", cost={"daily_limit_usd": 0.02})
            config_dir = write_config(tmp_path / "cfg", config)
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, session_dir(tmp_path))
                first = await client.prompt(session_id, "one")
                second = await client.prompt(session_id, "two")
        shown = await trio.run_process(
            [str(console_script("zeroclaw")), "cost"],
            capture_stdout=True,
            env=child_env(config_dir),
        )
    assert first["result"]["stopReason"] == "end_turn", first
    error = second["error"]
    assert error["code"] == -32603
    assert error["message"].startswith(
        "Agent turn failed: Budget exceeded: $0.0300 of $0.02 daily limit ([cost] daily_limit_usd)."
    )
    assert "until the budget resets at " in error["message"]
    assert "00:00 UTC" in error["message"]
    assert len(llm.requests) == 1  # the refused turn never reached the model
    output = shown.stdout.decode()
    assert f"  {AGENT}  (operator)  1      12     5       0.0300" in output
    assert "of $0.02" in output


async def fetch_through_acp(tmp_path: Path, *, allow_private_hosts: bool) -> tuple[str, int]:
    """One turn in which the model calls web_fetch on a local page: (the tool result,
    how many requests the page's server saw)."""
    page = Reply(
        chunks=(b"<html><body><h1>Local docs</h1><script>x()</script></body></html>",),
        content_type="text/html",
    )
    async with serve_fake_llm(page) as site:
        call = ("fetch-1", "web_fetch", {"url": f"{site.base_url}/docs"})
        async with serve_fake_llm(openai_tool_reply([call]), openai_text_reply("ok")) as llm:
            web = {"allow_private_hosts": allow_private_hosts}
            config_dir = write_config(tmp_path / "cfg", config_for(f"{llm.base_url}/v1", web=web))
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, session_dir(tmp_path))
                response = await client.prompt(session_id, "read the docs")
    assert response["result"]["stopReason"] == "end_turn", response
    [result] = tool_results(llm.requests[-1].json())
    return result, len(site.requests)


async def test_web_fetch_reaches_a_local_server_only_when_private_hosts_are_allowed(
    tmp_path: Path,
) -> None:
    with trio.fail_after(CEILING_SECS):
        refused, seen_refused = await fetch_through_acp(tmp_path / "a", allow_private_hosts=False)
        allowed, seen_allowed = await fetch_through_acp(tmp_path / "b", allow_private_hosts=True)
    assert refused.startswith("Error: Refusing to connect to 127.0.0.1: a loopback address")
    assert "allow_private_hosts = true" in refused
    assert seen_refused == 0
    assert allowed == "# Local docs"
    assert seen_allowed == 1


CARRYING_LOOPBACK = (
    "64:ff9b::7f00:1",  # NAT64, well-known prefix
    "64:ff9b:1::7f00:1",  # NAT64, local-use prefix
    "2002:7f00:1::1",  # 6to4
    "::127.0.0.1",  # IPv4-compatible
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:0:7f00:1",  # IPv4-translated
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo (client 127.0.0.1)
)


async def test_ipv6_addresses_carrying_a_loopback_ipv4_are_refused(tmp_path: Path) -> None:
    """web_fetch and http_request refuse each before connecting. The server runs in a
    network namespace with no route, so nothing leaves the machine even if they did not."""
    calls = [
        f"/tool {tool} " + json.dumps({"url": f"http://[{address}]:8080/"})
        for address in CARRYING_LOOPBACK
        for tool in ("web_fetch", "http_request")
    ]
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir, prefix=offline_prefix()) as client:
            session_id = await open_session(client, session_dir(tmp_path))
            response = await client.prompt(session_id, "\n".join(calls), on_request=allow_once)
    assert response["result"]["stopReason"] == "end_turn", response
    outputs = [
        str(update.get("rawOutput"))
        for update in client.updates(session_id)
        if update.get("sessionUpdate") == "tool_call_update"
        and update.get("status") in ("completed", "failed")
    ]  # fmt: skip
    assert len(outputs) == len(calls)
    for address, output in zip(
        [address for address in CARRYING_LOOPBACK for _ in range(2)], outputs, strict=True
    ):
        assert output.startswith(f"Error: Refusing to connect to {address}"), output


def test_cost_command_is_listed() -> None:
    listed = subprocess.run(
        [str(console_script("zeroclaw")), "--help"], capture_output=True, check=True
    )
    assert b"cost" in listed.stdout
