"""The stdio transport over in-memory byte streams, and serve_connection through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

from acp_core.errors import RemoteProtocolError
from acp_server.protocol.connection import serve_connection
from acp_server.protocol.services.context import AcpApp
from acp_server.protocol.stdio import StdioTransport
from acp_server.protocol.transport import TransportClosed
from tests.helpers import make_config


def pipes(
    max_line_bytes: int = 1024,
) -> tuple[StdioTransport, trio.abc.SendStream, trio.abc.ReceiveStream]:
    to_server_send, to_server_receive = trio.testing.memory_stream_one_way_pair()
    from_server_send, from_server_receive = trio.testing.memory_stream_one_way_pair()
    transport = StdioTransport(to_server_receive, from_server_send, max_line_bytes=max_line_bytes)
    return transport, to_server_send, from_server_receive


async def test_lines_in_any_chunking_and_eof() -> None:
    transport, client_out, _ = pipes()
    with trio.fail_after(5):
        await client_out.send_all(b'{"a":1}\r\n\n{"b"')
        assert await transport.receive_message() == '{"a":1}'
        await client_out.send_all(b":2}\n")
        assert await transport.receive_message() == '{"b":2}'
        await client_out.send_all(b'{"c":3}')  # no final newline
        await client_out.aclose()
        assert await transport.receive_message() == '{"c":3}'
        assert await transport.receive_message() is None


async def test_oversize_lines_are_reported_once_then_reading_goes_on() -> None:
    transport, client_out, _ = pipes(max_line_bytes=16)
    with trio.fail_after(5):
        await client_out.send_all(b"x" * 100 + b"\n" + b'{"ok":true}\n')
        with pytest.raises(RemoteProtocolError) as raised:
            await transport.receive_message()
        assert raised.value.reply_hint is not None
        assert raised.value.reply_hint.error.code == -32600
        assert await transport.receive_message() == '{"ok":true}'


async def test_frames_are_newline_terminated_and_batched() -> None:
    transport, _, client_in = pipes()
    with trio.fail_after(5):
        await transport.send_message(b'{"a":1}')
        await transport.send_messages([b'{"b":2}', b'{"c":3}'])
        data = await client_in.receive_some(1024)
    assert data.split(b"\n") == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b""]


async def test_a_closed_stdout_is_transport_closed() -> None:
    transport, _, client_in = pipes()
    await client_in.aclose()
    with trio.fail_after(5), pytest.raises(TransportClosed):
        await transport.send_message(b"{}")


async def test_serve_connection_over_stdio_streams(tmp_path: Path) -> None:
    transport, client_out, client_in = pipes()
    app = AcpApp(config=make_config(tmp_path), store=None, launch_dir=tmp_path)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, transport, app)
            await client_out.send_all(b'not json\n{"jsonrpc":"2.0","id":7,"method":"initialize"}\n')
            await client_out.aclose()
            received = b""
            while received.count(b"\n") < 2:
                received += await client_in.receive_some(65536)
    first, second = (json.loads(line) for line in received.splitlines())
    assert first["error"]["code"] == -32700
    assert second["id"] == 7
    assert second["result"]["protocolVersion"] == 1
