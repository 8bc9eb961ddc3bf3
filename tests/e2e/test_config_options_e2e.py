"""Session config options and usage through a real `zeroclaw acp`, and session/list,
session/delete and config options through a real `zeroclaw gateway` + `zeroclaw-acp-bridge`.

The model picker switches the provider of the next turn, the mode picker lowers the risk
level the security policy decides at, both are kept across a restart; ``usage_update`` and
the prompt result's ``usage`` carry the provider's own counts (the echo provider counts
words; the OpenAI and Anthropic wire shapes come from the local fake model server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.fake_llm import serve_fake_llm
from tests.e2e.gateway_harness import run_gateway
from tests.e2e.helpers import JsonDict, RpcPipeClient, open_session, spawn_acp, spawn_zeroclaw
from tests.e2e.test_providers_e2e import llm_config, provider_entry, tool_call_then_text
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 60
SECOND = "echo.second"
WINDOW = 4096


def picker_config(tmp_path: Path, **gateway: Any) -> Path:
    """The agent ``echo`` at ``supervised`` on ``echo.default``, which may also use the
    second echo provider (context window ``WINDOW``)."""
    document = echo_config(max_sessions=4)
    document["providers"]["models"]["echo"]["second"] = {
        "model": "echo-two",
        "context_window": WINDOW,
    }
    document["agents"]["echo"]["model_providers"] = [SECOND]
    if gateway:
        document["gateway"] = dict(gateway)
    return write_config(tmp_path / "cfg", document)


def current(options: list[JsonDict]) -> dict[str, str]:
    return {entry["id"]: entry["currentValue"] for entry in options}


async def choose(client: RpcPipeClient, session_id: str, config_id: str, value: str) -> JsonDict:
    response = await client.call(
        "session/set_config_option",
        {"sessionId": session_id, "configId": config_id, "value": value},
    )
    assert "result" in response, response
    result: JsonDict = response["result"]
    return result


def write_call(name: str) -> str:
    return "/tool file_write " + json.dumps({"path": name, "content": "x"})


def usage_updates(client: RpcPipeClient, session_id: str) -> list[JsonDict]:
    return [u for u in client.updates(session_id) if u["sessionUpdate"] == "usage_update"]


async def test_pickers_usage_and_a_restart_through_zeroclaw_acp(tmp_path: Path) -> None:
    config_dir = picker_config(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", {"protocolVersion": 1})
            new = (await client.call("session/new", {"cwd": str(workspace)}))["result"]
            session_id = new["sessionId"]
            assert current(new["configOptions"]) == {"model": "echo.default", "mode": "supervised"}
            model, mode = new["configOptions"]
            assert (model["category"], mode["category"]) == ("model", "mode")
            assert [o["value"] for o in model["options"]] == ["echo.default", SECOND]
            assert [o["value"] for o in mode["options"]] == ["readonly", "supervised"]

            # Above the administrator's profile: refused.
            raised = await client.call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": "mode", "value": "full"},
            )
            assert raised["error"]["code"] == -32602

            lowered = await choose(client, session_id, "mode", "readonly")
            assert current(lowered["configOptions"]) == {
                "model": "echo.default",
                "mode": "readonly",
            }
            announced, mode_announced = client.updates(session_id)[-2:]
            assert announced == {
                "sessionUpdate": "config_option_update",
                "configOptions": lowered["configOptions"],
            }
            # ACP's session modes show the same value.
            assert mode_announced == {
                "sessionUpdate": "current_mode_update",
                "currentModeId": "readonly",
            }
            refused = await client.prompt(session_id, write_call("blocked.txt"))
            assert refused["result"]["stopReason"] == "end_turn"
            assert client.server_requests == []  # refused by policy, nobody asked
            assert not (workspace / "blocked.txt").exists()

            await choose(client, session_id, "model", SECOND)
            client.notifications.clear()
            reply = await client.prompt(session_id, "three little words")
            # The echo provider counts words: three in, three out; the window is configured.
            assert reply["result"]["usage"] == {
                "totalTokens": 6,
                "inputTokens": 3,
                "outputTokens": 3,
            }
            assert usage_updates(client, session_id) == [
                {"sessionUpdate": "usage_update", "used": 6, "size": WINDOW}
            ]
        assert client.process.returncode == 0

        # A new process restores both choices with the session.
        async with spawn_acp(config_dir) as again:
            await again.call("initialize", {"protocolVersion": 1})
            loaded = (await again.call("session/load", {"sessionId": session_id}))["result"]
            assert current(loaded["configOptions"]) == {"model": SECOND, "mode": "readonly"}
            assert not any(u["sessionUpdate"] == "usage_update" for u in again.updates())
            refused = await again.prompt(session_id, write_call("still-blocked.txt"))
            assert refused["result"]["stopReason"] == "end_turn"
            assert again.server_requests == []
    assert not (workspace / "still-blocked.txt").exists()


def read_call(path: Path) -> str:
    return "/tool file_read " + json.dumps({"path": str(path)})


def tool_results(client: RpcPipeClient, session_id: str) -> list[str]:
    return [
        str(update.get("rawOutput"))
        for update in client.updates(session_id)
        if update["sessionUpdate"] == "tool_call_update"
        and update.get("status") in ("completed", "failed")
    ]  # fmt: skip


async def test_a_mode_change_keeps_the_sessions_extra_roots(tmp_path: Path) -> None:
    config_dir = picker_config(tmp_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    extra = tmp_path / "docs"
    extra.mkdir()
    notes = extra / "notes.txt"
    notes.write_text("extra-root-notes\n")
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace, additionalDirectories=[str(extra)])
            await choose(client, session_id, "mode", "readonly")
            client.notifications.clear()
            await client.prompt(session_id, read_call(notes))
            assert tool_results(client, session_id) == ["     1\textra-root-notes"]
        # Restored: the stored mode is applied to the restored roots too.
        async with spawn_acp(config_dir) as again:
            await again.call("initialize", {"protocolVersion": 1})
            loaded = (await again.call("session/load", {"sessionId": session_id}))["result"]
            assert current(loaded["configOptions"])["mode"] == "readonly"
            again.notifications.clear()
            await again.prompt(session_id, read_call(notes))
            assert tool_results(again, session_id) == ["     1\textra-root-notes"]


@pytest.mark.parametrize("provider_type", ["openai", "openrouter", "anthropic"])
async def test_usage_carries_the_providers_own_counts(tmp_path: Path, provider_type: str) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the secret word is teapot\n")
    with trio.fail_after(TIMEOUT):
        async with serve_fake_llm(*tool_call_then_text(provider_type, "teapot")) as llm:
            entry = provider_entry(provider_type, llm.base_url, context_window=200_000)
            config_dir = write_config(tmp_path / "cfg", llm_config({provider_type: entry}))
            async with spawn_acp(config_dir) as client:
                session_id = await open_session(client, workspace)
                reply = await client.prompt(session_id, "What is the secret word?")
    assert reply["result"]["stopReason"] == "end_turn"
    if provider_type == "anthropic":
        # message_start's input_tokens, message_delta's output_tokens, in both rounds.
        rounds, thought = [(25, 7), (25, 7)], None
    else:
        # The include_usage tail: prompt_tokens / completion_tokens (+ reasoning details).
        rounds, thought = [(40, 12), (12, 5)], 5
    assert usage_updates(client, session_id) == [
        {"sessionUpdate": "usage_update", "used": sent + got, "size": 200_000}
        for sent, got in rounds
    ]
    expected: JsonDict = {
        "totalTokens": sum(sent + got for sent, got in rounds),
        "inputTokens": sum(sent for sent, _ in rounds),
        "outputTokens": sum(got for _, got in rounds),
    }
    if thought is not None:
        expected["thoughtTokens"] = thought
    assert reply["result"]["usage"] == expected


def bridge(config_dir: Path, url: str) -> Any:
    return spawn_zeroclaw(["--url", url], config_dir=config_dir, script="zeroclaw-acp-bridge")


async def test_list_delete_and_config_options_through_the_gateway_and_bridge(
    tmp_path: Path,
) -> None:
    config_dir = picker_config(tmp_path, require_pairing=False)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            url = gateway.ws_url()
            async with bridge(config_dir, url) as ide:
                await ide.call("initialize", {"protocolVersion": 1})
                new = (await ide.call("session/new", {"cwd": str(workspace)}))["result"]
                session_id = new["sessionId"]
                assert current(new["configOptions"]) == {
                    "model": "echo.default",
                    "mode": "supervised",
                }
                chosen = await choose(ide, session_id, "model", SECOND)
                assert current(chosen["configOptions"])["model"] == SECOND
                lowered = await choose(ide, session_id, "mode", "readonly")
                assert [u["sessionUpdate"] for u in ide.updates(session_id)[-2:]] == [
                    "config_option_update",
                    "current_mode_update",
                ]
                reply = await ide.prompt(session_id, "name this session")
                assert reply["result"]["usage"]["totalTokens"] == 6
                assert usage_updates(ide, session_id)[-1]["size"] == WINDOW
                refused = await ide.prompt(session_id, write_call("blocked.txt"))
                assert refused["result"]["stopReason"] == "end_turn"
                assert ide.server_requests == []
                other = await open_session(ide, workspace)
            assert ide.process.returncode == 0
            assert not (workspace / "blocked.txt").exists()

            # A second connection sees the store: its sessions, their titles and choices.
            async with bridge(config_dir, url) as ide:
                await ide.call("initialize", {"protocolVersion": 1})
                listed = (await ide.call("session/list", {"cwd": str(workspace)}))["result"]
                by_id = {entry["sessionId"]: entry for entry in listed["sessions"]}
                assert set(by_id) == {session_id, other}
                assert by_id[session_id]["title"] == "name this session"
                assert by_id[session_id]["cwd"] == str(workspace)
                loaded = (await ide.call("session/load", {"sessionId": session_id}))["result"]
                assert loaded["configOptions"] == lowered["configOptions"]

                # Delete closes the loaded copy first, then removes it from the store.
                deleted = await ide.call("session/delete", {"sessionId": session_id})
                assert deleted["result"] == {}
                listed = (await ide.call("session/list", {}))["result"]
                assert [entry["sessionId"] for entry in listed["sessions"]] == [other]
                gone = await ide.call("session/load", {"sessionId": session_id})
                assert gone["error"]["code"] == -32000
                again = await ide.call("session/delete", {"sessionId": session_id})
                assert again["error"]["code"] == -32000
            assert ide.process.returncode == 0
