"""``[storage] url`` / ``ZEROCLAW_STORAGE_URL``, and ``/health`` while the shared store is lost."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.config import ConfigError, load_config
from acp_server.gateway.service import Gateway
from acp_server.protocol.services.context import AcpApp
from acp_server.storage import AsyncSessionStore
from acp_server.storage.postgres import PostgresSessionStore
from tests.helpers import echo_config, write_config
from tests.server.gateway.test_gateway_handlers import _answer

URL = "postgresql://zeroclaw@db.internal:5432/zeroclaw"


def _with_storage(tmp_path: Path, storage: Any) -> Path:
    return write_config(tmp_path, {**echo_config(), "storage": storage})


def test_without_storage_sessions_stay_in_the_sqlite_file(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, echo_config()), environ={})
    assert config.storage.url is None
    assert not config.storage.shared
    assert load_config(tmp_path / "none", environ={}).storage.url is None


def test_storage_url_selects_postgres(tmp_path: Path) -> None:
    config = load_config(_with_storage(tmp_path, {"url": URL}), environ={})
    assert config.storage.url == URL
    assert config.storage.shared


def test_the_environment_wins_over_the_file_and_works_without_one(tmp_path: Path) -> None:
    env = {"ZEROCLAW_STORAGE_URL": "postgres://other/db"}
    assert load_config(_with_storage(tmp_path, {"url": URL}), environ=env).storage.url == (
        "postgres://other/db"
    )
    assert load_config(tmp_path / "none", environ=env).storage.url == "postgres://other/db"
    blank = {"ZEROCLAW_STORAGE_URL": "  "}
    assert load_config(tmp_path / "none", environ=blank).storage.url is None


@pytest.mark.parametrize(
    ("storage", "env", "key"),
    [
        ({"url": "sqlite:///tmp/x.db"}, {}, "storage.url"),
        ({"url": 5}, {}, "storage.url"),
        ({}, {"ZEROCLAW_STORAGE_URL": "mysql://x"}, "ZEROCLAW_STORAGE_URL"),
    ],
)
def test_a_url_that_is_not_postgres_is_a_config_error(
    tmp_path: Path, storage: Any, env: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(_with_storage(tmp_path, storage), environ=env)
    assert raised.value.key == key


def test_a_bad_environment_url_fails_without_a_config_file_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ZEROCLAW_STORAGE_URL"):
        load_config(tmp_path / "none", environ={"ZEROCLAW_STORAGE_URL": "redis://x"})


async def _health(tmp_path: Path, store: AsyncSessionStore) -> tuple[int, dict[str, Any]]:
    config = load_config(write_config(tmp_path, echo_config()), environ={})
    gateway = Gateway(AcpApp(config=config, store=store), port=0, announce=print)
    status, raw = await _answer(
        gateway.routes, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "127.0.0.1"
    )
    body: dict[str, Any] = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    return status, body


async def test_health_is_503_while_the_shared_store_does_not_answer(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    lost = AsyncSessionStore(
        PostgresSessionStore(f"postgresql://127.0.0.1:{port}/x", connect_timeout_secs=2)
    )
    with trio.fail_after(30):
        status, body = await _health(tmp_path, lost)
        await lost.aclose()
    assert status == 503
    assert body["status"] == "store_unavailable"


async def test_health_is_200_while_the_shared_store_answers(
    tmp_path: Path, postgres_url: str
) -> None:
    live = AsyncSessionStore(await trio.to_thread.run_sync(PostgresSessionStore.open, postgres_url))
    with trio.fail_after(30):
        status, body = await _health(tmp_path, live)
        await live.aclose()
    assert (status, body["status"]) == (200, "ok")
