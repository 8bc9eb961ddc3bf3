"""What ``zeroclaw gateway`` and ``zeroclaw-acp-bridge`` must agree on, in one place.

Pure: nothing here reads a file, the environment or the clock. Callers pass what is needed
(the environment mapping, the home and working directories, "does this directory exist",
the platform config directory) and get values or problems back.

Config directory (the ZeroClaw ACP documentation, "Running": the bridge reads the same config as the daemon), first
match wins:

1. the ``--config-dir`` flag; a blank value means "not given" on both sides;
2. ``$ZEROCLAW_CONFIG_DIR`` when it is not blank;
3. ``~/.zeroclaw`` when that directory exists (ZeroClaw's layout);
4. the platform's user config directory for ``zeroclaw`` (looked up by the caller).

A leading ``~`` or ``~/`` is the home directory; a relative path is taken from the working
directory.

The ``[gateway]`` table, as both sides read it:

* ``host``: surrounding whitespace and IPv6 brackets are dropped; blank means the default
  ``127.0.0.1``.
* ``port``: the gateway listens on 0-65535, where 0 lets the OS choose a free port; a
  bridge connects to 1-65535 only, and port 0 is refused with advice (it names no port a
  client could reach).
* ``path_prefix``: runs of ``/`` collapse, a missing leading ``/`` is added and a trailing
  one dropped, so ``"zc"``, ``"/zc/"`` and ``"//zc"`` are all ``/zc`` and ``"/"`` is no
  prefix; a prefix with whitespace, ``?``, ``#``, non-ASCII characters or ``.``/``..``
  segments is refused (a URL could not carry it unchanged).
* ``tls.enabled``: ``wss``/``https`` instead of ``ws``/``http``.

URLs are ``<scheme>://<host>:<port><prefix><path>`` with IPv6 literals in brackets and a
zone id's ``%`` escaped as ``%25`` (RFC 6874). The gateway serves ``/acp`` (the WebSocket),
``/health``, ``/pair/code``, ``/pair`` and the loopback-only ``/admin/paircode`` routes.

Tokens are ``zc_`` followed by 64 hex digits; a client sends one as
``Authorization: Bearer <token>`` (the gateway also accepts a ``bearer.<token>``
WebSocket subprotocol entry or ``?token=``), and an upgrade without a valid one is answered
401 with ``UNAUTHORIZED_BODY``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Final, Literal

import msgspec

CONFIG_DIR_ENV: Final = "ZEROCLAW_CONFIG_DIR"
CONFIG_FILE_NAME: Final = "config.toml"
LEGACY_CONFIG_DIR_NAME: Final = ".zeroclaw"
APP_NAME: Final = "zeroclaw"

DEFAULT_GATEWAY_HOST: Final = "127.0.0.1"
DEFAULT_GATEWAY_PORT: Final = 42617
MAX_PORT: Final = 65535

ACP_PATH: Final = "/acp"
HEALTH_PATH: Final = "/health"
PAIR_PATH: Final = "/pair"
PAIR_CODE_PATH: Final = "/pair/code"
ADMIN_PAIRCODE_PATH: Final = "/admin/paircode"
ADMIN_PAIRCODE_NEW_PATH: Final = "/admin/paircode/new"
ADMIN_PAIRCODE_ROTATE_PATH: Final = "/admin/paircode/rotate"
ADMIN_TOKENS_PATH: Final = "/admin/tokens"
ADMIN_TOKENS_CREATE_PATH: Final = "/admin/tokens/create"
PRINCIPAL_HEADER: Final = "X-ZeroClaw-Principal"
"""Sent with ``POST /pair``: the name of the principal the new token belongs to (the
bridge's ``--name``, by default the client's host name)."""
MAX_PRINCIPAL_CHARS: Final = 64

PAIRING_CODE_HEADER: Final = "X-Pairing-Code"
ADMIN_HEADER: Final = "X-ZeroClaw-Admin"
"""Carries the running gateway's admin secret: proof of being its operator."""
ADMIN_SECRET_FILE: Final = "gateway-admin.token"
"""Where, in the config directory, a running gateway keeps its admin secret (mode 0600)."""
MAX_ADMIN_SECRET_FILE_BYTES: Final = 1024
AUTHORIZATION_HEADER: Final = "Authorization"
BEARER_SCHEME: Final = "Bearer"
ACP_SUBPROTOCOL: Final = "zeroclaw.acp.v1"
BEARER_SUBPROTOCOL_PREFIX: Final = "bearer."
TOKEN_QUERY_PARAMETER: Final = "token"
AGENT_QUERY_PARAMETER: Final = "agent"

TOKEN_PREFIX: Final = "zc_"
TOKEN_RANDOM_BYTES: Final = 32
"""A token carries this many random bytes, written as twice as many hex digits."""
MAX_TOKEN_CHARS: Final = 512
"""A presented token longer than this is refused unhashed (ours are 67 characters)."""

# ZeroClaw's exact 401 body: it names the three ways a client can authenticate.
UNAUTHORIZED_BODY: Final = "Unauthorized - provide Authorization header, Sec-WebSocket-Protocol bearer, or ?token= query param"

PortRole = Literal["listen", "connect"]
"""``listen``: the gateway binding its port; ``connect``: a client dialling it."""


# ------------------------------------------------------------------ config directory


def expand_user_path(raw: str, *, home: Path, cwd: Path) -> Path:
    """``raw`` as an absolute path: ``~``/``~/…`` under ``home``, relative under ``cwd``."""
    text = raw.strip()
    if text == "~":
        path = home
    elif text.startswith("~/"):
        path = home / text[2:]
    else:
        path = Path(text)
    return path if path.is_absolute() else cwd / path


def resolve_config_dir(
    flag: str | PurePath | None,
    *,
    environ: Mapping[str, str],
    home: Path,
    cwd: Path,
    is_dir: Callable[[Path], bool],
    platform_config_dir: Callable[[], Path],
) -> Path:
    """The config directory (see the module docstring for the order)."""
    if flag is not None and str(flag).strip():
        return expand_user_path(str(flag), home=home, cwd=cwd)
    from_env = environ.get(CONFIG_DIR_ENV, "").strip()
    if from_env:
        return expand_user_path(from_env, home=home, cwd=cwd)
    legacy = home / LEGACY_CONFIG_DIR_NAME
    if is_dir(legacy):
        return legacy
    return platform_config_dir()


# ------------------------------------------------------------------ [gateway] values


def normalize_host(raw: str) -> str:
    """The bind/connect host: trimmed, IPv6 brackets dropped, blank → ``127.0.0.1``."""
    host = raw.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1].strip()
    return host or DEFAULT_GATEWAY_HOST


def port_problem(port: int, role: PortRole) -> str | None:
    """Why ``port`` cannot be used for ``role``, or None when it can."""
    if role == "listen":
        if 0 <= port <= MAX_PORT:
            return None
        return f"must be a TCP port (0-{MAX_PORT}; 0 lets the OS choose), got {port}"
    if port == 0:
        return (
            "is 0, which lets the gateway's OS choose a free port, so it names no port a "
            "client can connect to: set it to the port the gateway listens on, or pass "
            "--url with the address the gateway announced"
        )
    if 0 < port <= MAX_PORT:
        return None
    return f"must be an integer between 1 and {MAX_PORT}, got {port}"


def path_prefix_problem(raw: str) -> str | None:
    """Why ``raw`` cannot be a ``path_prefix``, or None when it can (see the module docstring)."""
    text = raw.strip()
    if not text.isascii():
        return f"must be ASCII (a URL path), got {raw!r}"
    if any(char.isspace() or not char.isprintable() for char in text):
        return f"must not contain whitespace or control characters, got {raw!r}"
    if "?" in text or "#" in text:
        return f"must be a path, without '?' or '#', got {raw!r}"
    if any(segment in (".", "..") for segment in text.split("/")):
        return f"must not contain '.' or '..' segments, got {raw!r}"
    return None


def normalize_path_prefix(raw: str) -> str:
    """``"zc"``, ``"/zc/"``, ``"//zc"`` → ``"/zc"``; ``""`` or ``"/"`` → ``""``.

    Call ``path_prefix_problem`` first: this does not check the characters.
    """
    segments = [segment for segment in raw.strip().split("/") if segment]
    return "/" + "/".join(segments) if segments else ""


# ------------------------------------------------------------------ URLs

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback_host(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1 (brackets allowed)."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """The host as a URL writes it: IPv6 literals in brackets, a zone id's ``%`` as ``%25``."""
    if ":" in host and not host.startswith("["):
        address, percent, zone = host.partition("%")
        return f"[{address}%25{zone}]" if percent else f"[{address}]"
    return host


class GatewayAddress(msgspec.Struct, frozen=True):
    """Where a gateway answers: the URL of any of its routes is built from this.

    ``host`` as ``normalize_host`` leaves it, ``path_prefix`` as ``normalize_path_prefix``
    leaves it.
    """

    host: str = DEFAULT_GATEWAY_HOST
    port: int = DEFAULT_GATEWAY_PORT
    path_prefix: str = ""
    tls: bool = False

    @property
    def authority(self) -> str:
        return f"{url_host(self.host)}:{self.port}"

    def url(self, path: str = "", *, websocket: bool = False) -> str:
        """``ws[s]://`` (``websocket``) or ``http[s]://`` ``<authority><prefix><path>``."""
        scheme = ("ws" if websocket else "http") + ("s" if self.tls else "")
        return f"{scheme}://{self.authority}{self.path_prefix}{path}"

    @property
    def acp_url(self) -> str:
        """The ACP WebSocket: ``ws[s]://<host>:<port><prefix>/acp``."""
        return self.url(ACP_PATH, websocket=True)


# ------------------------------------------------------------------ tokens


def format_token(random_hex: str) -> str:
    """A bearer token from ``TOKEN_RANDOM_BYTES`` random bytes written in hex."""
    return TOKEN_PREFIX + random_hex


def bearer_value(token: str) -> str:
    """The ``Authorization`` header value that presents ``token``."""
    return f"{BEARER_SCHEME} {token}"


def token_from_bearer(value: str) -> str | None:
    """The token in an ``Authorization`` value, or None when it is not a Bearer one.

    The scheme name is case-insensitive (RFC 9110 §11.1); the token is trimmed.
    """
    scheme, _, credentials = value.strip().partition(" ")
    token = credentials.strip()
    return token if scheme.lower() == BEARER_SCHEME.lower() and token else None


# ------------------------------------------------------------------ principals


_PRINCIPAL_PUNCTUATION: Final = frozenset("._-@+")


def principal_problem(name: str) -> str | None:
    """Why ``name`` cannot name a principal (None: it can): 1 to ``MAX_PRINCIPAL_CHARS``
    ASCII letters, digits and ``. _ - @ +``, starting with a letter or digit, so it is safe
    in a header, a log line, a URL query and a terminal table."""
    if not name:
        return "a principal's name cannot be empty"
    if len(name) > MAX_PRINCIPAL_CHARS:
        return f"a principal's name has at most {MAX_PRINCIPAL_CHARS} characters"
    if not (name[0].isascii() and name[0].isalnum()):
        return "a principal's name starts with a letter or a digit"
    if any(not (c.isascii() and (c.isalnum() or c in _PRINCIPAL_PUNCTUATION)) for c in name):
        return "a principal's name holds only letters, digits and . _ - @ +"
    return None


def default_principal(host_name: str) -> str:
    """The name a client pairs under when none is given: its host name's first label,
    reduced to the characters ``principal_problem`` accepts ("client" when none is left)."""
    label = host_name.strip().split(".", 1)[0]
    kept = "".join(c for c in label if c.isascii() and (c.isalnum() or c in "_-"))
    kept = kept.lstrip("_-")[:MAX_PRINCIPAL_CHARS]
    return kept or "client"
