"""The ``zeroclaw`` console script's entry point, and ``zeroclaw acp`` without click.

An editor launches ``zeroclaw acp`` for every agent session, so its start-up is paid often.
Building the click group imports click (and, through ``click.types``, ``uuid``, ``platform``
and ``datetime``) before a frame is read. ``main`` therefore reads a plain ``zeroclaw
[--config-dir DIR] acp [--max-sessions N] [--session-timeout SECS] [--agent ALIAS]`` here,
with each option at most once and every value one click would accept unchanged, and
hands anything else (``--help``, ``--version``, other commands, a value click must refuse
or explain) to the click group in ``acp_server.cli.main``, so help and errors stay click's
own. ``tests/server/cli/test_launch.py`` checks both readings agree.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

import msgspec

if TYPE_CHECKING:
    from acp_server.config import Config
    from acp_server.observability.logs import LogFormat

LOG_LEVEL_ENV: Final = "ZEROCLAW_LOG"
EXIT_CONFIG_ERROR: Final = 2
COMPLETION_ENV: Final = "_ZEROCLAW_COMPLETE"
"""Set by click's shell completion: the click group answers it."""
ACP_COMMAND: Final = "acp"
CONFIG_DIR_OPTION: Final = "--config-dir"
ACP_OPTIONS: Final = ("--max-sessions", "--session-timeout", "--agent")
POSITIVE_INT_OPTIONS: Final = ("--max-sessions", "--session-timeout")
HTTPX_CLI_MODULE: Final = "httpx._main"
"""httpx's own command line. ``import httpx`` loads it whenever click, rich and pygments
are installed (httpx's ``__init__`` falls back to a stub when the import fails), which
doubled the first model call's import cost; no zeroclaw command uses it."""


def configure_logging() -> None:
    """stderr only; level from ``$ZEROCLAW_LOG`` (debug, info, warning, error; default info).
    The format is human until a server command reads ``--log-format`` or ``[logging]
    format`` (``apply_log_format``)."""
    from acp_server.observability.logs import HUMAN_FORMAT

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
    for noisy in ("httpx", "httpcore", "httpx2", "httpcore2", "mcp"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    if level > logging.DEBUG:
        # The MCP SDK's clients log every dropped connection with a traceback; the
        # server's own warning (agent/tools/mcp.py) names the server and what failed.
        logging.getLogger("mcp.client").setLevel(logging.CRITICAL)


def apply_log_format(flag: LogFormat | None, config: Config | None = None) -> None:
    """``--log-format`` if given, else ``[logging] format`` once ``config`` is read. Called
    with the flag before the configuration is loaded, so the lines loading it logs are in
    the chosen format too."""
    chosen = flag or (config.log_format if config is not None else None)
    if chosen is not None:
        from acp_server.observability.logs import use_log_format

        use_log_format(chosen)


def fail(message: str, *, code: int = 1) -> NoReturn:
    sys.stderr.write(f"zeroclaw: error: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


class CliState(msgspec.Struct):
    config_dir_flag: Path | None

    @property
    def config_dir(self) -> Path:
        from acp_server.config import resolve_config_dir

        return resolve_config_dir(self.config_dir_flag)

    def load(self, *, runs_agents: bool = False) -> Config:
        """The configuration, or exit 2 with the file, key and problem on stderr.

        ``runs_agents``: this command will run agents, so without a config.toml it says
        which provider the built-in default chose (an offline echo agent surprises less
        when announced)."""
        from acp_server.config import ConfigError, load_config

        try:
            return load_config(self.config_dir, announce_default=runs_agents)
        except ConfigError as exc:
            fail(str(exc), code=EXIT_CONFIG_ERROR)


class AcpLaunch(msgspec.Struct, frozen=True):
    """``zeroclaw acp``'s arguments, as its click command would have received them."""

    config_dir: Path | None = None
    max_sessions: int | None = None
    session_timeout: int | None = None
    agent: str | None = None
    log_format: LogFormat | None = None


def plain_acp_launch(argv: list[str]) -> AcpLaunch | None:
    """``argv`` (without the program name) read as a plain ``zeroclaw acp``, or None when
    click should read it: anything else, a repeated option, or a value that is empty, looks
    like an option, is not a plain positive number where one is due, or names a file as
    the config directory (click's ``--config-dir`` refuses those with its own message)."""
    values: dict[str, str] = {}
    rest = _read_options(argv, (CONFIG_DIR_OPTION,), values)
    if rest is None or not rest or rest[0] != ACP_COMMAND:
        return None
    if _read_options(rest[1:], ACP_OPTIONS, values) != []:
        return None
    for option in POSITIVE_INT_OPTIONS:
        text = values.get(option)
        if text is not None and not (text.isascii() and text.isdigit() and int(text) >= 1):
            return None
    config_dir = values.get(CONFIG_DIR_OPTION)
    if config_dir is not None and Path(config_dir).is_file():
        return None
    max_sessions = values.get("--max-sessions")
    session_timeout = values.get("--session-timeout")
    return AcpLaunch(
        config_dir=Path(config_dir) if config_dir is not None else None,
        max_sessions=int(max_sessions) if max_sessions is not None else None,
        session_timeout=int(session_timeout) if session_timeout is not None else None,
        agent=values.get("--agent"),
    )


def _read_options(
    argv: list[str], known: tuple[str, ...], values: dict[str, str]
) -> list[str] | None:
    """Read the leading ``--option value`` / ``--option=value`` pairs of ``known`` into
    ``values``; the arguments after them, or None for one click must read."""
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        name, equals, value = argv[index].partition("=")
        if name not in known or name in values:
            return None
        if not equals:
            index += 1
            if index == len(argv):
                return None
            value = argv[index]
        if not value or value.startswith("-"):
            return None
        values[name] = value
        index += 1
    return argv[index:]


def serve_acp(state: CliState, launch: AcpLaunch) -> None:
    """Serve ACP over stdin/stdout until stdin closes (``zeroclaw acp``)."""
    import trio

    from acp_server.app import open_app, shared_store_message
    from acp_server.config import with_acp_overrides
    from acp_server.protocol.stdio import serve_stdio
    from acp_server.security.sandbox.posture import log_startup_posture
    from acp_server.storage import StoreUnavailable

    async def serve(config: Config) -> None:
        async with open_app(config) as app:
            # Start-up only allocates what lives as long as the server (modules, the
            # app): collecting it is wasted work, and freezing it keeps later
            # collections from walking it again (the gc module's documentation on
            # gc.freeze).
            gc.freeze()
            gc.enable()
            await serve_stdio(app, default_agent=launch.agent)

    apply_log_format(launch.log_format)
    config = with_acp_overrides(
        state.load(runs_agents=True),
        max_sessions=launch.max_sessions,
        session_timeout_secs=launch.session_timeout,
    )
    apply_log_format(launch.log_format, config)
    log_startup_posture(config, launch.agent)
    try:
        trio.run(serve, config)
    except StoreUnavailable as exc:  # only a shared store ([storage] url) stops the start
        fail(shared_store_message(exc))
    except KeyboardInterrupt:
        sys.exit(130)


def skip_httpx_cli() -> None:
    """Make ``import httpx`` skip its command-line module: a ``None`` entry in
    ``sys.modules`` makes importing that name raise ImportError (the import system's
    documented behaviour), which httpx answers with a stub."""
    if HTTPX_CLI_MODULE not in sys.modules:
        # typeshed types sys.modules without the None the import system gives a meaning
        sys.modules[HTTPX_CLI_MODULE] = None  # type: ignore[assignment]


def main() -> None:
    # `zeroclaw acp` starts by importing ~400 modules and building the app, all of which
    # lives as long as the process: the collector's passes over it find nothing to free.
    # serve_acp freezes what the start built and collects again from there on.
    gc.disable()
    configure_logging()
    skip_httpx_cli()
    launch = None if COMPLETION_ENV in os.environ else plain_acp_launch(sys.argv[1:])
    if launch is None:
        gc.enable()
        from acp_server.cli.main import cli

        cli(prog_name="zeroclaw")
        return
    try:
        serve_acp(CliState(config_dir_flag=launch.config_dir), launch)
    except KeyboardInterrupt:  # before the server ran (click would say "Aborted!")
        sys.exit(130)
    finally:
        gc.enable()
