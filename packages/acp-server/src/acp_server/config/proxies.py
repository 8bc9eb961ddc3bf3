"""``[gateway] trusted_proxies`` and ``[gateway] proxy_protocol`` (docs/deployment.md).

``trusted_proxies`` lists the addresses or CIDR networks of the load balancers in front of
the gateway; only a connection from one of them may say who the real client is, with a
PROXY protocol header (``proxy_protocol = true``) or ``X-Forwarded-For``.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Network, IPv6Network
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from acp_server.config.values import GatewayConfig

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

TRUSTED_PROXIES_KEY = "gateway.trusted_proxies"
PROXY_PROTOCOL_KEY = "gateway.proxy_protocol"


def parse_network(text: str) -> IPv4Network | IPv6Network:
    """``10.0.0.0/8``, ``127.0.0.1`` (one host) or ``::1``; host bits set are refused.

    Raises:
        ValueError: not an address or network; the message says why.
    """
    value = text.strip()
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    network = ipaddress.ip_network(value, strict=True)
    mapped = network.network_address
    if (
        isinstance(mapped, ipaddress.IPv6Address)
        and mapped.ipv4_mapped is not None
        and network.prefixlen >= 96
    ):
        return ipaddress.IPv4Network((mapped.ipv4_mapped, network.prefixlen - 96))
    return network


def with_proxy_settings(
    parser: ConfigParser, table: dict[str, Any], gateway: GatewayConfig
) -> GatewayConfig:
    """``gateway`` with ``trusted_proxies`` and ``proxy_protocol`` read from ``table``."""
    networks: list[IPv4Network | IPv6Network] = []
    for entry in parser.strings(table, "trusted_proxies", TRUSTED_PROXIES_KEY, ()):
        try:
            networks.append(parse_network(entry))
        except ValueError as exc:
            raise parser.error(
                TRUSTED_PROXIES_KEY, f"{entry!r} is not an IP address or CIDR network ({exc})"
            ) from None
    proxy_protocol = parser.get(table, "proxy_protocol", PROXY_PROTOCOL_KEY, bool, False)
    if proxy_protocol and not networks:
        raise parser.error(
            PROXY_PROTOCOL_KEY,
            "true needs trusted_proxies: the addresses the PROXY headers may come from",
        )
    return replace(gateway, trusted_proxies=tuple(networks), proxy_protocol=proxy_protocol)
