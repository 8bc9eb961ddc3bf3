"""`zeroclaw prompt` and `zeroclaw demo`: one turn through a real `zeroclaw acp` child.

Both launch `zeroclaw acp` as an editor would, speak ACP over its pipes and render the
turn for a person (``render.TurnRenderer``); ``--json`` prints the agent's raw frames
instead, one per line, for scripts and CI.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import click
import tomli_w
import trio

from acp_core import methods
from acp_core.errors import RpcError
from acp_server.agent.providers import create_provider
from acp_server.cli.agent_client import (
    AgentConnection,
    AgentError,
    AgentExited,
    open_agent,
    zeroclaw_acp_command,
)
from acp_server.cli.render import TurnRenderer, is_question, terminal_safe
from acp_server.config import Config, RiskProfileConfig, RuntimeProfileConfig
from acp_server.errors import ZeroclawError

Answer = Literal["yes", "deny", "ask"]
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_CANCELLED: Final = 130

DEFAULT_MAX_PROMPT_CHARS: Final = 1024 * 1024
"""`zeroclaw prompt -` reads at most this much from stdin."""
DEMO_CHUNK_DELAY_MS: Final = 30
DEMO_PROMPT: Final = (
    "/think The user wants a tour: introduce myself, then look at the project with the "
    "shell tool.\n"
    "Hello! This is ZeroClaw answering over the Agent Client Protocol, fully offline. "
    "Every word you are reading arrived as its own session/update notification from a "
    "real `zeroclaw acp` process. Next I will list the files of this session's workspace "
    "with the shell tool; the server asks the client for permission first.\n"
    '/tool shell {"command": "find . -type f"}'
)
DEMO_FILES: Final = {
    "README.md": "# demo project\n\nA tiny workspace for `zeroclaw demo`.\n",
    "src/app.py": 'print("hello from the demo workspace")\n',
}


@dataclass
class TurnReport:
    stop_reason: str | None = None
    content: str = ""
    error: str | None = None
    exit_code: int = EXIT_OK
    frames: int = 0
    permissions: list[str] = field(default_factory=list)


def _pick(
    options: list[dict[str, Any]], option_ids: tuple[str, ...], kinds: tuple[str, ...]
) -> dict[str, Any] | None:
    """The first option with one of ``option_ids``, else the first of one of ``kinds``
    (reject-with-edit is also kind reject_once: the plain "Reject" must win for --deny)."""
    for option_id in option_ids:
        for option in options:
            if option.get("optionId") == option_id:
                return option
    for kind in kinds:
        for option in options:
            if option.get("kind") == kind:
                return option
    return None


def _choose_on_terminal(options: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Ask the person for an option number. There is no default: Enter alone asks again,
    so nothing is approved by a stray keypress; end of input dismisses the question."""
    if not options:
        return None
    try:
        number = click.prompt("  choose", type=click.IntRange(1, len(options)))
    except click.Abort:
        return None
    return options[number - 1]


def _selected(option: dict[str, Any] | None) -> dict[str, Any]:
    if option is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}


async def run_prompt_turn(
    argv: list[str],
    text: str,
    *,
    cwd: Path,
    agent: str | None,
    answer: Answer,
    renderer: TurnRenderer | None,
    frame_sink: Callable[[str], None] | None,
    auto_note: str = "",
) -> TurnReport:
    """Start the agent, open a session in ``cwd``, run one prompt, render it."""
    report = TurnReport()
    session: dict[str, str] = {}

    def on_frame(direction: str, line: str) -> None:
        if direction == "<-":
            report.frames += 1
            if frame_sink is not None:
                frame_sink(line)

    def on_update(params: dict[str, Any]) -> None:
        if renderer is not None:
            renderer.update(params)

    async def on_permission(params: dict[str, Any]) -> dict[str, Any]:
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        if renderer is not None:
            renderer.permission_box(params)
        if answer != "ask" and is_question(options):
            # ask_user's choices: --yes / --deny answer approvals, never a question the
            # person did not see (the agent would take the pick as theirs).
            choice = None
        elif answer == "yes":
            choice = _pick(options, ("allow-once",), ("allow_once", "allow_always"))
        elif answer == "deny":
            choice = _pick(options, ("reject-once",), ("reject_once", "reject_always"))
        elif renderer is not None:
            choice = await trio.to_thread.run_sync(_choose_on_terminal, options)
            renderer.terminal_line_ended()  # click.prompt ended the line itself
        else:
            choice = None
        name = terminal_safe(str(choice.get("name"))) if choice else "dismissed"
        report.permissions.append(name)
        if renderer is not None and answer != "ask":
            renderer.line(renderer.style(f"  → {name}{auto_note}", fg="yellow"))
        return _selected(choice)

    async def cancel_on_interrupt(agent_connection: AgentConnection) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if "id" in session:
                    await agent_connection.notify(
                        methods.SESSION_CANCEL, {"sessionId": session["id"]}
                    )
                    if renderer is not None:
                        renderer.line(renderer.style("(cancelling…)", fg="yellow"))

    agent_process: trio.Process | None = None
    try:
        async with (
            open_agent(
                argv, on_update=on_update, on_permission=on_permission, on_frame=on_frame
            ) as connection,
            trio.open_nursery() as nursery,
        ):
            agent_process = connection.process
            nursery.start_soon(cancel_on_interrupt, connection)
            try:
                await _converse(connection, report, session, text=text, cwd=cwd, agent=agent)
            except AgentError as exc:
                report.error = exc.message
                report.exit_code = EXIT_FAILED
            except AgentExited:
                report.error = "zeroclaw acp exited unexpectedly (see the messages above)"
                report.exit_code = EXIT_FAILED
            finally:
                nursery.cancel_scope.cancel()
    except OSError as exc:
        report.error = f"cannot start zeroclaw acp: {exc}"
        report.exit_code = EXIT_FAILED
    if report.error and agent_process is not None and agent_process.returncode:
        # The agent failed to start (e.g. a bad config.toml exits 2): pass its code on.
        report.exit_code = agent_process.returncode
    return report


async def _converse(
    connection: AgentConnection,
    report: TurnReport,
    session: dict[str, str],
    *,
    text: str,
    cwd: Path,
    agent: str | None,
) -> None:
    """initialize, session/new and one session/prompt, filling ``report``."""
    await connection.request(
        methods.INITIALIZE,
        {
            "protocolVersion": 1,
            "clientCapabilities": {},
            "clientInfo": {"name": "zeroclaw-prompt", "version": "1"},
        },
    )
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": []}
    if agent:
        params["agentAlias"] = agent
    new = await connection.request(methods.SESSION_NEW, params)
    session["id"] = new["sessionId"]
    result = await connection.request(
        methods.SESSION_PROMPT,
        {"sessionId": session["id"], "prompt": [{"type": "text", "text": text}]},
    )
    report.stop_reason = result.get("stopReason")
    report.content = result.get("content", "")
    if report.stop_reason == "cancelled":
        report.exit_code = EXIT_CANCELLED


def _echo_raw(text: str) -> None:
    click.echo(text, nl=False)


def _print_line(line: str) -> None:
    try:
        click.echo(line)
    except BrokenPipeError:
        # The reader (e.g. `| head`) is gone: drop further output quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _color() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def session_system_prompt(config: Config, alias: str | None, cwd: Path) -> str:
    """The system prompt a session of ``alias`` opened in ``cwd`` sends with its next
    turn, built by the same code (``Session.refresh_system_prompt``) without a model
    call. Like ``session/new`` it seeds the agent workspace's missing persona files.

    Raises:
        RpcError: no usable agent (as ``session/new`` answers).
        ZeroclawError: its provider cannot be built.
    """
    from acp_core.aliases import resolve_session_alias
    from acp_server.agent.runtime.factory import default_tools_factory
    from acp_server.agent.runtime.session import Session
    from acp_server.security import SecurityPolicy

    chosen = resolve_session_alias(
        explicit=alias,
        connection_default=None,
        config_default=config.acp.default_agent,
        agents={name: agent.dispatchable for name, agent in config.agents.items()},
    )
    agent = config.agents[chosen]
    provider_config = config.providers.get(agent.model_provider)
    if provider_config is None:
        raise ZeroclawError(f"model provider `{agent.model_provider}` is not configured")
    risk = config.risk_profiles.get(agent.risk_profile, RiskProfileConfig())
    session = Session(
        session_id="system-prompt",
        agent=agent,
        workspace=cwd,
        provider=create_provider(provider_config),
        tools=default_tools_factory(agent, cwd, config),
        policy=SecurityPolicy(risk, cwd),
        runtime_profile=config.runtime_profiles.get(agent.runtime_profile, RuntimeProfileConfig()),
    )
    try:
        trio.run(session.refresh_system_prompt)
    finally:
        session.close()
    return session.system_prompt


@click.command("prompt")
@click.argument("text", required=False)
@click.option(
    "--agent",
    default=None,
    metavar="ALIAS",
    help="Which [agents.<ALIAS>] of config.toml answers (default: [acp] default_agent, "
    "or the only agent).",
)
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Session workspace: every file and shell tool is confined to it (default: here).",
)
@click.option("--yes", "answer", flag_value="yes", help="Allow every permission request once.")
@click.option("--deny", "answer", flag_value="deny", help="Reject every permission request.")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's raw JSON-RPC frames.")
@click.option(
    "--show-system-prompt",
    is_flag=True,
    help="Print the system prompt a session in --cwd would send (no TEXT, no model call).",
)
@click.pass_context
def prompt_command(
    ctx: click.Context,
    text: str | None,
    agent: str | None,
    cwd: Path | None,
    answer: str | None,
    as_json: bool,
    show_system_prompt: bool,
) -> None:
    """Run one prompt TEXT through `zeroclaw acp` and show the turn (TEXT "-": read it
    from stdin).

    Permission requests are asked on the terminal, or answered by --yes / --deny; without
    a terminal and without either flag they are rejected, as with --deny.
    """
    if show_system_prompt:
        config = ctx.obj.load()
        try:
            shown = session_system_prompt(config, agent, (cwd or Path.cwd()).resolve())
        except (ZeroclawError, RpcError) as exc:
            click.echo(f"zeroclaw: error: {terminal_safe(str(exc))}", err=True)
            sys.exit(EXIT_FAILED)
        click.echo(shown)
        return
    if text is None:
        raise click.UsageError("missing argument TEXT (or use --show-system-prompt)")
    if text == "-":
        text = sys.stdin.read(DEFAULT_MAX_PROMPT_CHARS + 1)
        if len(text) > DEFAULT_MAX_PROMPT_CHARS:
            raise click.UsageError(
                f"the prompt on stdin is over {DEFAULT_MAX_PROMPT_CHARS} characters"
            )
    state = ctx.obj
    flag = state.config_dir_flag
    argv = zeroclaw_acp_command(str(flag) if flag is not None else None)
    interactive = sys.stdin.isatty() and not as_json
    chosen: Answer = "yes" if answer == "yes" else "deny" if answer == "deny" else "ask"
    if chosen == "ask" and not interactive:
        chosen = "deny"
    renderer = None if as_json else TurnRenderer(_echo_raw, color=_color())
    report = trio.run(
        partial_run(
            argv,
            text,
            cwd=(cwd or Path.cwd()).resolve(),
            agent=agent,
            answer=chosen,
            renderer=renderer,
            frame_sink=_print_line if as_json else None,
        )
    )
    if renderer is not None:
        renderer.newline()
        if report.stop_reason == "cancelled":
            renderer.line(renderer.style("(turn cancelled)", fg="yellow"))
    if report.error:
        click.echo(f"zeroclaw: error: {terminal_safe(report.error)}", err=True)
    sys.exit(report.exit_code)


def partial_run(argv: list[str], text: str, **kwargs: Any) -> Callable[[], Any]:
    async def main() -> TurnReport:
        return await run_prompt_turn(argv, text, **kwargs)

    return main


def demo_config(chunk_delay_ms: int) -> dict[str, Any]:
    return {
        "schema_version": 3,
        "acp": {"default_agent": "demo"},
        "providers": {
            "models": {"echo": {"demo": {"model": "echo", "chunk_delay_ms": chunk_delay_ms}}}
        },
        "agents": {
            "demo": {
                "model_provider": "echo.demo",
                "risk_profile": "default",
                "runtime_profile": "default",
            }
        },
        "risk_profiles": {"default": {"level": "supervised"}},
        "runtime_profiles": {"default": {"shell_timeout_secs": 30}},
    }


@click.command("demo")
@click.option("--fast", is_flag=True, help="Do not slow the streaming down for reading.")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's raw JSON-RPC frames.")
def demo_command(fast: bool, as_json: bool) -> None:
    """See a real ACP session, offline: streamed text, reasoning, and a shell tool call
    whose permission request is answered automatically. No API key, no config needed."""
    with tempfile.TemporaryDirectory(prefix="zeroclaw-demo-") as tmp:
        root = Path(tmp)
        config_dir = root / "config"
        config_dir.mkdir()
        (config_dir / "config.toml").write_text(
            tomli_w.dumps(demo_config(0 if fast else DEMO_CHUNK_DELAY_MS)), encoding="utf-8"
        )
        workspace = root / "project"
        for name, body in DEMO_FILES.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        renderer = None if as_json else TurnRenderer(_echo_raw, color=_color())
        if renderer is not None:
            renderer.line(renderer.style("ZeroClaw demo", bold=True))
            renderer.line(
                renderer.style(
                    "A real `zeroclaw acp` child over stdio, offline (echo provider, no API key).\n"
                    f"Workspace: {workspace}\n",
                    dim=True,
                )
            )
        argv = zeroclaw_acp_command(str(config_dir))
        report = trio.run(
            partial_run(
                argv,
                DEMO_PROMPT,
                cwd=workspace,
                agent=None,
                answer="yes",
                renderer=renderer,
                frame_sink=_print_line if as_json else None,
                auto_note="  (answered by the demo)",
            )
        )
    if report.error:
        click.echo(f"zeroclaw: error: {terminal_safe(report.error)}", err=True)
        sys.exit(report.exit_code)
    if renderer is not None:
        renderer.newline()
        renderer.line("")
        renderer.line(
            renderer.style(
                f"stopReason: {report.stop_reason} · {report.frames} frames from the agent · "
                f"{renderer.chunks} text chunks · {renderer.tool_calls} tool call",
                dim=True,
            )
        )
        renderer.line("")
        renderer.line("Next:")
        renderer.line('  zeroclaw prompt "summarise this repository"   one turn from the terminal')
        renderer.line(
            "  zeroclaw init                                  write a starter config.toml"
        )
        renderer.line("  zeroclaw acp                                   what your editor launches")
    sys.exit(report.exit_code)
