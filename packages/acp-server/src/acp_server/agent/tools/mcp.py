"""Tools from stdio MCP servers, through the official ``mcp`` SDK.

A session's MCP servers come from two places: the ``mcpServers`` of ``session/new`` (base
ACP shape) and ``[agents.<alias>] mcp_servers`` in config.toml. Both are used only when
the agent sets ``acp_enable_mcp`` (off by default, as in ZeroClaw's implementation): starting a server
runs an arbitrary command on this host before any approval, which a paired gateway client
must not be able to do unless the operator opted in. Only stdio servers exist here
(``initialize`` advertises ``mcpCapabilities {http: false, sse: false}``).

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

Servers run in the session workspace with the SDK's minimal inherited environment
(HOME, PATH, SHELL, TERM, USER, LOGNAME) plus their configured ``env``: our own API keys
are not handed to them.

Results: text passes through; embedded base64 blobs (and image/audio data) are written
under the session's ``uploads/`` with the prompt-blob helpers (``acp_core.blobs`` naming,
``acp_server.agent.uploads.store_upload`` writing) and replaced by the same markers a
prompt attachment gets. A server that cannot start, exits, or stops answering yields an
``Error: …`` tool result, never an exception into the session. Stopping a server closes
its stdin, then the SDK sends SIGTERM and SIGKILL to its process group.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TextIO

import trio

from acp_core import schema
from acp_core.blobs import (
    DEFAULT_MAX_BLOB_BYTES,
    PART_SEPARATOR,
    decode_blob,
    display_name,
    guess_mime,
    prompt_marker,
    storage_name,
)
from acp_core.errors import InvalidParamsError
from acp_server.agent.tools.base import DEFAULT_MAX_TOOL_OUTPUT_BYTES, ToolContext, ToolOutput
from acp_server.agent.uploads import UploadError, store_upload
from acp_server.config import AgentConfig, McpServerConfig
from acp_server.patterns import LazyPattern

if TYPE_CHECKING:
    # The SDK costs ~0.7 s to import: only sessions that actually start an MCP server
    # pay for it (the functions below import it when they run).
    import mcp_types
    from mcp import ClientSession

logger = logging.getLogger(__name__)

CONNECTION_CLOSED: Final = -32000
"""The SDK's error code for "the server's stdio connection closed" (mcp_types.CONNECTION_CLOSED)."""

MCP_TOOL_PREFIX: Final = "mcp__"
MAX_TOOL_NAME_CHARS: Final = 64
"""OpenAI and Anthropic both refuse tool names longer than this."""
DEFAULT_MCP_STARTUP_TIMEOUT_SECS: Final = 30.0
"""How long a server may take to start, initialize and list its tools."""
DEFAULT_MCP_CALL_TIMEOUT_SECS: Final = 300.0
"""How long one tool call may run before it is reported as unanswered."""
DEFAULT_MAX_MCP_SERVERS: Final = 16
"""Servers per session; more is almost certainly a misconfiguration."""
DEFAULT_MAX_MCP_TOOLS_PER_SERVER: Final = 256
"""Tools taken from one server (the rest are dropped with a warning)."""
DEFAULT_MAX_TOOL_LIST_PAGES: Final = 32
"""``tools/list`` pages followed before giving up on a paginating server."""
DEFAULT_MAX_MCP_DESCRIPTION_CHARS: Final = 2000
"""Longest tool description passed on to the model."""

_UNSAFE_NAME_CHARS: Final = LazyPattern(r"[^A-Za-z0-9_-]+")
_EXTENSION_BY_MIME: Final = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "application/pdf": "pdf",
    "text/plain": "txt",
    "application/json": "json",
}


# --- which servers a session gets -------------------------------------------------------------


def select_mcp_servers(
    agent: AgentConfig, requested: Sequence[schema.McpServer]
) -> tuple[McpServerConfig, ...]:
    """The servers to start for a new session of ``agent``.

    ``requested`` is ``session/new``'s parsed ``mcpServers``. With ``acp_enable_mcp`` off
    everything is ignored (logged once per session when the client asked for servers).
    With it on: the agent's configured servers, then the client's, a client server
    replacing a configured one of the same name.

    http/sse servers are skipped with a warning (``skipped_mcp_servers`` names them).

    Raises:
        InvalidParamsError: too many servers, or one with an empty command.
    """
    if not agent.acp_enable_mcp:
        if requested:
            logger.warning(
                "Ignoring %d MCP server(s) from session/new: agent %r does not set "
                "acp_enable_mcp = true in config.toml",
                len(requested),
                agent.alias,
            )
        return ()
    chosen: dict[str, McpServerConfig] = {server.name: server for server in agent.mcp_servers}
    for server in requested:
        if isinstance(server, schema.McpServerHttp):
            # Editors send their HTTP context servers unasked (ACP lets a client ignore
            # mcpCapabilities): skipped, never a failed session/new.
            logger.warning(
                "Skipping MCP server %r from session/new: it uses %s, but only stdio MCP "
                "servers are supported (mcpCapabilities: http false, sse false)",
                server.name,
                server.type,
            )
            continue
        chosen[server.name] = McpServerConfig(
            name=server.name,
            command=server.command,
            args=tuple(server.args),
            env={variable.name: variable.value for variable in server.env},
        )
    if len(chosen) > DEFAULT_MAX_MCP_SERVERS:
        raise InvalidParamsError(
            f"Too many MCP servers ({len(chosen)}); at most {DEFAULT_MAX_MCP_SERVERS} per session"
        )
    for config in chosen.values():
        if not config.command.strip():
            raise InvalidParamsError(f"MCP server {config.name!r} has an empty command")
    return tuple(chosen.values())


def skipped_mcp_servers(
    agent: AgentConfig, requested: Sequence[schema.McpServer]
) -> list[str] | None:
    """The names of the requested http/sse servers ``select_mcp_servers`` skips (None when
    it skips none, or ignores every server because the agent has MCP off)."""
    if not agent.acp_enable_mcp:
        return None
    names = [server.name for server in requested if isinstance(server, schema.McpServerHttp)]
    return names or None


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

ServerState = Literal["starting", "ready", "failed", "exited", "stopped"]


@dataclass(eq=False)
class _ServerConnection:
    config: McpServerConfig
    state: ServerState = "starting"
    problem: str = ""
    session: ClientSession | None = None
    remote_tools: list[mcp_types.Tool] = field(default_factory=list)
    settled: trio.Event = field(default_factory=trio.Event)  # ready, or failed to start
    finished: trio.Event = field(default_factory=trio.Event)  # the process is gone

    @property
    def label(self) -> str:
        return f"MCP server {self.config.name!r}"

    def unavailable_reason(self) -> str:
        if self.state == "failed":
            return f"{self.label} could not be started: {self.problem}"
        if self.state == "exited":
            return f"{self.label} has exited ({self.problem}); its tools are unavailable for the rest of this session"
        if self.state == "stopped":
            return f"{self.label} was stopped because the session ended"
        return f"{self.label} is still starting"


def _describe(error: BaseException) -> str:
    """A short human reason, looking through anyio's exception groups."""
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _describe(error.exceptions[0])
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


async def _run_server(
    connection: _ServerConnection,
    *,
    cwd: Path,
    startup_timeout_secs: float,
    errlog: TextIO,
    stop: trio.Event,
) -> None:
    """Own one server's process and MCP session until ``stop``; never raises."""
    import mcp_types
    from mcp import ClientSession, StdioServerParameters, stdio_client

    config = connection.config
    parameters = StdioServerParameters(
        command=config.command, args=list(config.args), env=dict(config.env) or None, cwd=cwd
    )
    try:
        async with (
            stdio_client(parameters, errlog=errlog) as (read_stream, write_stream),
            ClientSession(
                read_stream,
                write_stream,
                client_info=mcp_types.Implementation(name="zeroclaw", version="0.1.0"),
            ) as session,
        ):
            with trio.move_on_after(startup_timeout_secs) as startup:
                await session.initialize()
                connection.remote_tools = await _list_all_tools(session, connection.label)
            if startup.cancelled_caught:
                connection.state = "failed"
                connection.problem = f"it did not finish starting within {startup_timeout_secs:g} s"
                return
            connection.session = session
            connection.state = "ready"
            connection.settled.set()
            logger.info("%s ready with %d tool(s)", connection.label, len(connection.remote_tools))
            await stop.wait()
            if connection.state == "ready":
                connection.state = "stopped"
    except Exception as error:  # contained: a broken server must not take the session down
        if connection.state in ("ready", "exited"):
            if connection.state == "ready":
                connection.state, connection.problem = "exited", _describe(error)
        else:
            connection.state, connection.problem = "failed", _describe(error)
    finally:
        connection.session = None
        if connection.state == "starting":
            connection.state, connection.problem = "failed", "it was stopped while starting"
        if connection.state in ("failed", "exited"):
            logger.warning("%s", connection.unavailable_reason())
        connection.settled.set()
        connection.finished.set()


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
            if error.code != CONNECTION_CLOSED:
                return _tool_error(
                    f"{connection.label} refused `{self.remote_name}`: {error.message}"
                )
            connection.state, connection.problem = "exited", "it exited during a call"
            return _tool_error(
                f"{connection.label} exited while running `{self.remote_name}`; its tools are "
                "unavailable for the rest of this session."
            )
        except Exception as error:  # a transport failure: the connection is gone
            connection.state, connection.problem = "exited", _describe(error)
            return _tool_error(
                f"{connection.label} failed while running `{self.remote_name}` "
                f"({_describe(error)}); its tools are unavailable for the rest of this session."
            )
        return await render_result(result, ctx.uploads_dir)


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


# --- results ------------------------------------------------------------------------------------


def _materialize(uploads_dir: Path, data: bytes, filename: str, mime_type: str) -> str:
    """Write one decoded blob under uploads/ and return its prompt marker (blocking)."""
    path = store_upload(uploads_dir, storage_name(data, filename), data)
    return prompt_marker(mime_type, filename, str(path))


async def _blob_piece(uploads_dir: Path, blob: str, filename: str, mime_type: str | None) -> str:
    try:
        data = decode_blob(blob, max_blob_bytes=DEFAULT_MAX_BLOB_BYTES)
    except InvalidParamsError as error:
        return f"[{filename} not saved: {error}]"
    mime = (mime_type or "").strip() or guess_mime(filename)
    try:
        return await trio.to_thread.run_sync(_materialize, uploads_dir, data, filename, mime)
    except UploadError as error:
        return f"[{filename} not saved: {error}]"


def _media_filename(kind: str, mime_type: str) -> str:
    extension = _EXTENSION_BY_MIME.get(mime_type.strip().lower(), "bin")
    return f"{kind}.{extension}"


async def render_result(result: mcp_types.CallToolResult, uploads_dir: Path) -> ToolOutput:
    """A ``tools/call`` result as the model sees it, blobs saved under ``uploads_dir``."""
    import mcp_types

    pieces: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            pieces.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.BlobResourceContents):
                name = display_name(str(resource.uri))
                pieces.append(
                    await _blob_piece(uploads_dir, resource.blob, name, resource.mime_type)
                )
            else:
                pieces.append(resource.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            name = _media_filename(block.type, block.mime_type)
            pieces.append(await _blob_piece(uploads_dir, block.data, name, block.mime_type))
        elif isinstance(block, mcp_types.ResourceLink):
            pieces.append(f"[Resource: {block.name}] {block.uri}")
    if not pieces and result.structured_content is not None:
        pieces.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = _bounded(PART_SEPARATOR.join(pieces))
    if result.is_error:
        return ToolOutput(text=f"Error: {text or 'the tool reported a failure'}", ok=False)
    return ToolOutput(text=text or "(no output)")


def _bounded(text: str) -> str:
    encoded = text.encode()
    if len(encoded) <= DEFAULT_MAX_TOOL_OUTPUT_BYTES:
        return text
    kept = encoded[:DEFAULT_MAX_TOOL_OUTPUT_BYTES].decode(errors="ignore")
    return (
        f"{kept}\n[output truncated: {len(encoded)} bytes, limit {DEFAULT_MAX_TOOL_OUTPUT_BYTES}]"
    )


# --- the session-facing API -------------------------------------------------------------------


class McpToolset:
    """A session's MCP servers and the tools they offer (see ``start_mcp_tools``)."""

    def __init__(self, connections: Sequence[_ServerConnection], call_timeout_secs: float) -> None:
        self._connections = list(connections)
        self._call_timeout_secs = call_timeout_secs
        self._tools: dict[str, McpTool] | None = None
        self._stop = trio.Event()

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
                    _call_timeout_secs=self._call_timeout_secs,
                )
        if self.ready:
            self._tools = tools
        return tools

    @property
    def problems(self) -> list[str]:
        """One sentence per server that could not start or has exited since."""
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

    async def aclose(self) -> None:
        """``close``, then wait until every server process has ended."""
        self.close()
        for connection in self._connections:
            await connection.finished.wait()


def start_mcp_tools(
    servers: Sequence[McpServerConfig],
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
    for connection in connections:
        nursery.start_soon(
            partial(
                _run_server,
                connection,
                cwd=cwd,
                startup_timeout_secs=startup_timeout_secs,
                errlog=errlog or sys.stderr,
                stop=toolset._stop,
            ),
            name=f"mcp server {connection.config.name}",
        )
    return toolset


@asynccontextmanager
async def open_mcp_tools(
    servers: Sequence[McpServerConfig],
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
