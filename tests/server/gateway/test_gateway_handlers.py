"""The gateway's route table, its handlers and its accept loop, over in-memory streams."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from acp_server.config import load_config
from acp_server.gateway.admin import ADMIN_HEADER, ADMIN_SECRET_FILE, AdminSecret
from acp_server.gateway.http import HttpRequest, read_request
from acp_server.gateway.routes import Exchange, RouteTable
from acp_server.gateway.service import Gateway
from acp_server.protocol.services.context import AcpApp
from tests.helpers import echo_config, write_config


def _gateway(tmp_path: Path, **gateway: Any) -> Gateway:
    document = echo_config()
    document["gateway"] = gateway
    write_config(tmp_path, document)
    return Gateway(AcpApp(config=load_config(tmp_path), store=None), port=0, announce=print)


async def _request(head: str) -> HttpRequest:
    client, server = trio.testing.memory_stream_pair()
    await client.send_all(head.encode("latin-1"))
    request = await read_request(server)
    assert request is not None
    return request


async def _answer(routes: RouteTable, head: str, peer: str = "127.0.0.1") -> tuple[int, bytes]:
    """Dispatch one request; the status and body of the response."""
    request = await _request(head)
    client, server = trio.testing.memory_stream_pair()
    await routes.dispatch(server, request, peer)
    await server.aclose()
    raw = b""
    while chunk := await client.receive_some():
        raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    head_lines, _, body = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), head_lines + b"\r\n\r\n" + body


async def test_pair_code_is_only_given_to_the_operator_on_the_gateway_host(
    tmp_path: Path,
) -> None:
    gateway = _gateway(tmp_path, require_pairing=True)
    gateway.state.admin_secret = AdminSecret(tmp_path / ADMIN_SECRET_FILE, "operator-secret")
    code = gateway.pairing.issue_code()

    async def pair_code_as_seen_from(peer: str, secret: str | None = None) -> dict[str, Any]:
        proof = f"{ADMIN_HEADER}: {secret}\r\n" if secret is not None else ""
        status, raw = await _answer(
            gateway.routes, f"GET /pair/code HTTP/1.1\r\nHost: 127.0.0.1\r\n{proof}\r\n", peer
        )
        assert status == 200
        body: dict[str, Any] = json.loads(raw.split(b"\r\n\r\n", 1)[1])
        return body

    with trio.fail_after(10):
        operator = await pair_code_as_seen_from("127.0.0.1", "operator-secret")
        local = await pair_code_as_seen_from("127.0.0.1")
        wrong = await pair_code_as_seen_from("127.0.0.1", "a-guess")
        remote = await pair_code_as_seen_from("203.0.113.7", "operator-secret")
    assert operator["pairing_code"] == code
    # Being on loopback is not proof of being the operator.
    assert local["pairing_code"] is None
    assert wrong["pairing_code"] is None
    assert "get-paircode" in local["message"]
    assert remote["pairing_code"] is None
    assert "get-paircode" in remote["message"]


async def test_route_table_prefix_methods_and_guards() -> None:
    seen: list[str] = []

    async def handler(exchange: Exchange) -> None:
        seen.append(exchange.route)
        await exchange.stream.send_all(b"HTTP/1.1 204 No Content\r\n\r\n")

    async def refuse(exchange: Exchange) -> bool:
        await exchange.stream.send_all(b"HTTP/1.1 403 Forbidden\r\n\r\n")
        return False

    routes = RouteTable(prefix="/zc", body_timeout_secs=5)
    routes.add("/thing", handler, {"GET"})
    routes.add("/any", handler, None)
    routes.guard("/private/", refuse)
    routes.add("/private/x", handler, {"GET"})
    with trio.fail_after(10):
        assert (await _answer(routes, "GET /zc/thing HTTP/1.1\r\nHost: h\r\n\r\n"))[0] == 204
        assert (await _answer(routes, "GET /thing HTTP/1.1\r\nHost: h\r\n\r\n"))[0] == 404
        assert (await _answer(routes, "GET /zcthing HTTP/1.1\r\nHost: h\r\n\r\n"))[0] == 404
        assert (await _answer(routes, "GET /zc/other HTTP/1.1\r\nHost: h\r\n\r\n"))[0] == 404
        status, raw = await _answer(
            routes, "POST /zc/thing HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
        )
        assert status == 405
        assert b"Allow: GET" in raw
        # methods=None: the handler takes any method and checks it itself.
        delete = "DELETE /zc/any HTTP/1.1\r\nHost: h\r\n\r\n"
        assert (await _answer(routes, delete))[0] == 204
        # A guard answers before the table is consulted, for known and unknown routes alike.
        assert (await _answer(routes, "GET /zc/private/x HTTP/1.1\r\nHost: h\r\n\r\n"))[0] == 403
        assert (await _answer(routes, "GET /zc/private/y HTTP/1.1\r\nHost: h\r\n\r\n"))[0] == 403
    assert seen == ["/thing", "/any"]


class FakeListener(trio.abc.Listener[trio.abc.Stream]):
    """Plays back ``outcomes``: an OSError is raised, a stream is returned."""

    def __init__(self, outcomes: list[OSError | trio.abc.Stream]) -> None:
        self.outcomes = outcomes
        self.closed = False

    async def accept(self) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, OSError):
            raise outcome
        return outcome

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS])
async def test_accept_retries_capacity_errors_and_raises_the_rest(
    tmp_path: Path, code: int, autojump_clock: trio.abc.Clock
) -> None:
    gateway = _gateway(tmp_path, require_pairing=False)
    served: list[trio.abc.Stream] = []

    async def handle(stream: trio.abc.Stream) -> None:
        served.append(stream)

    gateway._handle_stream = handle  # type: ignore[method-assign]
    accepted, _ = trio.testing.memory_stream_pair()
    listener = FakeListener(
        [OSError(code, "capacity"), accepted, OSError(errno.EBADF, "listener broken")]
    )
    started = trio.current_time()
    async with trio.open_nursery() as connections:
        with pytest.raises(OSError) as caught:
            await gateway._accept_loop(listener, connections)
    assert caught.value.errno == errno.EBADF
    assert served == [accepted]
    assert listener.closed
    assert trio.current_time() - started >= 0.1  # it paused before retrying
