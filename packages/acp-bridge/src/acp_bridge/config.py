"""Where the gateway is: the config directory, ``[gateway]`` from config.toml, and the URL.

The bridge reads the same config as the daemon (the ZeroClaw ACP documentation, "Running"),
so an IDE only needs
``zeroclaw-acp-bridge`` (plus ``--config-dir`` when the daemon uses a non-default one).
Only the ``[gateway]`` table is read; everything else in config.toml is the daemon's.
Since that table decides where the cached token is sent, a config.toml (or a config
directory) that group or others can write is refused, as the cached token file is when
they can read it. The
rules both sides share (the config-directory order, host/port/prefix, URL building) are in
``acp_core.gateway_contract``; this module applies them with the bridge's exit codes.
"""

from __future__ import annotations

import os
import stat
import tomllib
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from acp_bridge.errors import BridgeExit, ExitCode
from acp_core import gateway_contract
from acp_core.gateway_contract import (
    ACP_PATH,
    AGENT_QUERY_PARAMETER,
    CONFIG_DIR_ENV,
    CONFIG_FILE_NAME,
    DEFAULT_GATEWAY_HOST,
    DEFAULT_GATEWAY_PORT,
    GatewayAddress,
    normalize_host,
    normalize_path_prefix,
    path_prefix_problem,
    port_problem,
)

__all__ = [
    "CONFIG_DIR_ENV",
    "CONFIG_NOT_FOUND_MESSAGE",
    "DEFAULT_GATEWAY_PORT",
    "GatewayTarget",
    "add_agent_query",
    "check_ws_url",
    "http_base_for",
    "load_gateway_target",
    "parse_gateway_target",
    "resolve_config_dir",
]

DEFAULT_MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
"""config.toml larger than this is refused rather than read into memory."""

# Word for word what the Rust zeroclaw-acp-bridge prints, so that documentation and
# support answers written for it still match.
CONFIG_NOT_FOUND_MESSAGE: Final = (
    "ERROR: config.toml not found.  Are you sure the bridge and ZeroClaw are running on the "
    "same host?  Tool use will not work remotely!"
)


class GatewayTarget(msgspec.Struct, frozen=True):
    """The gateway the bridge connects to, as the daemon's ``[gateway]`` table describes it."""

    host: str = DEFAULT_GATEWAY_HOST
    port: int = DEFAULT_GATEWAY_PORT
    path_prefix: str = ""
    require_pairing: bool = True
    tls: bool = False

    @property
    def address(self) -> GatewayAddress:
        return GatewayAddress(self.host, self.port, self.path_prefix, self.tls)

    @property
    def ws_url(self) -> str:
        """``ws[s]://<host>:<port><prefix>/acp``."""
        return self.address.acp_url


def resolve_config_dir(flag: str | None, environ: Mapping[str, str], home: Path) -> Path:
    """Pick the config directory (order: ``acp_core.gateway_contract``)."""
    return gateway_contract.resolve_config_dir(
        flag,
        environ=environ,
        home=home,
        cwd=Path.cwd(),
        is_dir=Path.is_dir,
        platform_config_dir=_platform_config_dir,
    )


def _platform_config_dir() -> Path:
    # Imported here: only this branch needs it, and the bridge should start fast.
    import platformdirs

    return Path(platformdirs.user_config_dir(gateway_contract.APP_NAME))


def parse_gateway_target(text: str, *, source: str, address_needed: bool = True) -> GatewayTarget:
    """Read ``[gateway]`` from config.toml text; missing keys take the daemon's defaults.

    ``address_needed`` false (``--url`` names the gateway): the port is only checked
    the way the gateway checks it, so a config with ``port = 0`` still works with ``--url``.

    Raises:
        BridgeExit: (usage) the file is not TOML, a key has the wrong type, or a value
            breaks a rule of ``acp_core.gateway_contract`` (port 0 included).
    """
    text = text.removeprefix("\ufeff")  # editors on Windows like to add a BOM
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BridgeExit(ExitCode.USAGE, f"ERROR: {source} is not valid TOML: {exc}") from None
    gateway = document.get("gateway", {})
    if not isinstance(gateway, dict):
        raise BridgeExit(ExitCode.USAGE, f"ERROR: {source}: [gateway] must be a table")

    def wrong(key: str, expected: str) -> BridgeExit:
        return BridgeExit(
            ExitCode.USAGE,
            f"ERROR: {source}: [gateway].{key} must be {expected}, got {gateway[key]!r}",
        )

    def broken(key: str, problem: str) -> BridgeExit:
        return BridgeExit(ExitCode.USAGE, f"ERROR: {source}: [gateway].{key} {problem}")

    host = gateway.get("host", DEFAULT_GATEWAY_HOST)
    if not isinstance(host, str):
        raise wrong("host", "a string")

    port = gateway.get("port", DEFAULT_GATEWAY_PORT)
    if not isinstance(port, int) or isinstance(port, bool):
        raise wrong("port", "an integer between 1 and 65535")
    problem = port_problem(port, "connect" if address_needed else "listen")
    if problem is not None:
        raise broken("port", problem)

    prefix = gateway.get("path_prefix", "")
    if prefix is None:
        prefix = ""
    if not isinstance(prefix, str):
        raise wrong("path_prefix", "a string")
    problem = path_prefix_problem(prefix)
    if problem is not None:
        raise broken("path_prefix", problem)

    require_pairing = gateway.get("require_pairing", True)
    if not isinstance(require_pairing, bool):
        raise wrong("require_pairing", "true or false")

    tls_table: Any = gateway.get("tls", {})
    if not isinstance(tls_table, dict):
        raise wrong("tls", "a table")
    tls = tls_table.get("enabled", False)
    if not isinstance(tls, bool):
        raise BridgeExit(
            ExitCode.USAGE, f"ERROR: {source}: [gateway.tls].enabled must be true or false"
        )

    return GatewayTarget(
        host=normalize_host(host),
        port=port,
        path_prefix=normalize_path_prefix(prefix),
        require_pairing=require_pairing,
        tls=tls,
    )


def load_gateway_target(config_dir: Path, *, required: bool = True) -> GatewayTarget:
    """Read ``<config_dir>/config.toml``.

    Args:
        required: when False (``--url`` was given, so the address is known), a missing
            file means "daemon defaults" instead of an error.

    Raises:
        BridgeExit: connection code (1) with ``CONFIG_NOT_FOUND_MESSAGE`` when the file is
            missing and required; usage code (2) when it cannot be read.
    """
    path = config_dir / CONFIG_FILE_NAME
    try:
        with path.open("rb") as file:
            _refuse_if_others_can_write(path, os.fstat(file.fileno()))
            _refuse_if_others_can_write(config_dir, os.stat(config_dir))
            raw = file.read(DEFAULT_MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        if not required:
            return GatewayTarget()
        raise BridgeExit(
            ExitCode.CONNECTION,
            f"{CONFIG_NOT_FOUND_MESSAGE}\n"
            f"  (looked for {path}; point the bridge at the daemon's config with "
            f"--config-dir DIR or {CONFIG_DIR_ENV})",
        ) from None
    except OSError as exc:
        raise BridgeExit(ExitCode.USAGE, f"ERROR: cannot read {path}: {exc.strerror}") from None
    if len(raw) > DEFAULT_MAX_CONFIG_BYTES:
        raise BridgeExit(
            ExitCode.USAGE,
            f"ERROR: {path} is larger than {DEFAULT_MAX_CONFIG_BYTES} bytes; is it really "
            "the ZeroClaw config?",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BridgeExit(ExitCode.USAGE, f"ERROR: {path} is not UTF-8 (byte {exc.start})") from None
    return parse_gateway_target(text, source=str(path), address_needed=required)


def _refuse_if_others_can_write(path: Path, info: os.stat_result) -> None:
    """Raises BridgeExit (usage) when group or others may write ``path``: whoever can
    edit config.toml, or replace it in its directory, chooses where the token goes."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        what = "directory" if stat.S_ISDIR(info.st_mode) else "file"
        raise BridgeExit(
            ExitCode.USAGE,
            f"ERROR: refusing to read the config {what} {path}: it is writable by group or "
            f"others (mode {mode:04o}), and config.toml decides where the bridge sends its "
            f"token. Run `chmod go-w {path}`.",
        )


def add_agent_query(url: str, agent: str) -> str:
    """Append ``agent=<alias>`` (URL-encoded) to the query, keeping any existing one."""
    parts = urllib.parse.urlsplit(url)
    extra = urllib.parse.urlencode({AGENT_QUERY_PARAMETER: agent}, quote_via=urllib.parse.quote)
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urllib.parse.urlunsplit(parts._replace(query=query))


def check_ws_url(url: str) -> str:
    """Validate a ``--url``.

    Raises:
        BridgeExit: (usage) not a ``ws://`` or ``wss://`` URL with a host.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise BridgeExit(
            ExitCode.USAGE,
            f"ERROR: --url must be a ws:// or wss:// URL such as "
            f"ws://127.0.0.1:{DEFAULT_GATEWAY_PORT}/acp, got {url!r}",
        )
    try:
        _ = parts.port
    except ValueError:
        raise BridgeExit(ExitCode.USAGE, f"ERROR: --url has an invalid port: {url!r}") from None
    return url


def http_base_for(ws_url: str) -> str:
    """The gateway's HTTP base for a WebSocket URL: scheme ws→http, wss→https, the trailing
    ``/acp`` and any query removed (so ``/pair`` is found next to ``/acp``)."""
    parts = urllib.parse.urlsplit(ws_url)
    scheme = "https" if parts.scheme == "wss" else "http"
    path = parts.path.rstrip("/").removesuffix(ACP_PATH)
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, "", ""))
