"""Tools from MCP servers (stdio, streamable HTTP, HTTP+SSE), through the official ``mcp`` SDK.

Which servers a session gets is agent/tools/mcp_servers.py (config.toml and the client's
``mcpServers``, only with the agent's ``acp_enable_mcp``); how an HTTP server is reached is
agent/tools/mcp_http.py. Everything after the connection is the same for every transport.

``start_mcp_tools`` starts every server in a nursery the caller owns (the connection's)
and returns at once, so ``session/new`` never waits for them (ZeroClaw's
``…does_not_wait_for_configured_mcp_servers``); ``McpToolset.wait_ready`` waits, bounded
by the startup timeout, before a turn lists its tools; ``McpToolset.close`` ends them when
the session ends. ``open_mcp_tools`` is the same as one async context manager. Each remote tool becomes an
``McpTool`` named ``mcp__<server>__<tool>``: the prefix keeps MCP tools from shadowing
built-ins (and from each other), and the name fits the providers' ``[A-Za-z0-9_-]{1,64}``
rule. ``kind`` is ``other`` (``acp_core.tools.tool_kind``) and ``side_effects`` is always
True, whatever the server's hints say, so supervised sessions ask unless the name is in
``auto_approve``.

Stdio servers run in the session workspace with the SDK's minimal inherited environment
(HOME, PATH, SHELL, TERM, USER, LOGNAME) plus their configured ``env``: our own API keys
are not handed to them. HTTP servers get their configured ``headers`` and nothing else.

Results are rendered by agent/tools/mcp_results.py (blobs saved under ``uploads/``). A server that cannot start or be reached, exits, drops its
connection, or stops answering yields an ``Error: …`` tool result naming it and saying what
failed, never an exception into the session. A call runs in its turn's cancel scope: a
cancelled turn abandons it at once and the SDK tells the server (``notifications/cancelled``).
Stopping a stdio server closes its stdin, then the SDK sends SIGTERM and SIGKILL to its
process group; ending an HTTP server's session sends streamable HTTP's DELETE (bounded by
``mcp_http.DEFAULT_MCP_CLOSE_SECS``) and closes its connections.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO

import trio

from acp_server.agent.tools.base import ToolContext, ToolOutput
from acp_server.agent.tools.mcp_names import MCP_TOOL_PREFIX
from acp_server.agent.tools.mcp_results import render_result
from acp_server.config import AnyMcpServerConfig, McpHttpServerConfig
from acp_server.patterns import LazyPattern

if TYPE_CHECKING:
    # The SDK costs ~0.7 s to import: only sessions that actually start an MCP server
    # pay for it (the functions below import it when they run).
    import mcp_types
    from mcp import ClientSession
    from mcp.client._transport import TransportStreams

    from acp_server.agent.tools.mcp_http import HttpStatusWatch

logger = logging.getLogger(__name__)

CONNECTION_CLOSED: Final = -32000
"""The SDK's error code for "the server's stdio connection closed" (mcp_types.CONNECTION_CLOSED)."""

MAX_TOOL_NAME_CHARS: Final = 64
"""OpenAI and Anthropic both refuse tool names longer than this."""
DEFAULT_MCP_STARTUP_TIMEOUT_SECS: Final = 30.0
"""How long a server may take to start, initialize and list its tools."""
DEFAULT_MCP_CALL_TIMEOUT_SECS: Final = 300.0
"""How long one tool call may run before it is reported as unanswered."""
DEFAULT_MAX_MCP_TOOLS_PER_SERVER: Final = 256
"""Tools taken from one server (the rest are dropped with a warning)."""
DEFAULT_MAX_TOOL_LIST_PAGES: Final = 32
"""``tools/list`` pages followed before giving up on a paginating server."""
DEFAULT_MAX_MCP_DESCRIPTION_CHARS: Final = 2000
"""Longest tool description passed on to the model."""

_UNSAFE_NAME_CHARS: Final = LazyPattern(r"[^A-Za-z0-9_-]+")


# --- naming -------------------------------------------------------------------------------------


def _name_part(text: str) -> str:
    return _UNSAFE_NAME_CHARS.sub("_", text).strip("_") or "x"


def mcp_tool_name(server: str, tool: str, taken: set[str]) -> str:
    """``mcp__<server>__<tool>``, made safe and unique within ``taken`` (which it extends)."""
    base = f"{MCP_TOOL_PREFIX}{_name_part(server)}__{_name_part(tool)}"[:MAX_TOOL_NAME_CHARS]
    name = base
    counter = 2
    while name in taken:
        suffix = f"_{counter}"
        name = base[: MAX_TOOL_NAME_CHARS - len(suffix)] + suffix
        counter += 1
    taken.add(name)
    return name


# --- one server ---------------------------------------------------------------------------------

ServerState = Literal["starting", "ready", "failed", "exited", "lost", "stopped"]
"""``lost``: an HTTP server's connection dropped (or the server forgot the MCP session);
the next call connects again (``McpTool.run``)."""


@dataclass(eq=False)
class _ServerConnection:
    config: AnyMcpServerConfig
    state: ServerState = "starting"
    problem: str = ""
    session: ClientSession | None = None
    remote_tools: list[mcp_types.Tool] = field(default_factory=list)
    settled: trio.Event = field(default_factory=trio.Event)  # ready, or failed to (re)start
    finished: trio.Event = field(default_factory=trio.Event)  # the process or connection is gone
    http_watch: HttpStatusWatch | None = None
    reconnects: int = 0
    idle: bool = False  # lost, its old connection closed: waiting for a call to reconnect
    _changed: trio.Event = field(default_factory=trio.Event)

    @property
    def label(self) -> str:
        return f"MCP server {self.config.name!r}"

    @property
    def is_http(self) -> bool:
        return isinstance(self.config, McpHttpServerConfig)

    def notify(self) -> None:
        """Wake whoever waits in ``wait_for`` to look at the state again."""
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._changed.wait()

    def unavailable_reason(self) -> str:
        if self.state == "failed":
            if isinstance(self.config, McpHttpServerConfig):
                from acp_server.agent.tools.mcp_http import shown_url

                where = shown_url(self.config.url)
                return f"{self.label} could not be reached at {where}: {self.problem}"
            return f"{self.label} could not be started: {self.problem}"
        if self.state == "exited":
            return f"{self.label} has exited ({self.problem}); its tools are unavailable for the rest of this session"
        if self.state == "lost":
            return f"the connection to {self.label} is lost ({self.problem}); the next call connects again"
        if self.state == "stopped":
            return f"{self.label} was stopped because the session ended"
        return f"{self.label} is still starting"

    def describe(self, error: BaseException) -> str:
        """A short human reason, looking through anyio's exception groups."""
        if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            return self.describe(error.exceptions[0])
        if self.http_watch is not None:
            from acp_server.agent.tools.mcp_http import http_problem

            problem = http_problem(error, self.http_watch)
            if problem is not None:
                return problem
            if _is_connection_closed(error):
                return "the connection closed"
        return _describe(error)

    def lose(self, problem: str) -> None:
        """A call found the connection gone: an HTTP server is connected again on the next
        call; a stdio server's process has exited for good."""
        self.state, self.problem = ("lost" if self.is_http else "exited"), problem
        self.notify()


def _is_connection_closed(error: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError

    return isinstance(error, MCPError) and error.code == CONNECTION_CLOSED


def _describe(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError):
        return f"command not found: {error.filename or error}"
    if isinstance(error, PermissionError):
        return f"command not executable: {error.filename or error}"
    from mcp.shared.exceptions import MCPError

    if isinstance(error, MCPError):
        if error.code == CONNECTION_CLOSED:
            return "the process exited"
        return f"MCP error {error.code}: {error.message}"
    return str(error).strip() or type(error).__name__


async def _list_all_tools(session: ClientSession, label: str) -> list[mcp_types.Tool]:
    import mcp_types

    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(DEFAULT_MAX_TOOL_LIST_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) >= DEFAULT_MAX_MCP_TOOLS_PER_SERVER:
            break
    if len(tools) > DEFAULT_MAX_MCP_TOOLS_PER_SERVER:
        logger.warning(
            "%s offers %d tools; using the first %d",
            label,
            len(tools),
            DEFAULT_MAX_MCP_TOOLS_PER_SERVER,
        )
    return tools[:DEFAULT_MAX_MCP_TOOLS_PER_SERVER]


def _open_transport(
    connection: _ServerConnection, *, cwd: Path, errlog: TextIO, call_timeout_secs: float
) -> AbstractAsyncContextManager[TransportStreams]:
    config = connection.config
    if isinstance(config, McpHttpServerConfig):
        from acp_server.agent.tools.mcp_http import HttpStatusWatch, open_http_transport

        connection.http_watch = connection.http_watch or HttpStatusWatch()
        return open_http_transport(
            config, call_timeout_secs=call_timeout_secs, watch=connection.http_watch
        )
    from mcp import StdioServerParameters, stdio_client

    parameters = StdioServerParameters(
        command=config.command, args=list(config.args), env=dict(config.env) or None, cwd=cwd
    )
    return stdio_client(parameters, errlog=errlog)


@dataclass(frozen=True, slots=True)
class _Launch:
    """How a session's servers are run: the same for each of them."""

    cwd: Path
    startup_timeout_secs: float
    errlog: TextIO
    stop: trio.Event


async def _serve_once(connection: _ServerConnection, launch: _Launch, call_timeout: float) -> None:
    """Connect (start) the server, initialize, list its tools, and hold the MCP session
    until ``launch.stop`` or until a call finds the connection lost."""
    import mcp_types
    from mcp import ClientSession

    from acp_server.agent.tools.mcp_http import DEFAULT_MCP_CLOSE_SECS

    # An HTTP server's whole start (the SSE transport connects on entry) and its end (a
    # DELETE) are bounded; a stdio server's end is the SDK's own SIGTERM/SIGKILL sequence,
    # which must not be cut short, so only its initialize is.
    startup_timeout_secs, stop = launch.startup_timeout_secs, launch.stop
    bounds = trio.CancelScope()
    if connection.is_http:
        bounds.deadline = trio.current_time() + startup_timeout_secs
    with bounds:
        async with (
            _open_transport(
                connection, cwd=launch.cwd, errlog=launch.errlog, call_timeout_secs=call_timeout
            ) as (read_stream, write_stream),
            ClientSession(
                read_stream,
                write_stream,
                client_info=mcp_types.Implementation(name="zeroclaw", version="0.1.0"),
            ) as session,
        ):
            with trio.move_on_after(startup_timeout_secs):
                await session.initialize()
                connection.remote_tools = await _list_all_tools(session, connection.label)
                bounds.deadline = math.inf
                connection.session = session
                connection.state = "ready"
            if connection.state != "ready":
                return
            connection.settled.set()
            logger.info("%s ready with %d tool(s)", connection.label, len(connection.remote_tools))
            await connection.wait_for(lambda: stop.is_set() or connection.state != "ready")
            if connection.is_http:
                bounds.deadline = trio.current_time() + DEFAULT_MCP_CLOSE_SECS


async def _run_server(connection: _ServerConnection, launch: _Launch, call_timeout: float) -> None:
    """Own one server's process or connection and its MCP session until ``launch.stop``;
    an HTTP server's lost connection is opened again when a call asks. Never raises."""
    stop = launch.stop
    try:
        while True:
            try:
                await _serve_once(connection, launch, call_timeout)
            except Exception as error:  # contained: a broken server must not end the session
                if connection.state == "ready":
                    connection.lose(connection.describe(error))
                elif connection.state == "starting":
                    connection.state, connection.problem = "failed", connection.describe(error)
            connection.session = None
            if connection.state == "starting":
                connection.state = "failed"
                connection.problem = (
                    "it was stopped while starting"
                    if stop.is_set()
                    else f"it did not finish starting within {launch.startup_timeout_secs:g} s"
                )
            if connection.state == "ready":
                connection.state = "stopped"
            if connection.reconnects and connection.state == "failed":
                connection.state = "lost"  # a failed reconnect: the next call tries again
            connection.settled.set()
            if connection.state != "lost":
                break
            logger.warning("%s", connection.unavailable_reason())
            # Idle: the old connection is closed; a call may now ask for a new one.
            connection.idle = True
            connection.notify()
            await connection.wait_for(lambda: stop.is_set() or connection.state == "starting")
            connection.idle = False
            if stop.is_set():
                connection.state = "stopped"
                break
    finally:
        connection.session = None
        if connection.state in ("failed", "exited"):
            logger.warning("%s", connection.unavailable_reason())
        connection.settled.set()
        connection.finished.set()
        connection.notify()


async def _reconnect(connection: _ServerConnection) -> None:
    """Ask the server's task to connect again (a call found the connection lost), once it
    has closed the old connection, and wait until it is ready or has failed again."""
    await connection.wait_for(
        lambda: connection.idle or connection.state != "lost" or connection.finished.is_set()
    )
    if connection.state == "lost" and connection.idle:
        connection.state = "starting"
        connection.reconnects += 1
        connection.settled = trio.Event()
        connection.notify()
    await connection.settled.wait()


# --- tools ------------------------------------------------------------------------------------


@dataclass(eq=False)
class McpTool:
    """One remote tool, callable like a built-in (``acp_server.agent.tools.base.Tool``)."""

    name: str
    description: str
    parameters: dict[str, Any]
    remote_name: str
    _connection: _ServerConnection
    _call_timeout_secs: float
    side_effects: bool = True

    @property
    def server_name(self) -> str:
        return self._connection.config.name

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from mcp.shared.exceptions import MCPError

        connection = self._connection
        if connection.state in ("lost", "starting"):
            await _reconnect(connection)
        session = connection.session
        if connection.state != "ready" or session is None:
            return _tool_error(connection.unavailable_reason() + ".")
        try:
            with trio.fail_after(self._call_timeout_secs):
                result = await session.call_tool(self.remote_name, arguments)
        except trio.TooSlowError:
            return _tool_error(
                f"{connection.label} did not answer `{self.remote_name}` within "
                f"{self._call_timeout_secs:g} s."
            )
        except MCPError as error:
            if not _connection_gone(connection, error):
                return _tool_error(
                    f"{connection.label} refused `{self.remote_name}`: "
                    f"{connection.describe(error) if connection.is_http else error.message}"
                )
            return self._lost(connection.describe(error))
        except Exception as error:  # a transport failure: the connection is gone
            return self._lost(connection.describe(error))
        return await render_result(result, ctx.uploads_dir)

    def _lost(self, problem: str) -> ToolOutput:
        connection = self._connection
        if connection.is_http:
            connection.lose(problem)
            return _tool_error(
                f"the connection to {connection.label} was lost while running "
                f"`{self.remote_name}` ({problem}); the next call connects again."
            )
        connection.lose("it exited during a call")
        return _tool_error(
            f"{connection.label} exited while running `{self.remote_name}`; its tools are "
            "unavailable for the rest of this session."
        )


def _connection_gone(connection: _ServerConnection, error: BaseException) -> bool:
    """The call failed because the connection is gone: the stdio process exited, or an
    HTTP server closed the connection or no longer knows the MCP session (it restarted)."""
    from mcp.shared.exceptions import MCPError

    if not isinstance(error, MCPError):
        return False
    if error.code == CONNECTION_CLOSED:
        return True
    return connection.is_http and error.message == "Session terminated"


def _tool_error(message: str) -> ToolOutput:
    return ToolOutput(text=f"Error: {message}", ok=False)


def _tool_parameters(tool: mcp_types.Tool) -> dict[str, Any]:
    schema_ = dict(tool.input_schema)
    schema_.setdefault("type", "object")
    return schema_


def _tool_description(server: str, tool: mcp_types.Tool) -> str:
    text = (tool.description or tool.title or tool.name).strip()
    if len(text) > DEFAULT_MAX_MCP_DESCRIPTION_CHARS:
        text = text[:DEFAULT_MAX_MCP_DESCRIPTION_CHARS] + "…"
    return f"[MCP server {server}] {text}"


# --- the session-facing API -------------------------------------------------------------------


class McpToolset:
    """A session's MCP servers and the tools they offer (see ``start_mcp_tools``)."""

    def __init__(self, connections: Sequence[_ServerConnection], call_timeout_secs: float) -> None:
        self._connections = list(connections)
        self._call_timeout_secs = call_timeout_secs
        self._tools: dict[str, McpTool] | None = None
        self._stop = trio.Event()

    def call_timeout_of(self, connection: _ServerConnection) -> float:
        return connection.config.call_timeout_secs or self._call_timeout_secs

    async def wait_ready(self) -> None:
        """Return once every server is ready or has failed (bounded by the startup timeout)."""
        for connection in self._connections:
            await connection.settled.wait()

    @property
    def ready(self) -> bool:
        return all(connection.settled.is_set() for connection in self._connections)

    @property
    def tools(self) -> Mapping[str, McpTool]:
        """Tools of the servers that started, by agent-facing name (complete once ``ready``).

        Stable after ``wait_ready``: a server that exits later keeps its tools listed, and
        calling them reports that it exited.
        """
        if self._tools is not None:
            return self._tools
        taken: set[str] = set()
        tools: dict[str, McpTool] = {}
        for connection in self._connections:
            for remote in connection.remote_tools:
                name = mcp_tool_name(connection.config.name, remote.name, taken)
                tools[name] = McpTool(
                    name=name,
                    description=_tool_description(connection.config.name, remote),
                    parameters=_tool_parameters(remote),
                    remote_name=remote.name,
                    _connection=connection,
                    _call_timeout_secs=self.call_timeout_of(connection),
                )
        if self.ready:
            self._tools = tools
        return tools

    @property
    def problems(self) -> list[str]:
        """One sentence per server that could not start (or be reached) or has exited since."""
        return [
            connection.unavailable_reason()
            for connection in self._connections
            if connection.state in ("failed", "exited")
        ]

    def close(self) -> None:
        """Stop every server (returns at once; each process ends within a few seconds).

        Idempotent. Cancelling the nursery the servers run in stops them too.
        """
        self._stop.set()
        for connection in self._connections:
            if connection.state == "ready":
                connection.state = "stopped"
            connection.notify()

    async def aclose(self) -> None:
        """``close``, then wait until every server process has ended."""
        self.close()
        for connection in self._connections:
            await connection.finished.wait()


def start_mcp_tools(
    servers: Sequence[AnyMcpServerConfig],
    *,
    nursery: trio.Nursery,
    cwd: Path,
    startup_timeout_secs: float = DEFAULT_MCP_STARTUP_TIMEOUT_SECS,
    call_timeout_secs: float = DEFAULT_MCP_CALL_TIMEOUT_SECS,
    errlog: TextIO | None = None,
) -> McpToolset:
    """Start ``servers`` in ``nursery`` (working directory ``cwd``, the session workspace).

    Returns at once (``session/new`` does not wait); ``await toolset.wait_ready()`` before
    listing tools for a turn, ``toolset.close()`` when the session ends. Server stderr goes
    to ``errlog`` (default: our stderr, never stdout, which carries ACP frames).
    """
    connections = [_ServerConnection(config) for config in servers]
    toolset = McpToolset(connections, call_timeout_secs)
    launch = _Launch(cwd, startup_timeout_secs, errlog or sys.stderr, toolset._stop)
    for connection in connections:
        nursery.start_soon(
            _run_server,
            connection,
            launch,
            toolset.call_timeout_of(connection),
            name=f"mcp server {connection.config.name}",
        )
    return toolset


@asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[AnyMcpServerConfig],
    *,
    cwd: Path,
    startup_timeout_secs: float = DEFAULT_MCP_STARTUP_TIMEOUT_SECS,
    call_timeout_secs: float = DEFAULT_MCP_CALL_TIMEOUT_SECS,
    errlog: TextIO | None = None,
) -> AsyncIterator[McpToolset]:
    """``start_mcp_tools`` in a nursery of its own; leaving the block ends the servers.

    For a caller whose session lifetime is one task; enter and leave it in that task.
    """
    async with trio.open_nursery() as nursery:
        toolset = start_mcp_tools(
            servers,
            nursery=nursery,
            cwd=cwd,
            startup_timeout_secs=startup_timeout_secs,
            call_timeout_secs=call_timeout_secs,
            errlog=errlog,
        )
        try:
            yield toolset
        finally:
            toolset.close()
