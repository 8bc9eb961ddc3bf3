"""Where the web tools may connect: public addresses only, unless ``[web]
allow_private_hosts = true``.

A URL's host is resolved once and every address it resolves to is checked (one private
address refuses the whole host); the request then goes to the checked address itself,
with the original ``Host`` header and, for https, the original name for SNI and
certificate verification, so a second lookup cannot point the connection elsewhere.
Redirects are checked the same way, hop by hop (web.py).
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


def address_problem(address: IPAddress) -> str | None:
    """Why the web tools refuse ``address`` by default (None: a public address)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
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
    addresses = await _addresses(host, port)
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


async def _addresses(host: str, port: int) -> list[IPAddress]:
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
