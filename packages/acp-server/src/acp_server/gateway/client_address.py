"""Who the client really is when the gateway sits behind a load balancer.

Only a peer listed in ``[gateway] trusted_proxies`` may say so, in one of two ways:

* a PROXY protocol header (gateway/proxy_protocol.py) before anything else, when
  ``[gateway] proxy_protocol = true``: such a peer must send one (its connection is refused
  otherwise), and a header from any other peer is refused;
* ``X-Forwarded-For`` on the HTTP request: the entries are read right to left and the first
  address that is not a trusted proxy is the client (the left-most if all are trusted).

A connection that came through a trusted proxy in either way is *proxied*: whatever the
address, it is not this machine's own client (``GET /pair/code`` and the admin routes refuse
it, gateway/handlers.py). The client address keys the per-client cap on unauthenticated
sockets (gateway/pending.py) and appears in the logs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Final

import trio

from acp_server.errors import ZeroclawError
from acp_server.gateway.auth import Headers, header_values
from acp_server.gateway.proxy_protocol import (
    NeedMoreBytes,
    ProxyCommand,
    ProxyHeaderError,
    parse_proxy_header,
    signature_match,
)

MAX_FORWARDED_FOR_ENTRIES: Final = 32
"""``X-Forwarded-For`` entries looked at, from the right; a longer chain is cut there."""


def normalized_ip(text: str) -> IPv4Address | IPv6Address | None:
    """``text`` as an address (an IPv4-mapped IPv6 address as IPv4), or None."""
    value = text.strip()
    if value.startswith("[") and "]" in value:
        value = value[1 : value.index("]")]
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class TrustedProxies:
    """The networks of ``[gateway] trusted_proxies``."""

    def __init__(self, networks: Iterable[IPv4Network | IPv6Network]) -> None:
        self.networks = tuple(networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        ip = normalized_ip(address)
        return ip is not None and any(ip in network for network in self.networks)


@dataclass(frozen=True, slots=True)
class ClientAddress:
    """``address`` is the real client; ``proxy`` the trusted proxy that connected to the
    gateway on its behalf, if any."""

    address: str
    proxy: str | None = None

    @property
    def proxied(self) -> bool:
        return self.proxy is not None

    def __str__(self) -> str:
        return self.address if self.proxy is None else f"{self.address} via {self.proxy}"


class ProxyHeaderRefused(ZeroclawError):
    """The connection's PROXY header is missing, malformed, or from an untrusted peer."""


def forwarded_client(
    client: ClientAddress, headers: Headers, trusted: TrustedProxies
) -> ClientAddress:
    """``client`` as ``X-Forwarded-For`` tells it, when the sender is a trusted proxy."""
    if not trusted or not trusted.trusts(client.address):
        return client
    entries = [
        item.strip()
        for value in header_values(headers, b"x-forwarded-for")
        for item in value.split(",")
    ]
    entries = [item for item in entries if item][-MAX_FORWARDED_FOR_ENTRIES:]
    if not entries:
        return client
    via = client.proxy or client.address
    last_trusted = client.address
    for entry in reversed(entries):
        address = normalized_ip(entry)
        if address is None:
            break  # not an address (``unknown``, an obfuscated name): trust stops here
        if not trusted.trusts(str(address)):
            return ClientAddress(str(address), via)
        last_trusted = str(address)
    return ClientAddress(last_trusted, via)


class PrefixedStream(trio.abc.Stream):
    """``stream`` with ``prefix`` (bytes already read from it) given back first."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes) -> None:
        self.stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:size], self._prefix[size:]
            return data
        return bytes(await self.stream.receive_some(max_bytes))

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def _receive_more(stream: trio.abc.Stream, count: int, received: bytes) -> bytes:
    data = bytes(await stream.receive_some(count))
    if not data:
        raise ProxyHeaderRefused(
            f"connection closed after {len(received)} bytes of its PROXY protocol header"
        )
    return data


async def read_proxy_prelude(
    stream: trio.abc.Stream, peer: str, trusted: TrustedProxies
) -> tuple[ClientAddress, trio.abc.Stream]:
    """The client behind ``peer`` and the stream to go on reading (with ``proxy_protocol``
    on). A trusted peer's header is read without taking a byte past it; an untrusted peer's
    first bytes are looked at, and given back unless they start a PROXY header.

    Raises:
        ProxyHeaderRefused: a trusted peer sent no valid header, or an untrusted one sent one.
    """
    if not trusted.trusts(peer):
        data = b""
        while (match := signature_match(data)) == "undecided":
            chunk = bytes(await stream.receive_some(16))
            if not chunk:
                break
            data += chunk
        if match == "proxy":
            raise ProxyHeaderRefused(f"PROXY protocol header from {peer}, not a trusted proxy")
        return ClientAddress(peer), PrefixedStream(stream, data) if data else stream
    data = b""
    while True:
        try:
            parsed = parse_proxy_header(data)
        except ProxyHeaderError as exc:
            raise ProxyHeaderRefused(f"{exc} from trusted proxy {peer}") from None
        if not isinstance(parsed, NeedMoreBytes):
            break
        data += await _receive_more(stream, parsed.count, data)
    if parsed.command is ProxyCommand.LOCAL or parsed.addresses is None:
        return ClientAddress(peer, peer), stream
    source = normalized_ip(parsed.addresses.source_ip)
    return ClientAddress(str(source), peer), stream
