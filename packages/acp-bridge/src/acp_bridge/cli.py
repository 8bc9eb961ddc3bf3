"""The ``zeroclaw-acp-bridge`` command line.

argparse rather than click: it is in the standard library, so the bridge has one dependency
fewer and starts faster, which matters for a process an IDE spawns for every agent session;
and the bridge has a single command with a handful of flags.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Final, NoReturn

import trio

from acp_bridge import __version__
from acp_bridge.auth import PAIRING_CODE_ENV, TOKEN_ENV, TOKEN_FILE_NAME, resolve_credentials
from acp_bridge.config import (
    CONFIG_DIR_ENV,
    DEFAULT_GATEWAY_PORT,
    add_agent_query,
    check_ws_url,
    http_base_for,
    load_gateway_target,
    resolve_config_dir,
)
from acp_bridge.errors import BridgeExit, ExitCode
from acp_bridge.gateway import (
    DEFAULT_CLOSE_TIMEOUT_SECS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_OPEN_TIMEOUT_SECS,
    DEFAULT_PING_INTERVAL_SECS,
    DEFAULT_PING_TIMEOUT_SECS,
    ConnectOptions,
    open_gateway,
)
from acp_bridge.relay import (
    DEFAULT_EOF_GRACE_SECS,
    DEFAULT_RECONNECT_MAX_SECS,
    RelayOptions,
    relay,
)
from acp_bridge.stdio import open_stdin, open_stdout
from acp_core.gateway_contract import principal_problem

logger = logging.getLogger("acp_bridge")

PROG: Final = "zeroclaw-acp-bridge"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
DEFAULT_LOG_LEVEL: Final = "warning"
REDACTED: Final = "<redacted>"

# What a flag given without its value says (the same words as the Rust zeroclaw-acp-bridge).
_MISSING_VALUE_MESSAGES: Final = {
    "--config-dir": "--config-dir requires a path value",
    "--pair-code": "--pair-code requires a code value",
}

DESCRIPTION: Final = f"""\
Relay the Agent Client Protocol between an IDE (stdio, one JSON-RPC message per line)
and a ZeroClaw gateway (WebSocket at /acp). Configure your IDE to start this command as
its agent; it behaves like a local `zeroclaw acp`, served by the daemon.

The gateway address comes from the daemon's config.toml ([gateway] host, port,
path_prefix, tls.enabled): ws[s]://<host>:<port><path_prefix>/acp, default port
{DEFAULT_GATEWAY_PORT}. The config directory is --config-dir, else ${CONFIG_DIR_ENV},
else ~/.zeroclaw when it exists, else the platform's user config directory.
"""

EPILOG: Final = f"""\
authentication (only when [gateway].require_pairing is true, the default):
  the bearer token is taken from ${TOKEN_ENV}, else the cached file
  <config-dir>/{TOKEN_FILE_NAME} (must be mode 0600), else by pairing: the code
  comes from --pair-code, ${PAIRING_CODE_ENV} or the gateway's /pair/code, and
  the token it yields is cached. To pair: run `zeroclaw gateway get-paircode --new`
  on the gateway host, then `{PROG} --pair-code <code>`.

exit status:
  0  normal end (stdin closed, replies delivered)
  1  could not connect, or the connection was lost and could not be
     re-established (also: config.toml not found)
  2  usage or configuration error, or no token available
  3  the gateway rejected the credentials (HTTP 401, also on reconnect),
     the pairing code, or the connection (close code 1008)

When the connection drops (gateway restart, network), the bridge reconnects with the same
token, resumes every session it saw, and holds the IDE's messages meanwhile; a request
that was in flight (such as a running prompt) is answered with an error saying so.

Run `{PROG} --check` first to test the address, the token and the agent.
"""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        for flag, wording in _MISSING_VALUE_MESSAGES.items():
            named = message.startswith((f"argument {flag}:", f"argument {flag}/"))
            if named and "expected one argument" in message:
                message = wording
        self.print_usage(sys.stderr)
        self.exit(int(ExitCode.USAGE), f"{self.prog}: error: {message}\n")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    if text.strip() == "0":
        return 0.0
    return _positive_float(text)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_argument_group("where the gateway is")
    where.add_argument(
        "--config-dir",
        metavar="DIR",
        help="the daemon's config directory (holds config.toml and the cached token)",
    )
    where.add_argument(
        "--url",
        metavar="URL",
        help="connect to this ws:// or wss:// URL instead of the one built from config.toml "
        "(config.toml is then optional)",
    )
    where.add_argument(
        "--agent",
        metavar="ALIAS",
        help="default agent for session/new on this connection (adds ?agent=ALIAS)",
    )
    auth = parser.add_argument_group("authentication")
    auth.add_argument(
        "--pair-code",
        "--pair",
        dest="pair_code",
        metavar="CODE",
        help="pair with this one-time code (from `zeroclaw gateway get-paircode --new`) "
        "when no token is available; the token is cached for next time",
    )
    auth.add_argument(
        "--name",
        metavar="NAME",
        help="when pairing: the principal the token belongs to (your sessions are that "
        "name's; default: this host's name)",
    )
    mode = parser.add_argument_group("mode")
    mode.add_argument(
        "--check",
        action="store_true",
        help="connect, authenticate and run initialize; print the gateway URL, agent, "
        "protocol version and latency, then exit",
    )
    files = parser.add_argument_group("the editor's files")
    files.add_argument(
        "--shared-filesystem",
        action="store_true",
        help="tell the gateway that the editor and the gateway see the same files at the "
        "same paths (the editor runs on the gateway's host, or mounts its paths where the "
        "gateway has them): the agent then reads and writes files through the editor "
        "(fs/read_text_file, fs/write_text_file), seeing its unsaved buffers. Without it "
        "the gateway uses its own disk. Not safe when the paths differ: the agent would "
        "read and write the editor's files at the gateway's paths",
    )
    resilience = parser.add_argument_group("connection loss")
    resilience.add_argument(
        "--no-reconnect",
        dest="reconnect",
        action="store_false",
        help="exit (status 1) when the connection is lost, instead of reconnecting and "
        "resuming the sessions seen so far",
    )
    resilience.add_argument(
        "--reconnect-max-secs",
        metavar="SECS",
        type=_positive_float,
        default=DEFAULT_RECONNECT_MAX_SECS,
        help="keep trying to reconnect for this long, with jittered exponential backoff, "
        "then exit with status 1 (default: %(default)g)",
    )
    tuning = parser.add_argument_group("tuning")
    tuning.add_argument(
        "--eof-grace",
        metavar="SECS",
        type=_non_negative_float,
        default=DEFAULT_EOF_GRACE_SECS,
        help="after stdin closes, wait this long for replies to requests already sent "
        "(default: %(default)g)",
    )
    tuning.add_argument(
        "--connect-timeout",
        metavar="SECS",
        type=_positive_float,
        default=DEFAULT_OPEN_TIMEOUT_SECS,
        help="give up connecting after this long (default: %(default)g)",
    )
    tuning.add_argument(
        "--ping-interval",
        metavar="SECS",
        type=_non_negative_float,
        default=DEFAULT_PING_INTERVAL_SECS,
        help="send a WebSocket ping this often to detect a dead connection; 0 disables "
        "(default: %(default)g)",
    )
    tuning.add_argument(
        "--ping-timeout",
        metavar="SECS",
        type=_positive_float,
        default=DEFAULT_PING_TIMEOUT_SECS,
        help="consider the connection lost when a ping is not answered within this time "
        "(default: %(default)g)",
    )
    tuning.add_argument(
        "--max-message-bytes",
        metavar="N",
        type=_positive_int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help="largest line or frame relayed in either direction (default: %(default)d)",
    )
    logs = parser.add_argument_group("logging (never on stdout, which carries only protocol)")
    logs.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=DEFAULT_LOG_LEVEL,
        help="how much to log (default: %(default)s)",
    )
    logs.add_argument(
        "--log-file",
        metavar="PATH",
        help="append logs to this file; stderr then only gets errors",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


class _RedactingFormatter(logging.Formatter):
    """Formats records, then blanks out every secret (token, pairing code) they contain.

    Redaction happens on the final text, so it also covers third-party debug logs such as
    websockets' handshake headers.
    """

    def __init__(self, fmt: str, secrets: set[str]) -> None:
        super().__init__(fmt)
        self._secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        # A fatal message (CRITICAL) is shown exactly as written, without the log prefix.
        fatal = record.levelno >= logging.CRITICAL
        text = record.getMessage() if fatal else super().format(record)
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


def configure_logging(level_name: str, log_file: str | None) -> set[str]:
    """Send logs to stderr (or a file) and return the set of secrets to redact from them."""
    secrets: set[str] = set()
    level = getattr(logging, level_name.upper())
    fmt = "%(asctime)s " + PROG + " %(levelname)s %(name)s: %(message)s"
    stderr_handler = logging.StreamHandler(sys.stderr)
    stderr_handler.setFormatter(_RedactingFormatter(fmt, secrets))
    handlers: list[logging.Handler] = [stderr_handler]
    if log_file:
        stderr_handler.setLevel(logging.ERROR)
        try:
            file_handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise BridgeExit(
                ExitCode.USAGE, f"ERROR: cannot open --log-file {log_file}: {exc.strerror}"
            ) from None
        file_handler.setFormatter(_RedactingFormatter(fmt, secrets))
        file_handler.setLevel(level)
        handlers.append(file_handler)
    else:
        stderr_handler.setLevel(level)
    root = logging.getLogger()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    return secrets


async def run(args: argparse.Namespace, secrets: set[str]) -> int:
    environ = os.environ
    # A blank --config-dir (e.g. --config-dir= from a template) means "not given".
    config_dir = resolve_config_dir(args.config_dir, environ, Path.home())
    if args.url is not None:
        url = check_ws_url(args.url)
        target = load_gateway_target(config_dir, required=False)
    else:
        target = load_gateway_target(config_dir)
        url = target.ws_url
    if args.agent is not None:
        if not args.agent.strip():
            raise BridgeExit(ExitCode.USAGE, "ERROR: --agent needs a non-empty alias")
        url = add_agent_query(url, args.agent.strip())
    logger.info("config directory %s; gateway %s", config_dir, url)

    principal = None if args.name is None else args.name.strip()
    if principal is not None:
        problem = principal_problem(principal)
        if problem is not None:
            raise BridgeExit(ExitCode.USAGE, f"ERROR: --name: {problem}")
    if args.pair_code:
        secrets.add(args.pair_code.strip())
    credentials = await resolve_credentials(
        require_pairing=target.require_pairing,
        config_dir=config_dir,
        http_base=http_base_for(url),
        pair_code=args.pair_code,
        environ=environ,
        principal=principal,
    )
    if credentials.token:
        secrets.add(credentials.token)
    options = ConnectOptions(
        url=url,
        credentials=credentials,
        max_message_bytes=args.max_message_bytes,
        open_timeout=args.connect_timeout,
        # A peer that does not answer pings in time will not answer a close frame either:
        # do not make the IDE wait longer than the ping timeout to hear about a dead link.
        close_timeout=min(DEFAULT_CLOSE_TIMEOUT_SECS, args.ping_timeout),
        ping_interval=args.ping_interval or None,
        ping_timeout=args.ping_timeout,
    )
    if args.check:
        from acp_bridge.check import run_check  # only --check needs it: IDE starts skip it

        return await run_check(options, sys.stdout.write)

    stdin = open_stdin()
    stdout = open_stdout()
    try:
        return await relay(
            lambda: open_gateway(options),
            stdin,
            stdout,
            url=url,
            options=RelayOptions(
                eof_grace=args.eof_grace,
                max_line_bytes=args.max_message_bytes,
                reconnect=args.reconnect,
                reconnect_max_secs=args.reconnect_max_secs,
                rejected_advice=credentials.rejected_advice(revoked=True),
                shared_filesystem=args.shared_filesystem,
            ),
        )
    finally:
        await stdin.aclose()


def _bridge_exit_in(exc: BaseException) -> BridgeExit | None:
    """The BridgeExit that ended the run, even when a nursery wrapped it in a group."""
    if isinstance(exc, BridgeExit):
        return exc
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _bridge_exit_in(exc.exceptions[0])
    return None


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    code: int
    try:
        secrets = configure_logging(args.log_level, args.log_file)
        code = trio.run(run, args, secrets)
    except KeyboardInterrupt:
        code = 130
    except BaseException as exc:
        bridge_exit = _bridge_exit_in(exc)
        if bridge_exit is None:
            raise
        if logging.getLogger().handlers:
            logger.critical("%s", bridge_exit.message)
        else:
            sys.stderr.write(bridge_exit.message + "\n")
        code = int(bridge_exit.code)
    raise SystemExit(code)
