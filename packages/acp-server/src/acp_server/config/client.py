"""``[acp] client_fs`` and ``[acp] client_terminal``: whether the tools use what the ACP
client offers (its ``fs/*`` methods, its ``terminal/*``) instead of this machine's disk and
shell (acp_server/protocol/presentation/client_calls.py); and a provider's ``vision``: whether the
client may send it images (``promptCapabilities.image``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from msgspec.structs import replace

from acp_server.config.values import AcpConfig, ProviderConfig

if TYPE_CHECKING:
    from acp_server.config.parse import ConfigParser

CLIENT_FS_MODES: Final = ("auto", "never")


def parse_client_offers(
    parser: ConfigParser, table: Mapping[str, Any], acp: AcpConfig
) -> AcpConfig:
    """``acp`` with ``client_fs`` and ``client_terminal`` read from the ``[acp]`` table."""
    client_fs = parser.get(table, "client_fs", "acp.client_fs", str, "auto")
    if client_fs not in CLIENT_FS_MODES:
        raise parser.error("acp.client_fs", f'must be "auto" or "never"; got {client_fs!r}')
    return replace(
        acp,
        client_fs="never" if client_fs == "never" else "auto",
        client_terminal=parser.get(table, "client_terminal", "acp.client_terminal", bool, False),
    )


def parse_vision(
    parser: ConfigParser, body: Mapping[str, Any], prefix: str, provider: ProviderConfig
) -> ProviderConfig:
    """``provider`` with ``vision`` (the model takes images) read from its table."""
    return replace(provider, vision=parser.get(body, "vision", f"{prefix}.vision", bool, False))
