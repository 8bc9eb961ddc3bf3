"""The shell tool: one command in the session workspace; nothing it started outlives it.

The command runs under ``bash -c`` (``sh -c`` without bash), started by the process
supervisor (``acp_server.security.sandbox.supervisor``) in a session of its own and as a
child subreaper, so whatever it starts stays below it, also what leaves its process group
(``setsid``), double-forks or ignores SIGHUP (``nohup``). Whatever way the call ends
(normal exit, timeout, turn cancel, session close, the server's exit), the command and
everything it started get SIGTERM, then SIGKILL after ``DEFAULT_KILL_GRACE_SECS``; the
tool call returns once none of it is left.

stdin is /dev/null and stdout+stderr go to a pipe we read, never to our own stdout, which
is the protocol channel in stdio mode. The environment is reduced to
``security.SHELL_ENV_PASSTHROUGH`` so API keys never reach a command's output.

The child starts under the session's OS sandbox (``acp_server.security.sandbox``): the
profile's posture decides the backend, resource limits are set in the child before exec,
and a profile that requires a sandbox this machine cannot provide refuses the command.

While it runs, the output so far (its last ``DEFAULT_LIVE_OUTPUT_TAIL_BYTES``) replaces the
call card's content at most every ``DEFAULT_LIVE_OUTPUT_INTERVAL_SECS``
(``ToolContext.update_card``). With ``[acp] client_terminal = true`` and a client that
offers ``terminal``, the command runs in the client's terminal instead
(``ClientSide.run_in_terminal``), embedded in the card as ``{type: "terminal"}`` content:
the same policy checks and approval come first, but the command runs outside this
server's sandbox, on the client's machine.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec
import trio
from msgspec import Meta

from acp_core import schema
from acp_core.schema import text_tool_content
from acp_server.agent.tools.arguments import SchemaOf, ToolArguments, parse_arguments
from acp_server.agent.tools.base import (
    DEFAULT_MAX_TOOL_OUTPUT_BYTES,
    ClientSide,
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.security import ToolRules, shell_environment
from acp_server.security.sandbox import (
    SandboxPosture,
    SandboxRefused,
    SpawnPlan,
    plan_spawn,
    resolve_posture,
    shell_program,
    spawned,
)

if TYPE_CHECKING:
    from acp_server.security.sandbox.processes import SupervisorError

logger = logging.getLogger(__name__)

DEFAULT_KILL_GRACE_SECS: Final = 2.0
"""Time between SIGTERM and SIGKILL for a command and everything it started."""
DEFAULT_DRAIN_GRACE_SECS: Final = 0.5
"""After the command exits, how long background children may keep our pipe open."""
DEFAULT_READ_CHUNK_BYTES: Final = 64 * 1024
DEFAULT_LIVE_OUTPUT_INTERVAL_SECS: Final = 0.5
"""Least time between two live-output updates of a running command's card."""
DEFAULT_LIVE_OUTPUT_TAIL_BYTES: Final = 8 * 1024
"""How much of a running command's latest output its card shows."""
_FALLBACK_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


class ShellResult(msgspec.Struct, frozen=True):
    output: bytes  # the first ``max_output_bytes`` of stdout+stderr
    dropped_bytes: int  # output beyond the cap, read and discarded
    returncode: int | None  # None when the command timed out
    timed_out: bool


class _OutputCollector:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def feed(self, chunk: bytes | bytearray) -> None:
        room = self.limit - self.kept
        if room > 0:
            self.chunks.append(bytes(chunk[:room]))
            self.kept += min(room, len(chunk))
        self.dropped += max(0, len(chunk) - max(room, 0))

    def data(self) -> bytes:
        return b"".join(self.chunks)

    @property
    def seen(self) -> int:
        return self.kept + self.dropped

    def tail(self, size: int) -> bytes:
        """The last ``size`` bytes kept (what a live view shows)."""
        out: list[bytes] = []
        room = size
        for chunk in reversed(self.chunks):
            if room <= 0:
                break
            out.append(chunk[-room:])
            room -= len(out[-1])
        return b"".join(reversed(out))


LiveOutput = Callable[[str], Awaitable[None]]
"""Receives a running command's latest output (decoded), at a bounded rate."""


async def _report_live_output(
    collector: _OutputCollector, on_output: LiveOutput, interval: float
) -> None:
    reported = 0
    while True:
        await trio.sleep(interval)
        if collector.seen != reported:
            reported = collector.seen
            tail = collector.tail(DEFAULT_LIVE_OUTPUT_TAIL_BYTES)
            await on_output(tail.decode("utf-8", errors="replace"))


async def _pump(
    stream: trio.abc.ReceiveStream, collector: _OutputCollector, done: trio.Event
) -> None:
    try:
        while chunk := await stream.receive_some(DEFAULT_READ_CHUNK_BYTES):
            collector.feed(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        done.set()


async def run_shell_command(
    command: str,
    *,
    cwd: Path,
    timeout_secs: float,
    env: dict[str, str],
    max_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES,
    kill_grace_secs: float = DEFAULT_KILL_GRACE_SECS,
    sandbox: SpawnPlan | None = None,
    on_output: LiveOutput | None = None,
    live_interval: float = DEFAULT_LIVE_OUTPUT_INTERVAL_SECS,
) -> ShellResult:
    """Run ``command`` with the shell; see the module docstring for the guarantees.

    ``sandbox``: the argv, environment and child set-up ``plan_spawn`` made for the shell
    command line (``[shell, "-c", command]``); unconfined when None."""
    # The supervisor's client and its child set-up load with the first command: a session
    # lists this tool at session/new without running anything (tests/e2e/
    # test_startup_imports.py).
    from acp_server.security.sandbox.processes import SupervisorError, command_supervisor
    from acp_server.security.sandbox.supervisor import ChildSetup

    env = dict(env)
    env.setdefault("PATH", _FALLBACK_PATH)
    plan = sandbox or SpawnPlan([shell_program(), "-c", command], env, ChildSetup())
    read_fd, write_fd = os.pipe()
    try:
        running = await command_supervisor().start(
            plan.argv,
            env=plan.env,
            cwd=cwd,
            setup=plan.setup,
            stdout_fd=write_fd,
            ruleset_fd=plan.ruleset_fd,
        )
    except BaseException as exc:
        os.close(read_fd)
        if isinstance(exc, SupervisorError):  # no shell, fork limits, the sandbox refused
            raise ToolError(f"Cannot start the shell in {cwd}: {exc}") from None
        raise
    finally:
        os.close(write_fd)  # the command holds its own copy: EOF comes when it is done
    stdout = trio.lowlevel.FdStream(read_fd)
    collector = _OutputCollector(max_output_bytes)
    returncode: int | None = None
    lost: SupervisorError | None = None
    try:
        with trio.move_on_after(timeout_secs) as deadline:
            async with trio.open_nursery() as nursery:
                pipe_closed = trio.Event()
                nursery.start_soon(_pump, stdout, collector, pipe_closed)
                if on_output is not None:
                    nursery.start_soon(_report_live_output, collector, on_output, live_interval)
                try:
                    returncode = await running.wait()
                except SupervisorError as exc:  # the supervisor died under the command
                    lost = exc
                else:
                    # A background child may hold the pipe open forever; give it a moment
                    # to flush, then everything the command started is stopped below.
                    with trio.move_on_after(DEFAULT_DRAIN_GRACE_SECS):
                        await pipe_closed.wait()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await running.stop(kill_grace_secs)
            await stdout.aclose()
    if lost is not None:
        raise ToolError(f"Command lost: {lost}")
    timed_out = deadline.cancelled_caught
    return ShellResult(
        output=collector.data(),
        dropped_bytes=collector.dropped,
        returncode=None if timed_out else returncode,
        timed_out=timed_out,
    )


def _format_output(result: ShellResult) -> str:
    text = result.output.decode("utf-8", errors="replace").rstrip("\n")
    if result.dropped_bytes:
        text += f"\n[output truncated: {result.dropped_bytes} more bytes not shown]"
    return text


class ShellArguments(ToolArguments):
    command: Annotated[str, Meta(min_length=1, description="The command line to run.")]


class ShellTool:
    definition: Final = ToolDefinition(
        name="shell",
        kind="execute",
        rules=ToolRules(command_argument="command"),
        arguments=ShellArguments,
    )
    name = definition.name
    description = (
        "Run a shell command in the session workspace (the current directory). stdin is "
        "empty; stdout and stderr are returned together, truncated when very long. The "
        "command is killed, with everything it started, when it exceeds the time limit. "
        "Only allowlisted programs run; command substitution and paths outside the "
        "workspace are refused."
    )
    side_effects = True
    parameters = SchemaOf(ShellArguments)

    @staticmethod
    def _plan(command: str, ctx: ToolContext) -> SpawnPlan:
        """The sandboxed spawn (blocking: availability probes once, then a few syscalls)."""
        profile = ctx.policy.profile
        posture: SandboxPosture = resolve_posture(profile)
        env = shell_environment()
        env.setdefault("PATH", _FALLBACK_PATH)
        try:
            return plan_spawn(
                [shell_program(), "-c", command],
                posture=posture,
                profile=profile,
                workspace=ctx.workspace,
                session_id=ctx.session_id,
                env=env,
                limits=ctx.shell_limits,
                grants=ctx.policy.jail.grants,
            )
        except (SandboxRefused, OSError) as exc:  # required but unavailable; ruleset failed
            raise ToolError(f"Sandbox error: {exc}") from None

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command = parse_arguments(ShellArguments, arguments).command
        # Re-checked here, not only in the runtime's decide(): an approval never turns a
        # refused command into an allowed one.
        assessment = ctx.policy.assess_command(command)
        if assessment.denial is not None:
            raise RefusedCall(assessment.denial)
        if assessment.blocked_high_risk:
            raise RefusedCall(
                "High-risk command blocked by security policy: "
                + "; ".join(assessment.blocked_high_risk)
            )
        if ctx.client is not None and ctx.client.runs_terminals:
            return await self._run_in_client_terminal(command, ctx, ctx.client)
        plan = await trio.to_thread.run_sync(self._plan, command, ctx)
        update_card = ctx.update_card

        async def show_output(text: str) -> None:
            if update_card is not None:
                await update_card([text_tool_content(text)])

        with spawned(plan):
            result = await run_shell_command(
                command,
                cwd=ctx.workspace,
                timeout_secs=ctx.shell_timeout_secs,
                env=plan.env,
                sandbox=plan,
                on_output=show_output if update_card is not None else None,
            )
        return _shell_output(_format_output(result), result.returncode, ctx, result.timed_out)

    async def _run_in_client_terminal(
        self, command: str, ctx: ToolContext, client: ClientSide
    ) -> ToolOutput:
        async def embed(terminal_id: str) -> None:
            if ctx.update_card is not None:
                await ctx.update_card([schema.ToolCallTerminal(terminal_id=terminal_id)])

        run = await client.run_in_terminal(
            [shell_program(), "-c", command],
            cwd=ctx.workspace,
            timeout_secs=ctx.shell_timeout_secs,
            output_limit=DEFAULT_MAX_TOOL_OUTPUT_BYTES,
            on_created=embed,
        )
        output = run.output.rstrip("\n")
        if run.truncated:
            output = "[output truncated: only its end is shown]\n" + output
        code = run.exit_code
        if run.signal is not None and code is None:
            code = -getattr(signal, run.signal, signal.SIGTERM)
        shown = _shell_output(output, code, ctx, run.timed_out)
        card = (schema.ToolCallTerminal(terminal_id=run.terminal_id),)
        return ToolOutput(shown.text, ok=shown.ok, card=card)


def _shell_output(output: str, code: int | None, ctx: ToolContext, timed_out: bool) -> ToolOutput:
    """A finished command's tool result: its output, or why it failed."""
    if timed_out:
        return ToolOutput(
            f"Error: Command timed out after {ctx.shell_timeout_secs:g} s and was killed "
            f"with its child processes.\n{output}".rstrip("\n"),
            ok=False,
        )
    if code != 0:
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with code {code}"
        )
        return ToolOutput(f"Error: Command {how}.\n{output}".rstrip("\n"), ok=False)
    return ToolOutput(output if output.strip() else "(no output)")
