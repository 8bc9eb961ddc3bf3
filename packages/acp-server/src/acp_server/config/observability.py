"""``[logging] format`` and ``[gateway] metrics_listen``: how an operator watches a server
(docs/deployment.md, "Monitoring").

``metrics_listen = "HOST:PORT"`` (``[::1]:9464`` for IPv6) serves ``GET /metrics`` on a
listener of its own, without the admin secret the gateway's main port asks for: bind it to
an address only the monitoring network reaches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from msgspec.structs import replace

from acp_server.config.values import GatewayConfig
from acp_server.observability.logs import LOG_FORMATS, LogFormat

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

METRICS_LISTEN_KEY: Final = "gateway.metrics_listen"
LOG_FORMAT_KEY: Final = "logging.format"
LOGGING_KEYS: Final = frozenset({"format"})


def parse_listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[IPv6]:PORT``; port 0 lets the OS choose) as (host, port).

    Raises:
        ValueError: the message says what is wrong.
    """
    value = text.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{text!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: write an IPv6 address in brackets, [::1]:9464")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"{text!r}: the port must be a number from 0 to 65535")
    return host, int(port_text)


def with_metrics_listen(
    parser: ConfigParser, table: dict[str, Any], gateway: GatewayConfig
) -> GatewayConfig:
    """``gateway`` with ``metrics_listen`` read from the ``[gateway]`` table."""
    raw = parser.get(table, "metrics_listen", METRICS_LISTEN_KEY, str, "")
    if not raw.strip():
        return gateway
    try:
        address = parse_listen_address(raw)
    except ValueError as exc:
        raise parser.error(METRICS_LISTEN_KEY, str(exc)) from None
    return replace(gateway, metrics_listen=address)


def parse_log_format(parser: ConfigParser, doc: dict[str, Any]) -> LogFormat:
    """``[logging] format``: ``human`` (the default) or ``json``."""
    table = parser.table(doc, "logging", "logging")
    parser.warn_unknown(table, LOGGING_KEYS, "logging")
    raw = parser.get(table, "format", LOG_FORMAT_KEY, str, "human").strip().lower()
    for known in LOG_FORMATS:
        if raw == known:
            return known
    raise parser.error(LOG_FORMAT_KEY, f"must be one of {', '.join(LOG_FORMATS)}, not {raw!r}")
