"""The `zeroclaw` command line.

``zeroclaw [--config-dir DIR] COMMAND``. Logging goes to stderr and is configured before
anything else runs (``acp_server.cli.launch``, the console script's entry point, which also
starts a plain `zeroclaw acp` without building this click group); in `zeroclaw acp` stdout
carries protocol frames only.

Subcommands that live in other modules are listed in ``LAZY_COMMANDS`` as
``name → "module:attribute"`` (a ``click.Command``) and imported only when that command
runs (or for ``--help``), so `zeroclaw acp` starts without loading the gateway's HTTP
stack. A module that is not installed is simply absent from the list.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Final

import click

from acp_server import __version__
from acp_server.cli.launch import EXIT_CONFIG_ERROR as EXIT_CONFIG_ERROR
from acp_server.cli.launch import AcpLaunch, serve_acp
from acp_server.cli.launch import CliState as CliState
from acp_server.cli.launch import apply_log_format as apply_log_format
from acp_server.cli.launch import fail as fail
from acp_server.cli.launch import main as launch_main
from acp_server.config import ConfigError, write_starter_config
from acp_server.observability.logs import LOG_FORMATS, LogFormat

LAZY_COMMANDS: Final = {
    "cost": "acp_server.cli.cost:cost_command",
    "demo": "acp_server.cli.prompt:demo_command",
    "gateway": "acp_server.cli.gateway:gateway_command",
    "prompt": "acp_server.cli.prompt:prompt_command",
    "security": "acp_server.cli.security:security_command",
    "sessions": "acp_server.cli.sessions:sessions_command",
    "storage": "acp_server.cli.storage:storage_command",
}


log_format_option = click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default=None,
    help="How stderr log lines look: human (the default) or json, one object a line with "
    "time, level, event, principal, session, turn and correlation id (overrides [logging] "
    "format).",
)


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
    serve_acp(
        state,
        AcpLaunch(
            max_sessions=max_sessions,
            session_timeout=session_timeout,
            agent=agent,
            log_format=log_format,
        ),
    )


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
    """The console script (``acp_server.cli.launch.main``), for callers of this name."""
    launch_main()
