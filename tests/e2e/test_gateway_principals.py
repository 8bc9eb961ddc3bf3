"""Principals through a real `zeroclaw gateway`, on the SQLite store and on PostgreSQL.

Two real bridges, one paired as alice (`--pair CODE --name alice`), one holding a token
the operator created for bob (`zeroclaw gateway token create --name bob`): each sees only
its own sessions, and every session method on the other's session answers exactly what a
session that does not exist gets. The local operator (stdio `zeroclaw acp`, and
`zeroclaw sessions` on the host) sees both. `zeroclaw gateway tokens` lists both names
with their connections, and `revoke-token --name bob` cuts bob's bridge. A per-principal
daily spending cap stops one principal's turns and not another's, and a per-principal
hourly action budget refuses one principal's tool calls and not another's.
"""

from __future__ import annotations

import json
import subprocess
import tomllib
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
from websockets.exceptions import InvalidStatus

from acp_core.gateway_contract import PRINCIPAL_HEADER
from acp_server.agent.limits.actions import RATE_LIMIT_ERROR, principal_rate_limit_error
from acp_server.gateway.auth import hash_token
from tests.e2e.fake_llm import serve_fake_llm
from tests.e2e.gateway_harness import WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import JsonDict, child_env, console_script, spawn_acp, spawn_zeroclaw
from tests.e2e.test_budgets_web_e2e import config_for, priced_reply
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e

TIMEOUT = 120
METHODS_ON_A_SESSION = (
    "session/load",
    "session/resume",
    "session/fork",
    "session/delete",
    "session/close",
    "session/stop",
    "session/prompt",
)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """None: the gateway's SQLite file; else a PostgreSQL URL."""
    if request.param == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


async def zeroclaw_cli(config_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = await trio.run_process(
        [str(console_script("zeroclaw")), *args],
        env=child_env(config_dir),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
    )


def _bridge(home: Path, url: str, *args: str, env: dict[str, str] | None = None) -> Any:
    # Each bridge has a config directory of its own, so each caches its own token.
    home.mkdir(parents=True, exist_ok=True)
    return spawn_zeroclaw(
        ["--url", url, *args], config_dir=home, env=env, script="zeroclaw-acp-bridge"
    )


def _params(method: str, session_id: str, workspace: Path) -> JsonDict:
    if method in ("session/load", "session/resume", "session/fork"):
        return {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
    if method == "session/prompt":
        return {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
    return {"sessionId": session_id}


def _error_without_id(reply: JsonDict, session_id: str) -> str:
    """The error frame as bytes on the wire, the session id (which differs by design)
    replaced, so two refusals can be compared exactly."""
    assert "error" in reply, reply
    return json.dumps(reply["error"], sort_keys=True).replace(session_id, "<id>")


async def _listed(client: Any) -> set[str]:
    reply = await client.call("session/list", {})
    return {session["sessionId"] for session in reply["result"]["sessions"]}


async def _admin_tokens(config_dir: Path, port: int, *names: str) -> dict[str, str]:
    """A token per name, created by the operator (``zeroclaw gateway token create``)."""
    tokens = {}
    for name in names:
        created = await zeroclaw_cli(
            config_dir, "gateway", "token", "create", "--name", name, "--port", str(port)
        )
        assert created.returncode == 0, created.stderr
        tokens[name] = created.stdout.strip()
    return tokens


async def _new_session(client: Any, workspace: Path) -> str:
    init = await client.call("initialize", {"protocolVersion": 1})
    assert "result" in init, init
    new = await client.call("session/new", {"cwd": str(workspace), "mcpServers": []})
    assert "result" in new, new
    session_id: str = new["result"]["sessionId"]
    return session_id


async def test_two_principals_never_see_each_others_sessions(
    tmp_path: Path, store_url: str | None
) -> None:
    document = {**echo_config(), "gateway": {}}
    if store_url is not None:
        document["storage"] = {"url": store_url}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            assert gateway.pairing_code is not None
            created = await zeroclaw_cli(
                config_dir,
                "gateway",
                "token",
                "create",
                "--name",
                "bob",
                "--port",
                str(gateway.port),
            )
            assert created.returncode == 0, created.stderr
            bob_token = created.stdout.strip()
            url = gateway.ws_url()
            bob_env = {"ZEROCLAW_ACP_BRIDGE_TOKEN": bob_token}
            async with (
                _bridge(tmp_path / "alice", url, "--pair", gateway.pairing_code, "--name", "alice") as alice,
                _bridge(tmp_path / "bob", url, env=bob_env) as bob,
            ):  # fmt: skip
                alice_session = await _new_session(alice, workspace)
                reply = await alice.prompt(alice_session, "alice's secret plan")
                assert reply["result"]["stopReason"] == "end_turn"
                bob_session = await _new_session(bob, workspace)

                assert await _listed(alice) == {alice_session}
                assert await _listed(bob) == {bob_session}

                # Every method on alice's session answers bob as for a session that does
                # not exist: the same code and the same message, byte for byte.
                missing = str(uuid.uuid4())
                for method in METHODS_ON_A_SESSION:
                    foreign = await bob.call(method, _params(method, alice_session, workspace))
                    absent = await bob.call(method, _params(method, missing, workspace))
                    assert _error_without_id(foreign, alice_session) == _error_without_id(
                        absent, missing
                    ), method

                # Nothing bob tried touched alice's live session or its history.
                reply = await alice.prompt(alice_session, "still mine")
                assert reply["result"]["stopReason"] == "end_turn"
                assert await _listed(alice) == {alice_session}

                listing = await zeroclaw_cli(
                    config_dir, "gateway", "tokens", "--json", "--port", str(gateway.port)
                )
                assert listing.returncode == 0, listing.stderr
                tokens = {token["name"]: token for token in json.loads(listing.stdout)}
                assert set(tokens) == {"alice", "bob"}
                assert tokens["alice"]["connections"] == 1
                assert tokens["bob"]["connections"] == 1
                assert tokens["alice"]["last_used"] is not None
                assert tokens["bob"]["revoked"] is None
                table = await zeroclaw_cli(
                    config_dir, "gateway", "tokens", "--port", str(gateway.port)
                )
                assert "LAST USED" in table.stdout
                assert "alice" in table.stdout

                # The local operator sees every principal's sessions.
                async with spawn_acp(config_dir) as operator:
                    init = await operator.call("initialize", {"protocolVersion": 1})
                    assert "result" in init, init
                    assert {alice_session, bob_session} <= await _listed(operator)
                stored = await zeroclaw_cli(config_dir, "sessions", "list", "--json")
                assert stored.returncode == 0, stored.stderr
                owners = {s["sessionId"]: s["principal"] for s in json.loads(stored.stdout)}
                assert owners[alice_session] == "alice"
                assert owners[bob_session] == "bob"

                revoked = await zeroclaw_cli(
                    config_dir,
                    "gateway",
                    "revoke-token",
                    "--name",
                    "bob",
                    "--port",
                    str(gateway.port),
                )
                assert revoked.returncode == 0, revoked.stderr
                assert "revoked 1 token(s)" in revoked.stderr
                after = await zeroclaw_cli(
                    config_dir, "gateway", "tokens", "--json", "--port", str(gateway.port)
                )
                by_name = {t["name"]: t for t in json.loads(after.stdout)}
                assert by_name["bob"]["revoked"] is not None
                assert by_name["alice"]["revoked"] is None


async def test_a_principals_daily_cap_trips_for_that_principal_only(
    tmp_path: Path, store_url: str | None
) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    replies = [priced_reply(text, 0.03) for text in ("first", "other", "again")]
    with trio.fail_after(TIMEOUT):
        async with serve_fake_llm(*replies) as llm:
            document = config_for(
                f"{llm.base_url}/v1",
                cost={
                    "per_principal_daily_cents": 2,
                    "principals": {"bob": {"max_cost_per_day_cents": 500}},
                },
                gateway={},
            )
            if store_url is not None:
                document["storage"] = {"url": store_url}
            config_dir = write_config(tmp_path / "cfg", document)
            async with run_gateway(config_dir) as gateway:
                tokens = await _admin_tokens(config_dir, gateway.port, "alice", "bob")
                async with (
                    ws_connect(gateway.ws_url(), token=tokens["alice"]) as alice_ws,
                    ws_connect(gateway.ws_url(), token=tokens["bob"]) as bob_ws,
                ):
                    alice, bob = WsRpc(alice_ws), WsRpc(bob_ws)
                    alice_session = await _new_session(alice, workspace)
                    bob_session = await _new_session(bob, workspace)
                    prompt = "session/prompt"
                    first = await alice.call(prompt, _params(prompt, alice_session, workspace))
                    over = await alice.call(prompt, _params(prompt, alice_session, workspace))
                    other = await bob.call(prompt, _params(prompt, bob_session, workspace))
                    again = await bob.call(prompt, _params(prompt, bob_session, workspace))
            shown = await zeroclaw_cli(config_dir, "cost", "--json")
    assert first["result"]["stopReason"] == "end_turn", first
    assert over["error"]["code"] == -32603, over
    assert "$0.0300 of $0.02 daily limit of principal `alice`" in over["error"]["message"]
    # bob's budget is his own, and his [cost.principals.bob] cap is above the default.
    assert other["result"]["stopReason"] == "end_turn", other
    assert again["result"]["stopReason"] == "end_turn", again
    assert len(llm.requests) == 3  # alice's refused turn never reached the model
    # `zeroclaw cost` reads the ledger of the store the gateway wrote: SQLite or PostgreSQL.
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert {row["principal"] for row in report["days"]} == {"alice", "bob"}
    assert report["principalsTodayUsd"] == {"alice": 0.03, "bob": 0.06}


def _tool_outputs(client: WsRpc, session_id: str) -> list[str]:
    """Each finished tool call's result as the client's card shows it (``rawOutput``)."""
    return [
        str(note["params"]["update"].get("rawOutput"))
        for note in client.notifications
        if note.get("method") == "session/update"
        and note["params"].get("sessionId") == session_id
        and note["params"]["update"].get("sessionUpdate") == "tool_call_update"
        and note["params"]["update"].get("status") in ("completed", "failed")
    ]


async def test_a_principals_action_budget_spans_its_connections_and_spares_others(
    tmp_path: Path,
) -> None:
    """``[actions] per_principal_per_hour``: alice's calls on two connections share one
    hourly budget; over it her call is refused with the rate-limit text naming her cap and
    the turn ends normally, while bob (his own, higher cap) still runs every call."""
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("note-marker\n")
    read = '/tool file_read {"path": "notes.txt"}'
    document = {
        **echo_config(),
        "gateway": {},
        "actions": {
            "per_principal_per_hour": 2,
            "principals": {"bob": {"max_actions_per_hour": 10}},
        },
    }
    config_dir = write_config(tmp_path / "cfg", document)
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            tokens = await _admin_tokens(config_dir, gateway.port, "alice", "bob")
            async with (
                ws_connect(gateway.ws_url(), token=tokens["alice"]) as first_ws,
                ws_connect(gateway.ws_url(), token=tokens["alice"]) as second_ws,
                ws_connect(gateway.ws_url(), token=tokens["bob"]) as bob_ws,
            ):
                first, second, bob = WsRpc(first_ws), WsRpc(second_ws), WsRpc(bob_ws)
                first_session = await _new_session(first, workspace)
                second_session = await _new_session(second, workspace)
                bob_session = await _new_session(bob, workspace)
                ran = await first.prompt(first_session, f"{read}\n{read}")
                refused = await second.prompt(second_session, f"{read}\n{read}")
                bobs = await bob.prompt(bob_session, "\n".join([read] * 3))
    for reply in (ran, refused, bobs):
        assert reply["result"]["stopReason"] == "end_turn", reply
    over = principal_rate_limit_error("alice", 2)
    assert over.startswith(RATE_LIMIT_ERROR)
    first_outputs = _tool_outputs(first, first_session)
    assert len(first_outputs) == 2
    assert all("note-marker" in output for output in first_outputs), first_outputs
    # alice's second connection, a session of its own: the budget is hers, not the session's.
    second_outputs = _tool_outputs(second, second_session)
    assert len(second_outputs) == 2
    assert all(over in output for output in second_outputs), second_outputs
    assert not any("note-marker" in output for output in second_outputs)
    bob_outputs = _tool_outputs(bob, bob_session)
    assert len(bob_outputs) == 3
    assert all("note-marker" in output for output in bob_outputs), bob_outputs


async def test_config_tokens_become_principals_and_a_name_in_use_is_refused(
    tmp_path: Path,
) -> None:
    old_token = "zc_" + "cd" * 32
    old_digest = hash_token(old_token)
    config_dir = write_config(
        tmp_path / "cfg", {**echo_config(), "gateway": {"paired_tokens": [old_digest]}}
    )
    workspace = tmp_path / "work"
    workspace.mkdir()
    with trio.fail_after(TIMEOUT):
        async with run_gateway(config_dir) as gateway:
            # A bridge paired before tokens had names keeps working, as token-<prefix>.
            async with ws_connect(gateway.ws_url(), token=old_token) as ws:
                await _new_session(WsRpc(ws), workspace)
            listing = await zeroclaw_cli(
                config_dir, "gateway", "tokens", "--json", "--port", str(gateway.port)
            )
            [named] = json.loads(listing.stdout)
            assert named["name"] == f"token-{old_digest[:12]}"
            assert named["source"] == "config.toml"

            code = (await zeroclaw_cli(
                config_dir, "gateway", "get-paircode", "--new", "--port", str(gateway.port)
            )).stdout.strip()  # fmt: skip
            taken = await gateway.http(
                "POST", "/pair", headers={"X-Pairing-Code": code, PRINCIPAL_HEADER: named["name"]}
            )
            assert taken.status_code == 409, taken.text
            assert "already has a live token" in taken.json()["error"]
            bad = await gateway.http(
                "POST", "/pair", headers={"X-Pairing-Code": code, PRINCIPAL_HEADER: "no spaces"}
            )
            assert bad.status_code == 400, bad.text
            # The refused name did not use the code up.
            paired = await gateway.http(
                "POST", "/pair", headers={"X-Pairing-Code": code, PRINCIPAL_HEADER: "dana"}
            )
            assert paired.status_code == 200, paired.text
            assert paired.json()["principal"] == "dana"
        # The operator removes the old digest from config.toml by hand: revoked at start.
        document = tomllib.loads((config_dir / "config.toml").read_text())
        kept = [d for d in document["gateway"]["paired_tokens"] if d != old_digest]
        assert len(kept) == 1
        write_config(config_dir, {**echo_config(), "gateway": {"paired_tokens": kept}})
        async with run_gateway(config_dir) as gateway:
            listing = await zeroclaw_cli(
                config_dir, "gateway", "tokens", "--json", "--port", str(gateway.port)
            )
            by_name = {t["name"]: t for t in json.loads(listing.stdout)}
            assert by_name["dana"]["revoked"] is None
            assert by_name[f"token-{old_digest[:12]}"]["revoked"] is not None
            with pytest.raises(InvalidStatus):
                async with ws_connect(gateway.ws_url(), token=old_token):
                    pass
