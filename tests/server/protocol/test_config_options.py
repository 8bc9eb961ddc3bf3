"""Session config options (ACP): the ``model`` and ``mode`` pickers, in memory.

What a client sees in ``configOptions``, what ``session/set_config_option`` changes (the
provider of the next turn; the risk level the security policy decides at), what it refuses
(-32602), and that the choices survive a close and a load/resume through the store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from acp_server.agent.providers.base import Provider, UsageReported
from acp_server.config import Config, ProviderConfig
from acp_server.model import Usage
from acp_server.storage import open_store
from tests.helpers import make_config, poll_until, session_dir
from tests.jsonrpc_peer import JsonDict
from tests.server.server_harness import (
    ScriptedProvider,
    ServerHarness,
    StubTool,
    answer,
    open_server,
    text_round,
    tool_round,
)

INVALID_PARAMS = -32602
SESSION_NOT_FOUND = -32000
FAST = "openai.fast"


def two_provider_config(tmp_path: Path, *, level: str = "supervised", **options: Any) -> Config:
    """The agent ``echo`` on ``echo.default`` that may also use ``openai.fast``."""
    return make_config(
        tmp_path,
        level=level,
        providers={"openai": {"fast": {"model": "gpt-fast", "api_key": "sk-test"}}},
        agents={"echo": {"model_providers": [FAST, "echo.default", FAST]}},
        **options,
    )


def by_ref(providers: dict[str, Provider]) -> Any:
    def factory(config: ProviderConfig) -> Provider:
        return providers[config.ref]

    return factory


def option(options: list[JsonDict], option_id: str) -> JsonDict:
    [found] = [entry for entry in options if entry["id"] == option_id]
    return found


def values(entry: JsonDict) -> list[str]:
    return [choice["value"] for choice in entry["options"]]


async def set_option(client: ServerHarness, session_id: str, config_id: str, value: Any) -> Any:
    return await client.call(
        "session/set_config_option",
        {"sessionId": session_id, "configId": config_id, "value": value},
    )


async def test_new_session_offers_the_agents_providers_and_the_levels_up_to_its_profile(
    tmp_path: Path,
) -> None:
    config = two_provider_config(tmp_path)
    with trio.fail_after(5):
        async with open_server(config, provider=ScriptedProvider([text_round("hi")])) as client:
            new = await client.result("session/new", {"cwd": str(session_dir(tmp_path))})
    model, mode = new["configOptions"]
    assert model == {
        "id": "model",
        "name": "Model",
        "description": "The model provider the next turn uses",
        "category": "model",
        "type": "select",
        "currentValue": "echo.default",
        "options": [
            {"value": "echo.default", "name": "echo", "description": "provider echo.default"},
            {"value": FAST, "name": "gpt-fast", "description": f"provider {FAST}"},
        ],
    }
    assert mode["category"] == "mode"
    assert mode["type"] == "select"
    assert mode["currentValue"] == "supervised"
    assert values(mode) == ["readonly", "supervised"]  # never above the profile


async def test_a_full_profile_offers_every_level(tmp_path: Path) -> None:
    config = make_config(tmp_path, level="full")
    with trio.fail_after(5):
        async with open_server(config, provider=ScriptedProvider([text_round("hi")])) as client:
            new = await client.result("session/new", {"cwd": str(session_dir(tmp_path))})
    mode = option(new["configOptions"], "mode")
    assert mode["currentValue"] == "full"
    assert values(mode) == ["readonly", "supervised", "full"]
    assert values(option(new["configOptions"], "model")) == ["echo.default"]


async def test_choosing_a_model_switches_the_provider_from_the_next_turn(tmp_path: Path) -> None:
    default = ScriptedProvider([text_round("from", "default")])
    fast = ScriptedProvider([text_round("from", "fast")])
    factory = by_ref({"echo.default": default, FAST: fast})
    with trio.fail_after(5):
        async with open_server(two_provider_config(tmp_path), provider_factory=factory) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            first = await client.prompt(session_id, "one")
            changed = await set_option(client, session_id, "model", FAST)
            updates = client.updates(session_id)
            second = await client.prompt(session_id, "two")
    assert first["result"]["content"] == "fromdefault"
    assert second["result"]["content"] == "fromfast"
    assert len(default.requests) == 1
    assert len(fast.requests) == 1
    options = changed["result"]["configOptions"]
    assert option(options, "model")["currentValue"] == FAST
    assert option(options, "mode")["currentValue"] == "supervised"
    # The change is also announced as config_option_update, with the full set.
    assert updates[-1] == {"sessionUpdate": "config_option_update", "configOptions": options}


async def test_a_running_turn_keeps_the_provider_it_started_with(tmp_path: Path) -> None:
    gate = trio.Event()
    default = ScriptedProvider([text_round("slow", "answer")], gate=gate)
    fast = ScriptedProvider([text_round("fast")])
    factory = by_ref({"echo.default": default, FAST: fast})
    with trio.fail_after(5):
        async with open_server(two_provider_config(tmp_path), provider_factory=factory) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            prompt_id = await client.prompt_request(session_id, "go")
            changed = await set_option(client, session_id, "model", FAST)
            gate.set()
            reply = await client.wait_response(prompt_id)
    assert "result" in changed, changed
    assert reply["result"]["content"] == "slowanswer"
    assert fast.requests == []


async def test_lowering_the_mode_really_changes_what_the_policy_allows(tmp_path: Path) -> None:
    """A full profile runs the side-effect tool unasked; at ``supervised`` it asks first; at
    ``readonly`` it is refused without asking, and never runs."""
    stub = StubTool()
    rounds = [tool_round("stub", {}), text_round("done")] * 3
    provider = ScriptedProvider(rounds)
    config = make_config(tmp_path, level="full", risk={"auto_approve": []})
    with trio.fail_after(5):
        async with open_server(config, provider=provider, tools=[stub]) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            await client.prompt(session_id, "full", on_request=answer("allow-once"))
            assert len(stub.calls) == 1
            assert client.server_requests == []

            await set_option(client, session_id, "mode", "supervised")
            await client.prompt(session_id, "supervised", on_request=answer("allow-once"))
            assert len(stub.calls) == 2
            [permission] = client.server_requests
            assert permission["method"] == "session/request_permission"

            await set_option(client, session_id, "mode", "readonly")
            client.notifications.clear()
            await client.prompt(session_id, "readonly", on_request=answer("allow-once"))
            finished = [u for u in client.updates(session_id) if u.get("status") == "failed"]
    assert len(stub.calls) == 2  # refused: it never ran
    assert len(client.server_requests) == 1  # and nobody was asked
    [refused] = finished
    assert "the risk profile is read-only" in json.dumps(refused)  # the policy's reason


async def test_bad_choices_are_invalid_params(tmp_path: Path) -> None:
    config = two_provider_config(tmp_path)
    with trio.fail_after(5):
        async with open_server(config, provider=ScriptedProvider([text_round("hi")])) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            above_profile = await set_option(client, session_id, "mode", "full")
            unknown_level = await set_option(client, session_id, "mode", "yolo")
            unknown_model = await set_option(client, session_id, "model", "openai.other")
            unknown_option = await set_option(client, session_id, "thought_level", "high")
            boolean = await set_option(client, session_id, "mode", True)
            no_config_id = await client.call(
                "session/set_config_option", {"sessionId": session_id, "value": "readonly"}
            )
            unknown_session = await set_option(client, "nope", "mode", "readonly")
            after = await client.result("session/list", {})
    for refused in (above_profile, unknown_level, unknown_model, unknown_option, boolean):
        assert refused["error"]["code"] == INVALID_PARAMS, refused
    assert no_config_id["error"]["code"] == INVALID_PARAMS
    assert "full" in above_profile["error"]["message"]
    assert "thought_level" in unknown_option["error"]["message"]
    assert unknown_session["error"]["code"] == SESSION_NOT_FOUND
    assert after == {"sessions": []}


async def test_choices_are_stored_and_restored_by_load_and_resume(tmp_path: Path) -> None:
    config = two_provider_config(tmp_path / "cfg")
    store = await open_store(tmp_path / "sessions.db")
    stub = StubTool()
    default = ScriptedProvider([text_round("default")])
    fast = ScriptedProvider([tool_round("stub", {}), text_round("fast")])
    factory = by_ref({"echo.default": default, FAST: fast})
    try:
        with trio.fail_after(10):
            async with open_server(config, store=store, provider_factory=factory) as client:
                session_id = await client.new_session(session_dir(tmp_path))
                await set_option(client, session_id, "model", FAST)
                await set_option(client, session_id, "mode", "readonly")
                await client.result("session/close", {"sessionId": session_id})
            for method in ("session/load", "session/resume"):
                async with open_server(
                    config, store=store, provider_factory=factory, tools=[stub]
                ) as client:
                    restored = await client.result(method, {"sessionId": session_id})
                    reply = await client.prompt(session_id, "write something")
                options = restored["configOptions"]
                assert option(options, "model")["currentValue"] == FAST, method
                assert option(options, "mode")["currentValue"] == "readonly", method
                # The restored session runs on the chosen provider, at the chosen level.
                assert reply["result"]["stopReason"] == "end_turn"
                assert stub.calls == []
                assert default.requests == []
    finally:
        await store.aclose()


async def test_a_stored_choice_the_config_no_longer_offers_falls_back_to_the_default(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "sessions.db")
    provider = ScriptedProvider([text_round("hi")])
    try:
        with trio.fail_after(10):
            async with open_server(
                two_provider_config(tmp_path / "a"), store=store, provider=provider
            ) as client:
                session_id = await client.new_session(session_dir(tmp_path))
                await set_option(client, session_id, "model", FAST)
                await set_option(client, session_id, "mode", "readonly")
            # The administrator removed the extra provider and lowered the profile.
            narrower = make_config(tmp_path / "b", level="readonly")
            async with open_server(narrower, store=store, provider=provider) as client:
                loaded = await client.result("session/load", {"sessionId": session_id})
    finally:
        await store.aclose()
    options = loaded["configOptions"]
    assert option(options, "model")["currentValue"] == "echo.default"
    assert values(option(options, "model")) == ["echo.default"]
    assert option(options, "mode")["currentValue"] == "readonly"
    assert values(option(options, "mode")) == ["readonly"]


async def test_usage_update_after_each_model_round_and_usage_on_the_result(
    tmp_path: Path,
) -> None:
    def counted(round_events: list[Any], prompt: int, answer_tokens: int) -> list[Any]:
        *head, end = round_events
        return [*head, UsageReported(Usage(prompt, answer_tokens, reasoning_tokens=1)), end]

    rounds = [counted(tool_round("stub", {}), 100, 10), counted(text_round("done"), 130, 5)]
    config = make_config(tmp_path, risk={"auto_approve": ["stub"]})
    provider = ScriptedProvider(rounds)
    with trio.fail_after(5):
        async with open_server(config, provider=provider, tools=[StubTool()]) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            reply = await client.prompt(session_id, "go")
            updates = client.updates(session_id)
    usage_updates = [u for u in updates if u["sessionUpdate"] == "usage_update"]
    # No context window configured for echo.default: size 0 (not known).
    assert usage_updates == [
        {"sessionUpdate": "usage_update", "used": 110, "size": 0},
        {"sessionUpdate": "usage_update", "used": 135, "size": 0},
    ]
    kinds = [u["sessionUpdate"] for u in updates]
    assert kinds.index("usage_update") < kinds.index("tool_call")  # sent as the round ends
    assert reply["result"]["usage"] == {
        "totalTokens": 245,
        "inputTokens": 230,
        "outputTokens": 15,
        "thoughtTokens": 2,
    }


async def test_a_turn_without_counts_sends_no_usage(tmp_path: Path) -> None:
    with trio.fail_after(5):
        async with open_server(
            make_config(tmp_path), provider=ScriptedProvider([text_round("hi")])
        ) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            reply = await client.prompt(session_id, "go")
            kinds = {u["sessionUpdate"] for u in client.updates(session_id)}
    assert "usage" not in reply["result"]
    assert "usage_update" not in kinds


async def test_a_lowered_mode_decides_the_running_turns_next_tool_call(tmp_path: Path) -> None:
    gate = trio.Event()
    stub = StubTool()
    provider = ScriptedProvider([tool_round("stub", {}), text_round("done")], gate=gate)
    config = make_config(tmp_path, level="full")
    with trio.fail_after(5):
        async with open_server(config, provider=provider, tools=[stub]) as client:
            session_id = await client.new_session(session_dir(tmp_path))
            prompt_id = await client.prompt_request(session_id, "go")
            await poll_until(lambda: bool(provider.requests))  # the model is answering
            await set_option(client, session_id, "mode", "readonly")
            gate.set()
            reply = await client.wait_response(prompt_id)
            updates = client.updates(session_id)
    assert reply["result"]["stopReason"] == "end_turn"
    assert stub.calls == []
    [refused] = [u for u in updates if u.get("status") == "failed"]
    assert "the risk profile is read-only" in json.dumps(refused)
