"""A gateway behind a load balancer: ``[gateway] trusted_proxies``, PROXY headers and
``X-Forwarded-For`` decide who the client is, and a proxied client never gets the pairing
code (gateway/client_address.py, config/proxies.py)."""

from __future__ import annotations

import ipaddress
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from acp_server.config import ConfigError, GatewayConfig, load_config
from acp_server.gateway.admin import ADMIN_HEADER, ADMIN_SECRET_FILE
from acp_server.gateway.client_address import ClientAddress, TrustedProxies, forwarded_client
from acp_server.gateway.proxy_protocol import ProxyAddresses, ProxyCommand, encode_proxy_v2
from acp_server.gateway.service import Gateway
from acp_server.protocol.services.context import AcpApp
from tests.helpers import echo_config, write_config


def _settings(tmp_path: Path, table: str) -> GatewayConfig:
    (tmp_path / "config.toml").write_text(f"[gateway]\n{table}\n")
    return load_config(tmp_path, environ={}).gateway


def test_trusted_proxies_take_addresses_and_networks(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        'trusted_proxies = ["127.0.0.1", "10.0.0.0/8", "[::1]", "::ffff:192.168.0.0/112"]\n'
        "proxy_protocol = true",
    )
    assert settings.trusted_proxies == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
        ipaddress.ip_network("192.168.0.0/16"),
    )
    assert settings.proxy_protocol is True
    assert _settings(tmp_path, "").trusted_proxies == ()


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('trusted_proxies = ["10.0.0.1/8"]', "'10.0.0.1/8' is not an IP address or CIDR"),
        ('trusted_proxies = ["proxy.local"]', "'proxy.local' is not an IP address"),
        ("trusted_proxies = 1", "expected an array of strings"),
        ("proxy_protocol = true", "true needs trusted_proxies"),
    ],
)
def test_broken_proxy_settings_name_the_key(tmp_path: Path, table: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        _settings(tmp_path, table)
    assert "`gateway." in str(raised.value)


TRUSTED = TrustedProxies([ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128")])


def _forwarded(peer: str, *values: str) -> ClientAddress:
    headers = [(b"x-forwarded-for", value.encode()) for value in values]
    return forwarded_client(ClientAddress(peer), headers, TRUSTED)


def test_x_forwarded_for_is_read_right_to_left_from_a_trusted_proxy_only() -> None:
    # The right-most address that is not a trusted proxy is the client.
    assert _forwarded("10.0.0.1", "198.51.100.9, 203.0.113.7, 10.0.0.2") == ClientAddress(
        "203.0.113.7", "10.0.0.1"
    )
    assert _forwarded("10.0.0.1", "198.51.100.9", "203.0.113.7") == ClientAddress(
        "203.0.113.7", "10.0.0.1"
    )
    # Every hop trusted: the left-most one, still proxied.
    assert _forwarded("::ffff:10.0.0.1", "10.0.0.3, 10.0.0.2") == ClientAddress(
        "10.0.0.3", "::ffff:10.0.0.1"
    )
    # Anything from an untrusted peer is ignored: a client cannot make itself local.
    assert _forwarded("203.0.113.7", "127.0.0.1") == ClientAddress("203.0.113.7")
    # A trusted peer without the header is a direct client (not proxied).
    assert _forwarded("10.0.0.1") == ClientAddress("10.0.0.1")
    # An entry that is no address stops the walk at the last trusted hop.
    assert _forwarded("10.0.0.1", "203.0.113.7, unknown") == ClientAddress("10.0.0.1", "10.0.0.1")


def _config_dir(tmp_path: Path, **gateway: Any) -> Path:
    document = echo_config()
    document["gateway"] = {"require_pairing": True, **gateway}
    return write_config(tmp_path / "cfg", document)


@asynccontextmanager
async def _serving(config_dir: Path, handshake_timeout_secs: float = 5.0) -> AsyncIterator[int]:
    gateway = Gateway(
        AcpApp(config=load_config(config_dir), store=None),
        port=0,
        announce=lambda _: None,
        handshake_timeout_secs=handshake_timeout_secs,
    )
    async with trio.open_nursery() as nursery:
        port: int = await nursery.start(lambda task_status: gateway.serve(
            handle_signals=False, task_status=task_status
        ))  # fmt: skip
        yield port
        gateway.request_drain()


async def _exchange(port: int, prelude: bytes, path: str, *headers: str) -> tuple[int, str]:
    """Send ``prelude`` and a GET; the status and body (0 and "" when closed unanswered)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        head = "\r\n".join([f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers])
        await stream.send_all(prelude + (head + "\r\n\r\n").encode())
        raw = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    if not raw:
        return 0, ""
    status_line, _, rest = raw.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2].decode()


def _v2_from(source: str) -> bytes:
    return encode_proxy_v2(ProxyCommand.PROXY, ProxyAddresses(source, 40000, "127.0.0.1", 80))


def _pair_code(body: str) -> Any:
    return json.loads(body)["pairing_code"]


def _operator(config_dir: Path) -> str:
    """The header that proves the operator (the admin secret the gateway keeps there)."""
    return f"{ADMIN_HEADER}: {(config_dir / ADMIN_SECRET_FILE).read_text().strip()}"


async def test_with_proxy_protocol_a_trusted_peer_must_send_a_header_and_is_never_local(
    tmp_path: Path,
) -> None:
    config_dir = _config_dir(tmp_path, trusted_proxies=["127.0.0.1"], proxy_protocol=True)
    with trio.fail_after(30):
        async with _serving(config_dir) as port:
            # No header from a trusted peer: refused.
            status, body = await _exchange(port, b"", "/health")
            assert status == 400
            assert "not a PROXY protocol header" in body
            # A relayed client, even one that is itself on this host, gets no code.
            for source in ("203.0.113.7", "127.0.0.1"):
                status, body = await _exchange(
                    port, _v2_from(source), "/pair/code", _operator(config_dir)
                )
                assert status == 200
                assert _pair_code(body) is None
                assert "only given to the gateway's operator" in body
            # The proxy's own health check (LOCAL) and a v1 header are served.
            local = encode_proxy_v2(ProxyCommand.LOCAL)
            status, body = await _exchange(port, local, "/health")
            assert (status, json.loads(body)["status"]) == (200, "ok")
            v1 = b"PROXY TCP4 198.51.100.2 127.0.0.1 5000 80\r\n"
            assert (await _exchange(port, v1, "/health"))[0] == 200
            # Nor do the admin routes answer through the proxy.
            admin = await _exchange(port, _v2_from("127.0.0.1"), "/admin/paircode")
            assert admin[0] == 403


async def test_a_proxy_header_from_an_untrusted_peer_is_refused(tmp_path: Path) -> None:
    config_dir = _config_dir(tmp_path, trusted_proxies=["10.0.0.0/8"], proxy_protocol=True)
    with trio.fail_after(30):
        async with _serving(config_dir) as port:
            status, body = await _exchange(port, _v2_from("127.0.0.1"), "/pair/code")
            assert status == 400
            assert "not a trusted proxy" in body
            v1 = b"PROXY TCP4 127.0.0.1 127.0.0.1 5000 80\r\n"
            assert (await _exchange(port, v1, "/pair/code"))[0] == 400
            # Without a header this loopback peer is a direct local client.
            status, body = await _exchange(port, b"", "/pair/code", _operator(config_dir))
            assert status == 200
            assert _pair_code(body) is not None


async def test_x_forwarded_for_from_a_trusted_proxy_makes_the_request_proxied(
    tmp_path: Path,
) -> None:
    config_dir = _config_dir(tmp_path, trusted_proxies=["127.0.0.1"])
    with trio.fail_after(30):
        async with _serving(config_dir) as port:
            forwarded = "X-Forwarded-For: 127.0.0.1"
            operator = _operator(config_dir)
            status, body = await _exchange(port, b"", "/pair/code", forwarded, operator)
            assert (status, _pair_code(body)) == (200, None)
            status, body = await _exchange(port, b"", "/pair/code", operator)
            assert status == 200
            assert _pair_code(body) is not None


async def test_with_tls_the_proxy_header_comes_before_the_handshake(tmp_path: Path) -> None:
    from tests.e2e.test_bridge_gateway import _self_signed

    cert, key = await _self_signed(tmp_path)
    tls = {"enabled": True, "cert_path": str(cert), "key_path": str(key)}
    config_dir = _config_dir(tmp_path, trusted_proxies=["127.0.0.1"], proxy_protocol=True, tls=tls)
    context = ssl.create_default_context(cafile=str(cert))

    async def over_tls(prelude: bytes) -> bytes:
        raw = await trio.open_tcp_stream("127.0.0.1", port)
        await raw.send_all(prelude)
        stream = trio.SSLStream(raw, context, server_hostname="127.0.0.1", https_compatible=True)
        async with stream:
            await stream.send_all(b"GET /pair/code HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            with trio.fail_after(10):
                while chunk := await stream.receive_some(65536):
                    answer += chunk
        return answer

    with trio.fail_after(30):
        async with _serving(config_dir) as port:
            answer = await over_tls(_v2_from("127.0.0.1"))
            assert answer.startswith(b"HTTP/1.1 200 ")
            assert _pair_code(answer.partition(b"\r\n\r\n")[2].decode()) is None
            # No header: the connection is closed before any TLS is spoken.
            with pytest.raises(trio.BrokenResourceError):
                await over_tls(b"")


async def test_a_trusted_peer_that_sends_no_header_in_time_is_closed(tmp_path: Path) -> None:
    config_dir = _config_dir(tmp_path, trusted_proxies=["127.0.0.1"], proxy_protocol=True)
    with trio.fail_after(30):
        async with _serving(config_dir, handshake_timeout_secs=0.2) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(encode_proxy_v2(ProxyCommand.PROXY)[:10])  # and stalls
                assert await stream.receive_some(65536) == b""
