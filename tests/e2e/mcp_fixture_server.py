"""A small stdio MCP server for the tests, built on the official ``mcp`` SDK.

Run as ``python mcp_fixture_server.py [--exit-at-start]``. Its tools cover what the
ZeroClaw MCP bridge must handle: plain text, an embedded base64 blob, a tool error, a
server that dies mid-call, environment and working-directory passing.
"""

from __future__ import annotations

import base64
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import BlobResourceContents, ContentBlock, EmbeddedResource, TextContent

server = MCPServer("fixture")


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


if __name__ == "__main__":
    if "--exit-at-start" in sys.argv:
        sys.exit(5)
    server.run()
