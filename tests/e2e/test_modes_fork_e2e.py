"""ACP session modes, ``session/fork``, and what ``initialize`` offers, through a real
``zeroclaw acp``, every frame checked against the official ACP schema (tests/acp_schema.py;
``session/fork`` against its unstable part).

Modes are the ``mode`` config option seen through ACP's session modes: the same levels,
one value; setting either announces both (``config_option_update`` and
``current_mode_update``), and neither goes above the agent's risk profile. acpx's
``set-mode`` and ``status`` (tests/acpx_output.py) show it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from tests.acp_registry import AUTH_CHECK_INITIALIZE
from tests.acp_schema import AcpSchema, install_schema, unstable_schema_path
from tests.acpx_output import AcpxOutput
from tests.e2e.helpers import JsonDict, RpcPipeClient, spawn_acp
from tests.e2e.test_client_views import ACPX_INIT, ClientRun
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

TIMEOUT: Final = 60
LEVELS: Final = ["readonly", "supervised"]


@pytest.fixture(scope="module")
def schemas() -> tuple[AcpSchema, AcpSchema]:
    stable = install_schema()
    return AcpSchema.load(stable), AcpSchema.load(unstable_schema_path(stable))


def checked_run(client: RpcPipeClient, schemas: tuple[AcpSchema, AcpSchema]) -> ClientRun:
    run = ClientRun(client, schemas[0])
    run.checker.unstable = schemas[1]
    return run


def workspace(tmp_path: Path) -> Path:
    ws = (tmp_path / "ws").resolve()
    ws.mkdir(parents=True, exist_ok=True)
    return ws


def mode_updates(client: RpcPipeClient, session_id: str) -> list[JsonDict]:
    kinds = ("config_option_update", "current_mode_update")
    return [u for u in client.updates(session_id) if u["sessionUpdate"] in kinds]


def mode_option(options: list[JsonDict]) -> JsonDict:
    (found,) = [entry for entry in options if entry["id"] == "mode"]
    return found


def write_call(name: str) -> str:
    return "/tool file_write " + json.dumps({"path": name, "content": "x"})


async def test_acpx_set_mode_lowers_the_mode_and_status_shows_it(
    tmp_path: Path, schemas: tuple[AcpSchema, AcpSchema]
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    ws = workspace(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            run = checked_run(client, schemas)
            assert "result" in await client.call("initialize", ACPX_INIT)
            new = (await client.call("session/new", {"cwd": str(ws), "mcpServers": []}))["result"]
            session_id = new["sessionId"]
            # The modes are the mode option's values, the current one the option's.
            option = mode_option(new["configOptions"])
            assert new["modes"]["currentModeId"] == option["currentValue"] == "supervised"
            assert [m["id"] for m in new["modes"]["availableModes"]] == LEVELS
            assert [m["name"] for m in new["modes"]["availableModes"]] == [
                o["name"] for o in option["options"]
            ]

            # What `acpx zeroclaw set-mode full` sends: above the risk profile, refused
            # as the config option refuses it.
            raised = await client.call(
                "session/set_mode", {"sessionId": session_id, "modeId": "full"}
            )
            assert raised["error"]["code"] == -32602
            assert "readonly, supervised" in raised["error"]["message"]
            refused_option = await client.call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": "mode", "value": "full"},
            )
            assert refused_option["error"]["code"] == -32602
            assert mode_updates(client, session_id) == []

            # `acpx zeroclaw set-mode readonly`.
            lowered = await client.call(
                "session/set_mode", {"sessionId": session_id, "modeId": "readonly"}
            )
            assert lowered["result"] == {}
            config_update, mode_update = mode_updates(client, session_id)
            assert mode_update == {
                "sessionUpdate": "current_mode_update",
                "currentModeId": "readonly",
            }
            assert mode_option(config_update["configOptions"])["currentValue"] == "readonly"

            refused = await client.prompt(session_id, write_call("blocked.txt"))
            assert refused["result"]["stopReason"] == "end_turn"
            assert client.server_requests == []  # refused by the readonly policy, unasked
            assert not (ws / "blocked.txt").exists()

            # The other face: the config option sets the mode too, and says so both ways.
            client.notifications.clear()
            raised_back = await client.call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": "mode", "value": "supervised"},
            )
            assert mode_option(raised_back["result"]["configOptions"])["currentValue"] == (
                "supervised"
            )
            assert [u["sessionUpdate"] for u in mode_updates(client, session_id)] == [
                "config_option_update",
                "current_mode_update",
            ]
            frames = run.frames()
        assert client.process.returncode == 0

        shown = AcpxOutput(session_id)
        shown.feed(frames)
        assert shown.status_mode_line == "mode: supervised"  # was "mode: -"

        # Kept with the session: a new process restores the mode, both ways.
        async with spawn_acp(config_dir) as again:
            await again.call("initialize", ACPX_INIT)
            not_live = await again.call(
                "session/set_mode", {"sessionId": session_id, "modeId": "readonly"}
            )
            assert not_live["error"]["code"] == -32000  # not open on this connection yet
            resumed = (await again.call("session/resume", {"sessionId": session_id}))["result"]
            assert resumed["modes"]["currentModeId"] == "supervised"
            assert mode_option(resumed["configOptions"])["currentValue"] == "supervised"


async def test_a_readonly_profile_offers_one_mode(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(level="readonly"))
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            await client.call("initialize", ACPX_INIT)
            new = await client.call("session/new", {"cwd": str(workspace(tmp_path))})
            modes = new["result"]["modes"]
            assert modes["currentModeId"] == "readonly"
            assert [m["id"] for m in modes["availableModes"]] == ["readonly"]
            raised = await client.call(
                "session/set_mode",
                {"sessionId": new["result"]["sessionId"], "modeId": "supervised"},
            )
            assert raised["error"]["code"] == -32602


def replayed_text(client: RpcPipeClient, session_id: str, kind: str) -> list[str]:
    return [
        u["content"]["text"]
        for u in client.updates(session_id)
        if u["sessionUpdate"] == kind and u["content"].get("type") == "text"
    ]


async def test_a_fork_copies_the_history_into_a_new_stored_session(
    tmp_path: Path, schemas: tuple[AcpSchema, AcpSchema]
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(max_sessions=4))
    ws = workspace(tmp_path)
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            run = checked_run(client, schemas)
            init = (await client.call("initialize", ACPX_INIT))["result"]
            assert init["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
            source = (await client.call("session/new", {"cwd": str(ws)}))["result"]["sessionId"]
            await client.call("session/set_mode", {"sessionId": source, "modeId": "readonly"})
            for words in ("first words", "second words"):
                assert "result" in await client.prompt(source, words)

            forked = await client.call("session/fork", {"sessionId": source, "cwd": str(ws)})
            fork = forked["result"]
            fork_id = fork["sessionId"]
            assert fork_id != source
            assert fork["workspaceDir"] == str(ws)
            assert fork["modes"]["currentModeId"] == "readonly"  # the source's choices
            assert mode_option(fork["configOptions"])["currentValue"] == "readonly"

            # Both live here; the fork goes its own way, the source keeps its history.
            assert "result" in await client.prompt(fork_id, "only in the fork")
            assert "result" in await client.prompt(source, "only in the source")
            listed = (await client.call("session/list", {}))["result"]["sessions"]
            titles = {entry["sessionId"]: entry.get("title") for entry in listed}
            assert titles[fork_id] == f"{titles[source]} (fork)"
            run.frames()  # every frame so far, the fork's result included, is schema-valid

            unknown = await client.call("session/fork", {"sessionId": "no-such", "cwd": str(ws)})
            not_loaded = await client.call("session/load", {"sessionId": "no-such"})
            assert unknown["error"] == not_loaded["error"]
        assert client.process.returncode == 0

        # Stored: a new process loads each with its own history.
        async with spawn_acp(config_dir) as again:
            await again.call("initialize", ACPX_INIT)
            assert "result" in await again.call("session/load", {"sessionId": fork_id})
            assert "result" in await again.call("session/load", {"sessionId": source})
            user = "user_message_chunk"
            assert replayed_text(again, fork_id, user) == [
                "first words",
                "second words",
                "only in the fork",
            ]
            assert replayed_text(again, source, user) == [
                "first words",
                "second words",
                "only in the source",
            ]
            loaded = (await again.call("session/resume", {"sessionId": fork_id})).get("error")
            assert loaded is not None  # live already: a resume of it is refused as usual


async def test_without_a_store_fork_is_not_offered_and_refused_as_load(tmp_path: Path) -> None:
    document = echo_config()
    document["acp"] = {"session_persistence": False}
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            init = (await client.call("initialize", ACPX_INIT))["result"]
            assert "sessionCapabilities" not in init["agentCapabilities"]
            new = await client.call("session/new", {"cwd": str(workspace(tmp_path))})
            session_id = new["result"]["sessionId"]
            forked = await client.call("session/fork", {"sessionId": session_id, "cwd": "/"})
            loaded = await client.call("session/load", {"sessionId": session_id})
            assert forked["error"] == loaded["error"]


def vision_config(tmp_path: Path, **acp: Any) -> Path:
    """One agent whose provider takes images (no default_agent, no ?agent=)."""
    document = echo_config()
    document["providers"]["models"]["echo"]["default"]["vision"] = True
    document.setdefault("acp", {}).update(acp)
    return write_config(tmp_path / "cfg", document)


async def test_image_capability_follows_the_agent_session_new_would_pick(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(vision_config(tmp_path)) as client:
            init = (await client.call("initialize", ACPX_INIT))["result"]
        assert init["agentCapabilities"]["promptCapabilities"]["image"] is True


async def test_terminal_setup_is_offered_only_to_a_client_that_can_run_it(
    tmp_path: Path,
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    with trio.fail_after(TIMEOUT):
        async with spawn_acp(config_dir) as client:
            checked = (await client.call("initialize", AUTH_CHECK_INITIALIZE))["result"]
        async with spawn_acp(config_dir) as client:
            stable = dict(ACPX_INIT, clientCapabilities={"auth": {"terminal": True}})
            offered = (await client.call("initialize", stable))["result"]
        async with spawn_acp(config_dir) as client:
            plain = (await client.call("initialize", ACPX_INIT))["result"]
    (method,) = checked["authMethods"]
    assert method["type"] == "terminal"
    assert method["args"] == ["init"]
    assert offered["authMethods"] == checked["authMethods"]
    assert plain["authMethods"] == []  # ACP: terminal auth only to a client that can run it
