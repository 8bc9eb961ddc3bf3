"""The ``[web]`` table: what the web_fetch and http_request tools may reach
(``docs/security.md``, "Web tools")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from acp_server.config.values import WebConfig

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser


def parse_web(parser: ConfigParser, doc: Mapping[str, Any]) -> WebConfig:
    t = parser.table(doc, "web", "web")
    parser.warn_unknown(t, frozenset({"allow_private_hosts"}), "web")
    return WebConfig(
        allow_private_hosts=parser.get(
            t, "allow_private_hosts", "web.allow_private_hosts", bool, False
        )
    )
