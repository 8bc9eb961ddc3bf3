"""The `zeroclaw` command line.

``zeroclaw [--config-dir DIR] COMMAND``. Logging goes to stderr and is configured before
anything else runs; in `zeroclaw acp` stdout carries protocol frames only.

Subcommands that live in other modules are listed in ``LAZY_COMMANDS`` as
``name → "module:attribute"`` (a ``click.Command``) and imported only when that command
runs (or for ``--help``), so `zeroclaw acp` starts without loading the gateway's HTTP
stack. A module that is not installed is simply absent from the list.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NoReturn

import click

from acp_server import __version__
from acp_server.config import (
    Config,
    ConfigError,
    load_config,
    resolve_config_dir,
    with_acp_overrides,
    write_starter_config,
)
from acp_server.observability.logs import HUMAN_FORMAT, LOG_FORMATS, LogFormat, use_log_format

logger = logging.getLogger("zeroclaw")

LOG_LEVEL_ENV: Final = "ZEROCLAW_LOG"
EXIT_CONFIG_ERROR: Final = 2
LAZY_COMMANDS: Final = {
    "cost": "acp_server.cli.cost:cost_command",
    "demo": "acp_server.cli.prompt:demo_command",
    "gateway": "acp_server.cli.gateway:gateway_command",
    "prompt": "acp_server.cli.prompt:prompt_command",
    "security": "acp_server.cli.security:security_command",
    "sessions": "acp_server.cli.sessions:sessions_command",
    "storage": "acp_server.cli.storage:storage_command",
}


def configure_logging() -> None:
    """stderr only; level from ``$ZEROCLAW_LOG`` (debug, info, warning, error; default info).
    The format is human until a server command reads ``--log-format`` or ``[logging]
    format`` (``apply_log_format``)."""
    level_name = os.environ.get(LOG_LEVEL_ENV, "info").strip().upper() or "INFO"
    level = logging.getLevelName(level_name)
    if not isinstance(level, int):
        level = logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(HUMAN_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Third-party chatter stays at warnings unless asked for.
    for noisy in ("httpx", "httpcore", "mcp"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


log_format_option = click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default=None,
    help="How stderr log lines look: human (the default) or json, one object a line with "
    "time, level, event, principal, session, turn and correlation id (overrides [logging] "
    "format).",
)


def apply_log_format(flag: LogFormat | None, config: Config | None = None) -> None:
    """``--log-format`` if given, else ``[logging] format`` once ``config`` is read. Called
    with the flag before the configuration is loaded, so the lines loading it logs are in
    the chosen format too."""
    chosen = flag or (config.log_format if config is not None else None)
    if chosen is not None:
        use_log_format(chosen)


@dataclass
class CliState:
    config_dir_flag: Path | None

    @property
    def config_dir(self) -> Path:
        return resolve_config_dir(self.config_dir_flag)

    def load(self, *, runs_agents: bool = False) -> Config:
        """The configuration, or exit 2 with the file, key and problem on stderr.

        ``runs_agents``: this command will run agents, so without a config.toml it says
        which provider the built-in default chose (an offline echo agent surprises less
        when announced)."""
        try:
            return load_config(self.config_dir, announce_default=runs_agents)
        except ConfigError as exc:
            fail(str(exc), code=EXIT_CONFIG_ERROR)


def fail(message: str, *, code: int = 1) -> NoReturn:
    click.echo(f"zeroclaw: error: {message}", err=True)
    sys.exit(code)


class LazyGroup(click.Group):
    """A group whose ``LAZY_COMMANDS`` are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(super().list_commands(ctx))
        names.update(name for name in LAZY_COMMANDS if self._load(name) is not None)
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        module_name, _, attribute = LAZY_COMMANDS[name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                return None  # that part of the product is not installed
            raise
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{LAZY_COMMANDS[name]} is not a click command")
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--config-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Directory holding config.toml (default: $ZEROCLAW_CONFIG_DIR, else ~/.zeroclaw "
    "if it exists, else the platform's user config directory).",
)
@click.version_option(__version__, prog_name="zeroclaw")
@click.pass_context
def cli(ctx: click.Context, config_dir: Path | None) -> None:
    """ZeroClaw: agent sessions for editors over the Agent Client Protocol (ACP).

    Start with `zeroclaw demo` (offline, no API key needed), then point your editor at
    `zeroclaw acp`.
    """
    ctx.obj = CliState(config_dir_flag=config_dir)


@cli.command("acp")
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Most concurrent sessions (overrides [acp] max_sessions, default 10).",
)
@click.option(
    "--session-timeout",
    type=click.IntRange(min=1),
    default=None,
    metavar="SECS",
    help="Idle sessions are dropped and unanswered permission requests denied after this "
    "many seconds (overrides [acp] session_timeout_secs, default 3600; "
    "[acp] idle_session_timeout_secs and permission_timeout_secs set each on its own).",
)
@click.option(
    "--agent",
    default=None,
    metavar="ALIAS",
    help="Default agent for session/new when the client names none (like the gateway's "
    "?agent=; an explicit agentAlias still wins).",
)
@log_format_option
@click.pass_obj
def acp_command(
    state: CliState,
    max_sessions: int | None,
    session_timeout: int | None,
    agent: str | None,
    log_format: LogFormat | None,
) -> None:
    """Serve ACP over stdin/stdout (what an editor launches).

    Reads newline-delimited JSON-RPC 2.0 from stdin and writes responses and session
    updates to stdout; logs go to stderr. Exits 0 when stdin closes, after cancelling any
    turn still running.
    """
    import trio

    from acp_server.app import open_app, shared_store_message
    from acp_server.protocol.stdio import serve_stdio
    from acp_server.security.sandbox.posture import log_startup_posture
    from acp_server.storage import StoreUnavailable

    async def serve(config: Config) -> None:
        async with open_app(config) as app:
            await serve_stdio(app, default_agent=agent)

    apply_log_format(log_format)
    config = with_acp_overrides(
        state.load(runs_agents=True),
        max_sessions=max_sessions,
        session_timeout_secs=session_timeout,
    )
    apply_log_format(log_format, config)
    log_startup_posture(config, agent)
    try:
        trio.run(serve, config)
    except StoreUnavailable as exc:  # only a shared store ([storage] url) stops the start
        fail(shared_store_message(exc))
    except KeyboardInterrupt:
        sys.exit(130)


@cli.command("init")
@click.option("--force", is_flag=True, help="Overwrite an existing config.toml.")
@click.pass_obj
def init_command(state: CliState, force: bool) -> None:
    """Write a starter config.toml with every default spelled out.

    The provider is chosen from the environment (OPENROUTER_API_KEY, ANTHROPIC_API_KEY,
    OPENAI_API_KEY); keys are never written to the file. An `offline` agent using the
    echo provider is always included.
    """
    try:
        path = write_starter_config(state.config_dir, force=force)
    except ConfigError as exc:
        fail(str(exc), code=EXIT_CONFIG_ERROR)
    click.echo(f"wrote {path}")


def main() -> None:
    configure_logging()
    cli(prog_name="zeroclaw")
