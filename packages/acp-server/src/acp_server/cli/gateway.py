"""`zeroclaw gateway`, `gateway get-paircode`, `gateway tokens`, `gateway token create` and
`gateway revoke-token` (registered by acp_server.cli.main)."""

from __future__ import annotations

import json
import logging
import ssl
import sys
from collections.abc import Callable
from typing import Any, Final

import click
import httpx
import trio

from acp_core.gateway_contract import (
    ADMIN_PAIRCODE_NEW_PATH,
    ADMIN_PAIRCODE_PATH,
    ADMIN_PAIRCODE_ROTATE_PATH,
    ADMIN_TOKENS_CREATE_PATH,
    ADMIN_TOKENS_PATH,
    GatewayAddress,
    normalize_host,
    normalize_path_prefix,
)
from acp_server.app import open_app, shared_store_message
from acp_server.cli.main import (
    EXIT_CONFIG_ERROR,
    CliState,
    apply_log_format,
    fail,
    log_format_option,
)
from acp_server.cli.render import terminal_safe
from acp_server.cli.sessions import plain_table
from acp_server.config import Config
from acp_server.config.observability import parse_listen_address
from acp_server.gateway.admin import ADMIN_HEADER, ADMIN_SECRET_FILE, read_admin_secret
from acp_server.gateway.auth import is_loopback_host
from acp_server.gateway.pending import DEFAULT_MAX_PENDING_CONNECTIONS, raise_open_file_limit
from acp_server.gateway.revoke import (
    ADMIN_TOKENS_REVOKE_PATH,
    ALL_PARAMETER,
    NAME_PARAMETER,
    SELECTOR_PARAMETER,
)
from acp_server.gateway.service import (
    DEFAULT_DRAIN_TIMEOUT_SECS,
    DEFAULT_MAX_CONNECTIONS,
    Gateway,
    GatewayError,
)
from acp_server.observability.logs import LogFormat
from acp_server.security.sandbox.posture import log_startup_posture
from acp_server.storage import StoreUnavailable

ADMIN_TIMEOUT_SECS: Final = 5.0
FILES_IN_RESERVE: Final = 256
"""Descriptors besides connections: the store, logs, providers' HTTP pools, shell tools."""


def _announce(line: str) -> None:
    click.echo(f"zeroclaw: {line}", err=True)
    sys.stderr.flush()


def _log_announce(line: str) -> None:
    # With --log-format json every stderr line is a JSON object, these too.
    announce_logger.warning("%s", line)


announce_logger = logging.getLogger("acp_server.gateway")


async def _run(
    config: Config,
    host: str | None,
    port: int | None,
    drain_timeout: float,
    metrics_listen: tuple[str, int] | None,
    announce: Callable[[str], None],
) -> None:
    raise_open_file_limit(
        DEFAULT_MAX_CONNECTIONS + DEFAULT_MAX_PENDING_CONNECTIONS + FILES_IN_RESERVE
    )
    async with open_app(config) as app:
        gateway = Gateway(
            app,
            host=host,
            port=port,
            drain_timeout_secs=drain_timeout,
            metrics_listen=metrics_listen,
            announce=announce,
            # A terminal is the operator's; a redirected stderr (a log file, the journal)
            # may be read by others, the agent's own commands included.
            show_pairing_code=sys.stderr.isatty(),
        )
        await gateway.serve()


@click.group(
    "gateway",
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--host",
    default=None,
    metavar="HOST",
    help="Address to bind (default: [gateway] host, 127.0.0.1).",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    metavar="PORT",
    help="Port to listen on (default: [gateway] port, 42617; 0 lets the OS choose and the "
    "chosen port is printed).",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_DRAIN_TIMEOUT_SECS,
    show_default=True,
    metavar="SECS",
    help="On SIGTERM/SIGINT, how long running turns may take to finish before they are cancelled.",
)
@click.option(
    "--metrics-listen",
    default=None,
    metavar="HOST:PORT",
    help="Also serve GET /metrics (Prometheus) on this address, without the admin secret the "
    "main port asks for (overrides [gateway] metrics_listen; [::1]:9464 for IPv6).",
)
@log_format_option
@click.pass_context
def gateway_command(
    ctx: click.Context,
    host: str | None,
    port: int | None,
    drain_timeout: float,
    metrics_listen: str | None,
    log_format: LogFormat | None,
) -> None:
    """Serve ACP over WebSocket at /acp, with pairing and token auth.

    Plain HTTP on the same port: GET /health, GET /pair/code, POST /pair, GET /metrics
    (Prometheus; with the admin secret, or on --metrics-listen without it). Clients send a
    bearer token as `Authorization: Bearer`, a `bearer.<token>` WebSocket subprotocol, or
    `?token=`; `?agent=ALIAS` picks the default agent for session/new. With pairing on and
    no client paired yet, a one-time pairing code is issued: printed on stderr when it is a
    terminal, else shown by `zeroclaw gateway get-paircode`.

    SIGTERM or Ctrl-C drains: no new connections, running turns get --drain-timeout to
    finish, then connections close with code 1012 ("restarting, retry"). A second signal
    stops at once.
    """
    if ctx.invoked_subcommand is not None:
        return
    state = ctx.find_object(CliState)
    if state is None:  # invoked outside the zeroclaw group (tests)
        state = CliState(config_dir_flag=None)
    metrics_address = None
    if metrics_listen is not None:
        try:
            metrics_address = parse_listen_address(metrics_listen)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--metrics-listen") from None
    apply_log_format(log_format)
    config = state.load(runs_agents=True)
    apply_log_format(log_format, config)
    announce = _log_announce if (log_format or config.log_format) == "json" else _announce
    log_startup_posture(config, None)
    try:
        trio.run(_run, config, host, port, drain_timeout, metrics_address, announce)
    except GatewayError as exc:
        fail(str(exc), code=EXIT_CONFIG_ERROR if exc.config_problem else 1)
    except StoreUnavailable as exc:  # only a shared store ([storage] url) stops the start
        fail(shared_store_message(exc))
    except KeyboardInterrupt:
        sys.exit(130)


def _admin_base_url(
    config: Config, host: str | None, port: int | None
) -> tuple[str, ssl.SSLContext | bool]:
    settings = config.gateway
    bind_host = normalize_host(host or settings.host)
    # The admin endpoint answers loopback peers only: reach a wildcard bind through 127.0.0.1.
    if bind_host in {"0.0.0.0", "::"} or is_loopback_host(bind_host):
        bind_host = "::1" if bind_host in {"::", "::1"} else "127.0.0.1"
    verify: ssl.SSLContext | bool = True
    if settings.tls.enabled:
        # Trust exactly the gateway's own certificate; the name will not match 127.0.0.1.
        context = ssl.create_default_context()
        context.check_hostname = False
        if settings.tls.cert_path is not None:
            context.load_verify_locations(cafile=str(settings.tls.cert_path))
        verify = context
    address = GatewayAddress(
        host=bind_host,
        port=settings.port if port is None else port,
        path_prefix=normalize_path_prefix(settings.path_prefix),
        tls=settings.tls.enabled,
    )
    return address.url(), verify


_admin_host_option = click.option(
    "--host", default=None, metavar="HOST", help="The gateway's bind address if not [gateway] host."
)
_admin_port_option = click.option(
    "--port",
    type=click.IntRange(min=1, max=65535),
    default=None,
    metavar="PORT",
    help="The gateway's port if not [gateway] port.",
)


@gateway_command.command("get-paircode")
@click.option(
    "--new",
    "new_code",
    is_flag=True,
    help="Issue a fresh one-time code (replaces any active one and lifts a lockout).",
)
@click.option(
    "--rotate",
    is_flag=True,
    help="Revoke every paired token first (connected clients are disconnected), then issue a fresh code.",
)
@_admin_host_option
@_admin_port_option
@click.pass_context
def get_paircode_command(
    ctx: click.Context, new_code: bool, rotate: bool, host: str | None, port: int | None
) -> None:
    """Print a pairing code from the running gateway on this machine.

    The code goes to stdout; pair a client with it (`zeroclaw-acp-bridge --pair-code CODE`,
    or POST /pair with header X-Pairing-Code). Without --new, prints the active code, if any.
    A code from --new or --rotate is shown only here (GET /pair/code never hands it out).
    """
    state = ctx.find_object(CliState) or CliState(config_dir_flag=None)
    config = state.load()
    if rotate:
        method, path = "POST", ADMIN_PAIRCODE_ROTATE_PATH
    elif new_code:
        method, path = "POST", ADMIN_PAIRCODE_NEW_PATH
    else:
        method, path = "GET", ADMIN_PAIRCODE_PATH
    body = _admin_call(config, host, port, method, path)
    code = body.get("pairing_code")
    if not body.get("pairing_required", True):
        fail("pairing is off on this gateway ([gateway] require_pairing = false): no code needed")
    if rotate:
        click.echo(
            f"zeroclaw: revoked {body.get('revoked_tokens', 0)} token(s); clients must pair again",
            err=True,
        )
    if not code:
        paired = body.get("paired_tokens", 0)
        fail(
            f"no pairing code is active (the gateway has {paired} paired token(s)). "
            "Run `zeroclaw gateway get-paircode --new` to issue one."
        )
    click.echo(str(code))
    click.echo(
        f"zeroclaw: one-time code; pair with `zeroclaw-acp-bridge --pair-code {code}`", err=True
    )


@gateway_command.command("revoke-token")
@click.argument("token", required=False, metavar="TOKEN|DIGEST_PREFIX")
@click.option("--name", "principal", help="Revoke every live token of this principal.")
@click.option("--all", "revoke_all", is_flag=True, help="Revoke every paired token.")
@_admin_host_option
@_admin_port_option
@click.pass_context
def revoke_token_command(
    ctx: click.Context,
    token: str | None,
    principal: str | None,
    revoke_all: bool,
    host: str | None,
    port: int | None,
) -> None:
    """Revoke one paired token, a principal's (--name), or --all, through the running
    gateway on this machine.

    Name the token itself (zc_...), at least 8 hex digits of its digest as
    `zeroclaw gateway tokens` or [gateway] paired_tokens lists it, or its principal with
    --name. Its clients are disconnected (close code 1008) and must pair again; the pairing
    code is left as it is. With a shared PostgreSQL store ([storage] url) every replica
    refuses the token and disconnects its clients.
    """
    if sum((token is not None, principal is not None, revoke_all)) != 1:
        fail("give one TOKEN or digest prefix, --name NAME, or --all", code=EXIT_CONFIG_ERROR)
    state = ctx.find_object(CliState) or CliState(config_dir_flag=None)
    config = state.load()
    if revoke_all:
        params = {ALL_PARAMETER: "1"}
    elif principal is not None:
        params = {NAME_PARAMETER: principal}
    else:
        params = {SELECTOR_PARAMETER: token or ""}
    body = _admin_call(config, host, port, "POST", ADMIN_TOKENS_REVOKE_PATH, params)
    revoked = body.get("revoked") or []
    click.echo(
        f"zeroclaw: revoked {body.get('revoked_tokens', 0)} token(s)"
        + (f" ({', '.join(map(str, revoked))})" if revoked else "")
        + (f"; {body['message']}" if body.get("message") else ""),
        err=True,
    )


@gateway_command.command("tokens")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@_admin_host_option
@_admin_port_option
@click.pass_context
def tokens_command(ctx: click.Context, as_json: bool, host: str | None, port: int | None) -> None:
    """List the paired tokens of the running gateway on this machine: the principal each
    belongs to, its digest prefix, when it was paired and last used (written at most once
    a minute), its open connections (on this replica) and whether it was revoked."""
    state = ctx.find_object(CliState) or CliState(config_dir_flag=None)
    body = _admin_call(state.load(), host, port, "GET", ADMIN_TOKENS_PATH)
    tokens = body.get("tokens") or []
    if as_json:
        click.echo(json.dumps(tokens, indent=2))
        return
    click.echo(tokens_table(tokens))


def tokens_table(tokens: list[dict[str, Any]]) -> str:
    """``zeroclaw gateway tokens``'s table: one line per token, live ones first."""
    header = ("NAME", "PREFIX", "CREATED", "LAST USED", "CONNS", "REVOKED")
    rows = [
        (
            str(token.get("name")),
            str(token.get("prefix")),
            _short_time(token.get("created")),
            _short_time(token.get("last_used")),
            str(token.get("connections", 0)),
            _short_time(token.get("revoked")) if token.get("revoked") else "no",
        )
        for token in tokens
    ]
    return terminal_safe(plain_table(header, rows))


def _short_time(value: object) -> str:
    """An ISO 8601 UTC time to the minute (``-`` for none)."""
    if not isinstance(value, str) or not value:
        return "-"
    return value[:16].replace("T", " ")


@gateway_command.group("token")
def token_group() -> None:
    """Manage the gateway's tokens (see also `tokens` and `revoke-token`)."""


@token_group.command("create")
@click.option("--name", "principal", required=True, help="The principal the token belongs to.")
@_admin_host_option
@_admin_port_option
@click.pass_context
def token_create_command(
    ctx: click.Context, principal: str, host: str | None, port: int | None
) -> None:
    """Create a token for a principal (a CI runner, a bot) without a pairing code.

    The token goes to stdout, once; it is stored only as its digest. Give it to the client
    as ZEROCLAW_ACP_BRIDGE_TOKEN, or in its bridge's token file (acp-bridge-token, mode 0600).
    """
    state = ctx.find_object(CliState) or CliState(config_dir_flag=None)
    body = _admin_call(
        state.load(), host, port, "POST", ADMIN_TOKENS_CREATE_PATH, {NAME_PARAMETER: principal}
    )
    click.echo(str(body.get("token")))
    click.echo(
        f"zeroclaw: token for {body.get('principal')} (prefix {body.get('prefix')}); "
        + str(body.get("message", "")),
        err=True,
    )


def _admin_call(
    config: Config,
    host: str | None,
    port: int | None,
    method: str,
    path: str,
    params: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One call to the running gateway's admin routes; its JSON body (fails on refusal)."""
    base, verify = _admin_base_url(config, host, port)
    url = base + path
    secret = read_admin_secret(config.config_dir)
    if secret is None:
        fail(
            f"no running gateway found for {config.config_dir} (no {ADMIN_SECRET_FILE} there). "
            "Start `zeroclaw gateway` with the same --config-dir, or pass the same one here."
        )
    try:
        # trust_env=False: a loopback call must never be sent through a proxy.
        response = httpx.request(
            method,
            url,
            headers={ADMIN_HEADER: secret},
            params=params,
            timeout=ADMIN_TIMEOUT_SECS,
            verify=verify,
            trust_env=False,
        )
    except httpx.HTTPError as exc:
        fail(
            f"cannot reach the gateway at {base}: {exc}. Is `zeroclaw gateway` running on this "
            "machine? (use --port if it listens on another port)"
        )
    body: dict[str, Any] = {}
    try:
        parsed = response.json()
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    if response.status_code != 200:
        detail = body.get("error") or response.text.strip() or f"HTTP {response.status_code}"
        fail(f"the gateway at {base} refused: {detail}")
    return body
