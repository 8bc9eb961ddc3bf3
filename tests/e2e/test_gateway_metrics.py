"""`zeroclaw gateway` as its monitoring sees it: ``GET /metrics`` (Prometheus text format)
and ``--log-format json``, through real gateway processes and real clients.

The exposition is read with prometheus_client's own text parser, as a Prometheus server
would read it; the JSON log lines with ``json.loads``, line by line.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from acp_core.gateway_contract import ADMIN_HEADER, ADMIN_SECRET_FILE
from tests.e2e.gateway_harness import RunningGateway, WsRpc, run_gateway, ws_connect
from tests.e2e.helpers import (
    RpcPipeClient,
    allow_once,
    child_env,
    console_script,
    open_session,
)
from tests.helpers import echo_config, session_dir, write_config

pytestmark = pytest.mark.e2e

METRICS_ANNOUNCED: Final = re.compile(r"metrics on http://([^ ]+):(\d+)/metrics")
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_exposition(text: str) -> Series:
    """Every sample of a Prometheus text exposition, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def total(series: Series, name: str) -> float:
    return sum(v for (sample, _labels), v in series.items() if sample == name)


def admin_secret(config_dir: Path) -> str:
    return (config_dir / ADMIN_SECRET_FILE).read_text().strip()


async def scrape_text(gateway: RunningGateway) -> str:
    response = await gateway.http(
        "GET", "/metrics", headers={ADMIN_HEADER: admin_secret(gateway.config_dir)}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return response.text


async def scrape(gateway: RunningGateway) -> Series:
    return parse_exposition(await scrape_text(gateway))


def _config(tmp_path: Path, **gateway: object) -> Path:
    document = echo_config(max_sessions=2000)
    document["gateway"] = {"require_pairing": True, **gateway}
    return write_config(tmp_path / "cfg", document)


async def test_metrics_need_the_admin_secret_on_the_gateways_port(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            bare = await gateway.http("GET", "/metrics")
            wrong = await gateway.http("GET", "/metrics", headers={ADMIN_HEADER: "0" * 64})
            from_a_page = await gateway.http(
                "GET",
                "/metrics",
                headers={ADMIN_HEADER: admin_secret(config_dir), "Origin": "http://127.0.0.1"},
            )
            series = await scrape(gateway)
    for refused in (bare, wrong, from_a_page):
        assert refused.status_code == 403
        assert "zeroclaw_" not in refused.text
        assert "metrics_listen" in refused.text
    assert value(series, "zeroclaw_connections_open", transport="websocket") == 0
    assert value(series, "zeroclaw_sessions_live") == 0


async def test_metrics_listen_serves_them_without_the_secret(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    with trio.fail_after(60):
        async with run_gateway(config_dir, "--metrics-listen", "127.0.0.1:0") as gateway:
            await gateway.log.wait_for("metrics on http://")
            [match] = [m for line in gateway.log.lines if (m := METRICS_ANNOUNCED.search(line))]
            base = f"http://{match.group(1)}:{match.group(2)}"
            async with httpx.AsyncClient(trust_env=False, timeout=10) as client:
                scraped = await client.get(base + "/metrics")
                elsewhere = await client.get(base + "/health")
                posted = await client.post(base + "/metrics")
            main_port = await gateway.http("GET", "/metrics")
    assert scraped.status_code == 200
    assert "zeroclaw_turns_total" in scraped.text or "# TYPE zeroclaw_turns" in scraped.text
    assert value(parse_exposition(scraped.text), "zeroclaw_sessions_live") == 0
    assert elsewhere.status_code == 404
    assert posted.status_code == 405
    assert main_port.status_code == 403  # the main port still asks for the secret


async def test_metrics_listen_from_config_toml(tmp_path: Path) -> None:
    config_dir = _config(tmp_path, metrics_listen="127.0.0.1:0")
    with trio.fail_after(60):
        async with run_gateway(config_dir) as gateway:
            await gateway.log.wait_for("metrics on http://127.0.0.1:")


@asynccontextmanager
async def paired_session(gateway: RunningGateway, cwd: Path) -> AsyncIterator[tuple[WsRpc, str]]:
    """A new token, a WebSocket with it, initialize and session/new: the client and the
    session id."""
    token = await gateway.pair()
    async with ws_connect(gateway.ws_url(), token=token) as ws:
        rpc = WsRpc(ws)
        await rpc.call("initialize", {"protocolVersion": 1})
        new = await rpc.call("session/new", {"cwd": str(cwd)})
        yield rpc, new["result"]["sessionId"]


def _tool_line(name: str, arguments: Mapping[str, Any]) -> str:
    return f"/tool {name} {json.dumps(arguments)}"


async def test_series_move_with_real_turns_pairing_and_revocation(tmp_path: Path) -> None:
    config_dir = _config(tmp_path)
    workspace = session_dir(tmp_path)
    (tmp_path / "secret.txt").write_text("outside")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    tools = "\n".join(
        [
            _tool_line("file_write", {"path": "made.txt", "content": "x"}),  # asks: allowed
            _tool_line("file_read", {"path": "link.txt"}),  # the policy sees where it leads
            _tool_line("shell", {"command": "cat $(echo ../secret.txt)"}),  # policy refuses
        ]
    )
    with trio.fail_after(90):
        async with run_gateway(config_dir) as gateway:
            before = await scrape(gateway)
            wrong = await gateway.http("POST", "/pair", headers={"X-Pairing-Code": "000000x"})
            async with paired_session(gateway, workspace) as (rpc, session_id):
                first = await rpc.prompt(session_id, "hello metrics")
                second = await rpc.prompt(session_id, tools, on_request=allow_once)
                failed = await rpc.prompt(session_id, "/fail the model is down")
                during = await scrape(gateway)
            await gateway.wait_for_connections(0)
            revoked = await gateway.http(
                "POST",
                "/admin/tokens/revoke",
                params={"all": "1"},
                headers={ADMIN_HEADER: admin_secret(config_dir)},
            )
            after = await scrape(gateway)
    assert wrong.status_code == 403
    assert first["result"]["stopReason"] == "end_turn"
    assert second["result"]["stopReason"] == "end_turn"
    assert "error" in failed
    assert revoked.status_code == 200, revoked.text
    assert total(before, "zeroclaw_turns_total") == 0
    assert value(during, "zeroclaw_connections_open", transport="websocket") == 1
    assert value(during, "zeroclaw_sessions_live") == 1
    assert value(after, "zeroclaw_connections_open", transport="websocket") == 0
    assert value(after, "zeroclaw_connections_total", transport="websocket") == 1
    assert value(after, "zeroclaw_turns_total", agent="echo", outcome="end_turn") == 2
    assert value(after, "zeroclaw_turns_total", agent="echo", outcome="error") == 1
    assert value(after, "zeroclaw_turn_duration_seconds_count", agent="echo") == 3
    # The tool turn took two model calls (the calls, then the summary), the failed one one.
    model_calls = "zeroclaw_model_call_duration_seconds_count"
    assert value(after, model_calls, provider="echo.default", outcome="ok") == 3
    assert value(after, model_calls, provider="echo.default", outcome="error") == 1
    assert value(after, "zeroclaw_model_tokens_total", agent="echo", direction="input") > 0
    assert value(after, "zeroclaw_model_tokens_total", agent="echo", direction="output") > 0
    assert value(after, "zeroclaw_permission_requests_total", outcome="allow_once") == 1
    assert value(after, "zeroclaw_sandbox_refusals_total", reason="policy") == 2
    assert value(after, "zeroclaw_store_commit_duration_seconds_count", outcome="ok") == 2
    assert value(after, "zeroclaw_pairing_failures_total", reason="wrong_code") == 1
    assert value(after, "zeroclaw_token_revocations_total") == 1
    assert (workspace / "made.txt").exists()


SESSIONS_FOR_CARDINALITY: Final = 1000
WARM_UP_SESSIONS: Final = 10


async def test_series_do_not_grow_with_sessions(tmp_path: Path) -> None:
    """1,000 sessions, each with a turn, through one real gateway: the number of series
    after them is the number after the first ten (no label carries a session)."""
    config_dir = _config(tmp_path)
    workspace = session_dir(tmp_path)

    session_ids: list[str] = []

    async def session_with_a_turn(rpc: WsRpc, index: int) -> None:
        new = await rpc.call("session/new", {"cwd": str(workspace)})
        session_id = new["result"]["sessionId"]
        session_ids.append(session_id)
        answer = await rpc.prompt(session_id, f"turn number {index} of {session_id}")
        assert answer["result"]["stopReason"] == "end_turn"
        closed = await rpc.call("session/close", {"sessionId": session_id})
        assert "result" in closed, closed

    with trio.fail_after(600):
        async with run_gateway(config_dir) as gateway:
            token = await gateway.pair()
            async with ws_connect(gateway.ws_url(), token=token) as ws:
                rpc = WsRpc(ws)
                await rpc.call("initialize", {"protocolVersion": 1})
                for index in range(WARM_UP_SESSIONS):
                    await session_with_a_turn(rpc, index)
                warm = await scrape(gateway)
                for index in range(WARM_UP_SESSIONS, SESSIONS_FOR_CARDINALITY):
                    await session_with_a_turn(rpc, index)
                    rpc.notifications.clear()
                exposition = await scrape_text(gateway)
    done = parse_exposition(exposition)
    assert value(done, "zeroclaw_turns_total", agent="echo", outcome="end_turn") == (
        SESSIONS_FOR_CARDINALITY
    )
    assert len(done) == len(warm), sorted(set(done) - set(warm))
    assert len(set(session_ids)) == SESSIONS_FOR_CARDINALITY
    assert not [session_id for session_id in session_ids if session_id in exposition]


LOG_FIELDS: Final = ("time", "level", "logger", "event")


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line parsed as a JSON object (a line that is not one fails the test)."""
    entries = []
    for line in text.splitlines():
        entry = json.loads(line)
        assert isinstance(entry, dict), line
        assert all(name in entry for name in LOG_FIELDS), line
        entries.append(entry)
    return entries


async def test_gateway_json_logs_tag_turns_with_session_turn_and_correlation(
    tmp_path: Path,
) -> None:
    config_dir = _config(tmp_path)
    workspace = session_dir(tmp_path)
    with trio.fail_after(60):
        async with (
            run_gateway(config_dir, "--log-format", "json") as gateway,
            paired_session(gateway, workspace) as (rpc, session_id),
        ):
            await rpc.prompt(session_id, "hello logs")
            await gateway.log.wait_for("turn ended")
    entries = json_lines(gateway.stderr())
    assert any("gateway listening on" in entry["event"] for entry in entries)
    opened, closed = [e for e in entries if e["event"].startswith("ACP connection from")]
    [ended] = [e for e in entries if e["event"].startswith("turn ended")]
    assert ended["session"] == session_id
    assert ended["level"] == "info"
    assert re.fullmatch(r"[0-9a-f]{12}", ended["turn"])
    assert ended["correlation"] == opened["correlation"] == closed["correlation"]
    assert "session" not in opened  # only what is known is written


async def test_stdio_json_logs_from_config_keep_stdout_for_frames(tmp_path: Path) -> None:
    document = echo_config()
    document["logging"] = {"format": "json"}
    config_dir = write_config(tmp_path / "cfg", document)
    workspace = session_dir(tmp_path)
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr, trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            [str(console_script("zeroclaw")), "acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=child_env(config_dir, {"ZEROCLAW_LOG": "info"}),
        )
        client = RpcPipeClient(process)
        session_id = await open_session(client, workspace)
        answer = await client.prompt(session_id, "hello stdio logs")
        await client.close_stdin()
        assert await process.wait() == 0
    assert answer["result"]["stopReason"] == "end_turn"
    assert all(line.startswith("{") for line in client.raw_lines)  # frames only
    entries = json_lines(stderr_path.read_text())
    [ended] = [e for e in entries if e["event"].startswith("turn ended")]
    assert ended["session"] == session_id
    assert re.fullmatch(r"[0-9a-f]{12}", ended["turn"])
    assert re.fullmatch(r"[0-9a-f]{12}", ended["correlation"])
