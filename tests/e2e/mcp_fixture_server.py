"""A small MCP server for the tests, built on the official ``mcp`` SDK.

Run as ``python mcp_fixture_server.py [--exit-at-start]`` for stdio, or with
``--transport streamable-http|sse [--token SECRET]`` to serve HTTP on 127.0.0.1 at a free
port, printed as the first line of stdout (``listening <url>``). Its tools cover what the
ZeroClaw MCP bridge must handle: plain text, an embedded base64 blob, a tool error, a
server that dies mid-call, environment and working-directory passing; over HTTP also the
headers a call arrived with and a call that only ends when cancelled.

With ``--token`` every MCP request must carry ``Authorization: Bearer <token>`` (else 401);
``--port`` serves on a given port (to come back where a client last saw it).
``GET /stats`` (never behind the token) reports what the HTTP server saw: how many MCP
requests arrived, the calls that
began waiting for a cancel and those cancelled by the client, the MCP sessions the client
ended (streamable HTTP's ``DELETE``) and the SSE streams open now.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import BlobResourceContents, ContentBlock, EmbeddedResource, TextContent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

server = MCPServer("fixture")
STATS: dict[str, Any] = {
    "requests": 0,
    "started": [],
    "cancelled": [],
    "deleted": 0,
    "open_streams": 0,
}


@server.tool(description="Repeat the text back.")
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Produce a file as an embedded base64 resource.", structured_output=False)
def make_file(name: str, content: str, mime_type: str = "text/plain") -> list[ContentBlock]:
    blob = base64.b64encode(content.encode()).decode()
    return [
        TextContent(text=f"made {name}"),
        EmbeddedResource(
            resource=BlobResourceContents(uri=f"file:///{name}", mime_type=mime_type, blob=blob)
        ),
    ]


@server.tool(description="Always fails.")
def fail(reason: str) -> str:
    raise ToolError(reason)


@server.tool(description="Kill this server process in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(description="This server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="The value of one environment variable, or <unset>.")
def getenv(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(description="Report the FIXTURE_GREETING variable and the working directory.")
def environment() -> str:
    return f"{os.environ.get('FIXTURE_GREETING', '<unset>')} in {os.getcwd()}"


@server.tool(description="The value of one HTTP request header of this call, or <none>.")
def header(name: str, ctx: Context) -> str:
    headers = ctx.headers or {}
    return headers.get(name.lower(), "<none>")


@server.tool(description="Run until the client cancels the call.")
async def wait_for_cancel(label: str) -> str:
    STATS["started"].append(label)
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        STATS["cancelled"].append(label)
        raise
    return "unreachable"


async def stats(request: Request) -> Response:
    return JSONResponse(STATS)


server.custom_route("/stats", methods=["GET"])(stats)


class _Gate:
    """Refuses MCP requests without the bearer token; counts DELETEs (session ends)."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/stats":
            STATS["requests"] += 1
            headers = dict(scope["headers"])
            wanted = f"Bearer {self.token}".encode()
            if self.token is not None and headers.get(b"authorization") != wanted:
                await Response("missing or wrong token", status_code=401)(scope, receive, send)
                return
            if scope["method"] == "DELETE":
                STATS["deleted"] += 1
            if scope["method"] == "GET" and scope["path"] == "/sse":
                STATS["open_streams"] += 1
                try:
                    await self.app(scope, receive, send)
                finally:
                    STATS["open_streams"] -= 1
                return
        await self.app(scope, receive, send)


async def serve_http(transport: str, token: str | None, port: int) -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)  # before the line below: a client may connect as soon as it reads it
    port = listener.getsockname()[1]
    if transport == "sse":
        app, path = server.sse_app(), "/sse"
    else:
        app, path = server.streamable_http_app(), "/mcp"
    config = uvicorn.Config(_Gate(app, token), log_level="warning", lifespan="on")
    sys.stdout.write(f"listening http://127.0.0.1:{port}{path}\n")
    sys.stdout.flush()
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit-at-start", action="store_true")
    parser.add_argument("--transport", choices=("stdio", "streamable-http", "sse"), default="stdio")
    parser.add_argument("--token")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    if options.exit_at_start:
        sys.exit(5)
    if options.transport == "stdio":
        server.run()
    else:
        anyio.run(serve_http, options.transport, options.token, options.port)
