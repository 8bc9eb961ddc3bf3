"""The bearer token: where it comes from, how it is cached, and pairing.

Only when the gateway requires pairing (``[gateway].require_pairing``, default true) is a
token looked for; first match wins (the order docs/bridge.md documents):

1. ``ZEROCLAW_ACP_BRIDGE_TOKEN`` (trimmed, non-empty);
2. the cached file ``<config_dir>/acp-bridge-token``, refused when group or others can read it;
3. a pairing exchange: the code comes from ``--pair-code``, else ``ZEROCLAW_ACP_PAIRING_CODE``,
   else ``GET <base>/pair/code``: a fresh gateway hands its one-time code to its operator
   there, and a bridge on the gateway's machine proves it is the operator by sending the
   admin secret the gateway keeps in the config directory (``gateway-admin.token``, sent
   only to a loopback gateway); then ``POST <base>/pair`` with ``X-Pairing-Code`` returns
   the token, cached with mode 0600;
4. none: ``NO_TOKEN_MESSAGE``, telling the user how to pair.

The token only ever travels as ``Authorization: Bearer`` and is never logged: the log
handlers redact it (``cli._RedactingFormatter``), and ``Credentials`` hides it from repr.

HTTP here is two tiny requests, so it uses the standard library's ``http.client`` in a worker
thread rather than a client library: nothing to install, and only imported when pairing.
"""

from __future__ import annotations

import enum
import fcntl
import json
import logging
import os
import socket
import stat
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from acp_bridge.errors import BridgeExit, ExitCode, describe_error
from acp_core.gateway_contract import (
    ADMIN_HEADER,
    ADMIN_SECRET_FILE,
    AUTHORIZATION_HEADER,
    MAX_ADMIN_SECRET_FILE_BYTES,
    PAIR_CODE_PATH,
    PAIR_PATH,
    PAIRING_CODE_HEADER,
    PRINCIPAL_HEADER,
    bearer_value,
    default_principal,
    is_loopback_host,
)

if TYPE_CHECKING:
    import http.client

logger = logging.getLogger(__name__)

TOKEN_ENV: Final = "ZEROCLAW_ACP_BRIDGE_TOKEN"
PAIRING_CODE_ENV: Final = "ZEROCLAW_ACP_PAIRING_CODE"
TOKEN_FILE_NAME: Final = "acp-bridge-token"
DEFAULT_MAX_TOKEN_FILE_BYTES: Final = 4096
DEFAULT_MAX_HTTP_BODY_BYTES: Final = 64 * 1024
DEFAULT_HTTP_TIMEOUT_SECS: Final = 10.0
DEFAULT_PAIRING_LOCK_WAIT_SECS: Final = 2 * DEFAULT_HTTP_TIMEOUT_SECS + 5.0
"""Longest wait for another bridge's pairing (its two HTTP requests) before pairing anyway."""
PAIRING_LOCK_POLL_SECS: Final = 0.02

# Word for word what the Rust zeroclaw-acp-bridge prints: users search for this text.
NO_TOKEN_MESSAGE: Final = (
    "ERROR: Gateway pairing is active but no ACP bridge token is cached. Run "
    "`zeroclaw gateway get-paircode --new`, then run `zeroclaw-acp-bridge --pair-code <code>`, "
    "or set ZEROCLAW_ACP_BRIDGE_TOKEN."
)


class TokenSource(enum.Enum):
    NOT_REQUIRED = "pairing not required"
    ENV = f"${TOKEN_ENV}"
    FILE = "cached token file"
    PAIRING = "pairing exchange"


@dataclass(frozen=True, slots=True)
class Credentials:
    source: TokenSource
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {AUTHORIZATION_HEADER: bearer_value(self.token)} if self.token else {}

    def describe(self) -> str:
        """Where the token came from, for messages (never the token itself)."""
        if self.source is TokenSource.FILE:
            return f"the cached token file {self.token_file}"
        if self.source is TokenSource.PAIRING:
            return f"a fresh pairing exchange (cached in {self.token_file})"
        return str(self.source.value)

    def rejected_advice(self, *, revoked: bool = False) -> str:
        """What to do when the gateway answers 401 to these credentials, or (``revoked``)
        closes a live connection with 1008 because their token was revoked meanwhile."""
        repair = (
            "run `zeroclaw gateway get-paircode --new` on the gateway host, then "
            "`zeroclaw-acp-bridge --pair-code <code>`"
        )
        if self.source is TokenSource.ENV:
            return (
                f"The token in {TOKEN_ENV} was rejected (revoked, or for another gateway). "
                f"Fix or unset {TOKEN_ENV}; to pair again: {repair}."
            )
        # A token paired during this run was cached too: once revoked, the cache is stale.
        if self.source is TokenSource.FILE or (revoked and self.source is TokenSource.PAIRING):
            return (
                f"The token cached in {self.token_file} was rejected (revoked, or for another "
                f"gateway). Delete that file, then: {repair}."
            )
        if self.source is TokenSource.PAIRING:
            return (
                "The gateway rejected the token it just issued; is another gateway answering "
                "on this address?"
            )
        return (
            "The gateway requires a token but [gateway].require_pairing is false in the "
            "bridge's config.toml: check that --config-dir points at the daemon's config, "
            f"or set {TOKEN_ENV}."
        )


def token_file_path(config_dir: Path) -> Path:
    return config_dir / TOKEN_FILE_NAME


def token_from_env(environ: Mapping[str, str]) -> str | None:
    token = environ.get(TOKEN_ENV, "").strip()
    return token or None


def read_token_file(path: Path) -> str | None:
    """The cached token, or None when there is no (non-empty) file.

    Raises:
        BridgeExit: (usage) the file is readable by group or others, or unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BridgeExit(
            ExitCode.USAGE, f"ERROR: cannot read the cached token {path}: {exc.strerror}"
        ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise BridgeExit(
            ExitCode.USAGE, f"ERROR: {path} is not a regular file; remove it and pair again"
        )
    with os.fdopen(fd, "rb") as file:
        if info.st_mode & 0o077:
            # Like ssh with a private key: a secret others can read is treated as leaked.
            raise BridgeExit(
                ExitCode.USAGE,
                f"ERROR: refusing to use the cached token {path}: it is readable by group or "
                f"others (mode {stat.S_IMODE(info.st_mode):04o}). Run `chmod 600 {path}` "
                "(and consider pairing again if others may have read it).",
            )
        raw = file.read(DEFAULT_MAX_TOKEN_FILE_BYTES + 1)
    if len(raw) > DEFAULT_MAX_TOKEN_FILE_BYTES:
        raise BridgeExit(
            ExitCode.USAGE,
            f"ERROR: {path} is larger than {DEFAULT_MAX_TOKEN_FILE_BYTES} bytes; it is not a "
            "token. Delete it and pair again.",
        )
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BridgeExit(
            ExitCode.USAGE, f"ERROR: {path} is not text; delete it and pair again."
        ) from None
    return token or None


def write_token_file(path: Path, token: str) -> None:
    """Cache the token atomically with mode 0600 (a reader never sees a partial file)."""
    import tempfile

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp creates the file with mode 0600 in the same directory, so os.replace is atomic
    # and the token is never on disk with wider permissions, not even for a moment.
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{TOKEN_FILE_NAME}.")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(f"{token}\n".encode())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


async def resolve_credentials(
    *,
    require_pairing: bool,
    config_dir: Path,
    http_base: str,
    pair_code: str | None,
    environ: Mapping[str, str],
    principal: str | None = None,
) -> Credentials:
    """Find the token to send (see the module docstring for the order). A pairing asks for
    a token of ``principal`` (default: this host's name).

    Raises:
        BridgeExit: no token can be had, the cached file is unsafe, or pairing failed.
    """
    if not require_pairing:
        if token_from_env(environ):
            logger.info("ignoring %s: the gateway does not require pairing", TOKEN_ENV)
        return Credentials(TokenSource.NOT_REQUIRED)
    path = token_file_path(config_dir)
    token = token_from_env(environ)
    if token:
        _warn_unused_pair_code(pair_code, TokenSource.ENV.value)
        return Credentials(TokenSource.ENV, token)
    token = read_token_file(path)
    if token:
        _warn_unused_pair_code(pair_code, f"{path} (delete it to pair again)")
        return Credentials(TokenSource.FILE, token, token_file=path)

    # Editors often start several bridges at once (one per window); only one of them can
    # use the one-time code. Pair one at a time; whoever comes second finds the token the
    # first one cached instead of failing with "code already used".
    lock = await _lock_for_pairing(config_dir)
    try:
        token = read_token_file(path)
        if token:
            logger.info("another bridge paired meanwhile; using the token it cached")
            _warn_unused_pair_code(pair_code, f"{path} (delete it to pair again)")
            return Credentials(TokenSource.FILE, token, token_file=path)
        return await _pair_now(config_dir, http_base, pair_code, environ, principal)
    finally:
        if lock is not None:
            os.close(lock)  # releases the flock


async def _lock_for_pairing(config_dir: Path) -> int | None:
    """An exclusive flock on the config directory (no lock file to leave behind), or None
    when it cannot be had: a missing or unlockable directory, or DEFAULT_PAIRING_LOCK_WAIT_SECS
    spent waiting. Pairing then simply goes ahead unserialized."""
    try:
        fd = os.open(config_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    with trio.move_on_after(DEFAULT_PAIRING_LOCK_WAIT_SECS):
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # Another bridge is pairing: a few HTTP round trips on its side.
                await trio.sleep(PAIRING_LOCK_POLL_SECS)
            except OSError:
                break
            else:
                return fd
    os.close(fd)
    return None


async def _pair_now(
    config_dir: Path,
    http_base: str,
    pair_code: str | None,
    environ: Mapping[str, str],
    principal: str | None,
) -> Credentials:
    path = token_file_path(config_dir)
    code: str | None = (pair_code or environ.get(PAIRING_CODE_ENV, "")).strip()
    if not code:
        logger.info("no token cached; asking %s%s for a pairing code", http_base, PAIR_CODE_PATH)
        # The local gateway's admin secret proves we are its operator; it is never sent to
        # another machine (a remote gateway's operator hands out the code).
        host = urllib.parse.urlsplit(http_base).hostname or ""
        secret = read_gateway_admin_secret(config_dir) if is_loopback_host(host) else None
        status = await trio.to_thread.run_sync(
            fetch_pairing_code, http_base, secret, abandon_on_cancel=True
        )
        if status.required is False:
            # Typically --url without a local config.toml: the gateway itself says no token
            # is needed, so none is sent (a 401 would still be reported as such).
            logger.info("the gateway at %s does not require pairing", http_base)
            return Credentials(TokenSource.NOT_REQUIRED)
        code = status.code
    if not code:
        raise BridgeExit(ExitCode.USAGE, NO_TOKEN_MESSAGE)
    name = principal or default_principal(socket.gethostname())
    token = await trio.to_thread.run_sync(pair, http_base, code, name, abandon_on_cancel=True)
    await trio.to_thread.run_sync(write_token_file, path, token)
    logger.info("paired with %s as %s; token cached in %s", http_base, name, path)
    return Credentials(TokenSource.PAIRING, token, token_file=path)


def _warn_unused_pair_code(pair_code: str | None, used: str) -> None:
    if pair_code:
        logger.warning("--pair-code ignored: using the token from %s", used)


@dataclass(frozen=True, slots=True)
class PairingStatus:
    """What ``GET /pair/code`` said: whether pairing is required (None: unknown) and the
    one-time code, which the gateway shows only while no client has paired."""

    required: bool | None = None
    code: str | None = field(default=None, repr=False)


def read_gateway_admin_secret(config_dir: Path) -> str | None:
    """The admin secret a gateway running with ``config_dir`` keeps there, or None when
    there is none or it cannot be read (not the operator, or no gateway running)."""
    try:
        fd = os.open(config_dir / ADMIN_SECRET_FILE, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        raw = file.read(MAX_ADMIN_SECRET_FILE_BYTES)
    secret = raw.decode("ascii", errors="replace").strip()
    return secret or None


def fetch_pairing_code(http_base: str, admin_secret: str | None = None) -> PairingStatus:
    """``GET <base>/pair/code``, with the gateway's admin secret when we have it."""
    url = f"{http_base}{PAIR_CODE_PATH}"
    status, body = _http_request("GET", url, {ADMIN_HEADER: admin_secret} if admin_secret else {})
    if not 200 <= status < 300:
        logger.info("%s answered HTTP %d; no pairing code available", url, status)
        return PairingStatus()
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        logger.warning("%s did not answer a JSON object; no pairing code available", url)
        return PairingStatus()
    required = payload.get("pairing_required")
    code = payload.get("pairing_code")
    return PairingStatus(
        required=required if isinstance(required, bool) else None,
        code=str(code).strip() or None
        if isinstance(code, int | str) and not isinstance(code, bool)
        else None,
    )


def pair(http_base: str, code: str, principal: str | None = None) -> str:
    """``POST <base>/pair`` with the code (and the principal's name, when given); returns
    the token.

    Raises:
        BridgeExit: (auth) the code was refused or rate-limited; (connection) anything else.
    """
    url = f"{http_base}{PAIR_PATH}"
    headers = {PAIRING_CODE_HEADER: code, "Content-Length": "0"}
    if principal:
        headers[PRINCIPAL_HEADER] = principal
    status, body = _http_request("POST", url, headers)
    detail = _error_detail(body)
    if status == 409:
        raise BridgeExit(
            ExitCode.AUTH,
            f"ERROR: failed to pair ACP bridge at {url}: gateway returned 409{detail}. "
            "Pair under another name with --name NAME (the code is still valid).",
        )
    if status in (401, 403):
        raise BridgeExit(
            ExitCode.AUTH,
            f"ERROR: failed to pair ACP bridge at {url}: gateway returned {status}{detail}. "
            "The pairing code is wrong or was already used: run `zeroclaw gateway "
            "get-paircode --new` and try again with the new code.",
        )
    if status == 429:
        raise BridgeExit(
            ExitCode.AUTH,
            f"ERROR: failed to pair ACP bridge at {url}: gateway returned 429{detail}. Too "
            "many pairing attempts; wait and try again.",
        )
    if not 200 <= status < 300:
        raise BridgeExit(
            ExitCode.CONNECTION,
            f"ERROR: failed to pair ACP bridge at {url}: gateway returned {status}{detail}",
        )
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    token = payload.get("token") if isinstance(payload, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise BridgeExit(
            ExitCode.CONNECTION,
            f"ERROR: failed to pair ACP bridge at {url}: the gateway's answer has no token",
        )
    return token.strip()


def _error_detail(body: bytes) -> str:
    try:
        payload = json.loads(body)
    except ValueError:
        return ""
    if isinstance(payload, dict):
        error = payload.get("error")
        retry = payload.get("retry_after")
        parts = [str(error)] if isinstance(error, str) and error else []
        if isinstance(retry, int | float) and not isinstance(retry, bool):
            parts.append(f"retry after {retry:g} s")
        if parts:
            return f" ({'; '.join(parts)})"
    return ""


def _http_request(method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """One blocking HTTP/1.1 request (run it in a thread); returns status and a bounded body.

    Raises:
        BridgeExit: (connection) the gateway could not be reached.
    """
    import http.client

    parts = urllib.parse.urlsplit(url)
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname or "", parts.port, timeout=DEFAULT_HTTP_TIMEOUT_SECS
        )
    else:
        connection = http.client.HTTPConnection(
            parts.hostname or "", parts.port, timeout=DEFAULT_HTTP_TIMEOUT_SECS
        )
    try:
        connection.request(method, parts.path or "/", headers=headers)
        response = connection.getresponse()
        body = response.read(DEFAULT_MAX_HTTP_BODY_BYTES)
        return response.status, body
    except (OSError, http.client.HTTPException) as exc:
        raise BridgeExit(
            ExitCode.CONNECTION,
            f"ERROR: failed to connect to {url} for pairing: {describe_error(exc)}. "
            "Is `zeroclaw gateway` running there?",
        ) from None
    finally:
        connection.close()
