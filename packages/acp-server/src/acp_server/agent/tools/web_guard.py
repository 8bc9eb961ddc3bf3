"""Where the web tools may connect: public addresses only, unless ``[web]
allow_private_hosts = true``.

A URL's host is resolved once and every address it resolves to is checked (one private
address refuses the whole host); the request then goes to the checked address itself,
with the original ``Host`` header and, for https, the original name for SNI and
certificate verification, so a second lookup cannot point the connection elsewhere.
Redirects are checked the same way, hop by hop (web.py). An IPv6 address that carries an
IPv4 address (IPv4-mapped, IPv4-compatible, NAT64, 6to4) is checked as that IPv4 address:
``64:ff9b::7f00:1`` reaches 127.0.0.1 through a NAT64 gateway.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Final

import httpx
import trio

from acp_server.agent.tools.base import RefusedCall, ToolError

WEB_SCHEMES: Final = ("http", "https")
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
PRIVATE_HOSTS_HINT: Final = "set [web] allow_private_hosts = true in config.toml to allow it"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class WebTarget:
    """A checked URL: ``connect_url`` names the address to connect to; ``host_header``
    and ``server_name`` keep what the URL named."""

    url: httpx.URL
    connect_url: httpx.URL
    host_header: str
    server_name: str | None

    @property
    def extensions(self) -> dict[str, str]:
        return {"sni_hostname": self.server_name} if self.server_name else {}


_NAT64_WELL_KNOWN: Final = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE: Final = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_TRANSLATED: Final = ipaddress.IPv6Network("::ffff:0:0:0/96")
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")
_TEREDO: Final = ipaddress.IPv6Network("2001::/32")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, where a translator, a tunnel or the
    host itself reaches that IPv4 address: IPv4-mapped (``::ffff:a.b.c.d``, RFC 4291),
    IPv4-translated (``::ffff:0:a.b.c.d``, RFC 2765), IPv4-compatible (``::a.b.c.d``, RFC
    4291), the NAT64 well-known prefix (``64:ff9b::/96``, RFC 6052) and 6to4
    (``2002:AABB:CCDD::/48``, RFC 3056). None for any other address."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _NAT64_WELL_KNOWN or address in _IPV4_TRANSLATED:
        return low32
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # not :: nor ::1
        return low32
    return None


def address_problem(address: IPAddress) -> str | None:
    """Why the web tools refuse ``address`` by default (None: a public address). An IPv6
    address that stands for an IPv4 one (``embedded_ipv4``) is judged as that address;
    the local-use NAT64 prefix and Teredo, whose IPv4 address depends on the network or
    is obfuscated, are refused outright."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL_USE:
            return "a local-use NAT64 address (RFC 8215)"
        if address in _TEREDO:
            return "a Teredo address (RFC 4380)"
        embedded = embedded_ipv4(address)
        if embedded is not None:
            problem = address_problem(embedded)
            return None if problem is None else f"{problem} ({embedded}) inside an IPv6 address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a non-public address"
    return None


def parse_web_url(raw: str) -> httpx.URL:
    """``raw`` as an absolute http(s) URL with a host; ``RefusedCall`` otherwise."""
    try:
        url = httpx.URL(raw.strip())
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise RefusedCall(f"Invalid URL {raw!r}: {exc}") from None
    if url.scheme not in WEB_SCHEMES:
        raise RefusedCall(f"Invalid URL {raw!r}: only http and https URLs can be fetched")
    if not url.host:
        raise RefusedCall(f"Invalid URL {raw!r}: it names no host")
    if url.userinfo:
        raise RefusedCall(f"Invalid URL {raw!r}: credentials in the URL are not accepted")
    return url


async def resolve_target(url: httpx.URL, *, allow_private: bool) -> WebTarget:
    """Resolve ``url``'s host and check every address (module docstring)."""
    host = url.raw_host.decode("ascii")
    port = url.port or DEFAULT_PORTS[url.scheme]
    addresses = await resolve_host(host, port)
    if not allow_private:
        for address in addresses:
            problem = address_problem(address)
            if problem is not None:
                shown = host if host == str(address) else f"{host} ({address})"
                raise ToolError(f"Refusing to connect to {shown}: {problem}; {PRIVATE_HOSTS_HINT}")
    chosen = addresses[0]
    literal = _literal(host)
    return WebTarget(
        url=url,
        connect_url=url.copy_with(host=str(chosen)),
        host_header=url.netloc.decode("ascii"),
        server_name=host if url.scheme == "https" and literal is None else None,
    )


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` (a name or an address literal) resolves to, without
    duplicates; ``ToolError`` when it resolves to none."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"Cannot resolve {host}: {exc.strerror or exc}") from None
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
        if address not in found:
            found.append(address)
    if not found:
        raise ToolError(f"Cannot resolve {host}: no addresses")
    return found
