"""The real ``zeroclaw-acp-bridge`` process relaying to a gateway built with ``websockets``."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests.bridge.harness import (
    BRIDGE,
    FakeGateway,
    bridge_env,
    jsonrpc_request,
    running_bridge,
    running_gateway,
    write_config,
)

pytestmark = pytest.mark.e2e

TIMEOUT = 20


@pytest.fixture
async def gateway() -> AsyncIterator[FakeGateway]:
    async with running_gateway(FakeGateway()) as gateway:
        yield gateway


@pytest.fixture
def config_dir(tmp_path: Path, gateway: FakeGateway) -> Path:
    config_dir = tmp_path / "zeroclaw"
    write_config(config_dir, gateway.port, require_pairing=False)
    return config_dir


def env(tmp_path: Path) -> dict[str, str]:
    return bridge_env(tmp_path)


async def test_lines_and_frames_are_relayed_byte_for_byte(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    # Odd spacing, key order and non-ASCII text survive untouched in both directions.
    request = '{ "method" : "test/frames", "jsonrpc":"2.0", "id" : 1, "params": {"frames": ['
    frame = '{"jsonrpc":"2.0", "method":"session/update","params":{"text":"h\\u00e9llo ✓ 𝄞"}}'
    request += json.dumps(frame) + "]}}"
    notification = '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"é"}}'
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env(tmp_path)) as bridge:
            await bridge.send_line(request.encode())
            assert await bridge.read_line() == frame.encode()
            reply = await bridge.read_json()
            assert reply["id"] == 1
            await bridge.send_line(notification.encode())
            await gateway.wait_for_frames(2)
            await bridge.close_stdin()
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    assert gateway.frames == [request, notification]
    assert gateway.close_codes == [1000]


async def test_frame_with_raw_newline_is_reserialized_on_one_line(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    pretty = (
        '{\r\n  "jsonrpc": "2.0",\n  "method": "session/update",\n  "params": {"t": "a\\nb"}\n}'
    )
    binary = '{"jsonrpc":"2.0","method":"session/update","params":{"binary":true}}'
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env(tmp_path)) as bridge:
            await bridge.send_line(jsonrpc_request(1, "test/frames", {"frames": [pretty]}))
            first = await bridge.read_line()
            assert first == b'{"jsonrpc":"2.0","method":"session/update","params":{"t":"a\\nb"}}'
            assert (await bridge.read_json())["id"] == 1
            # The gateway answers each request in its own task: one at a time keeps the order.
            await bridge.send_line(
                jsonrpc_request(2, "test/frames", {"frames": [binary], "binary": True})
            )
            assert await bridge.read_line() == binary.encode()
            assert (await bridge.read_json())["id"] == 2
            await bridge.close_stdin()
            assert await bridge.wait() == 0


async def test_bad_lines_are_answered_locally_with_their_id(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    oversized = jsonrpc_request(9, "session/prompt", {"text": "x" * 5000})
    not_utf8 = b'{"jsonrpc":"2.0","id":"u","method":"x","params":{"t":"\xff"}}'
    not_json = b'{"jsonrpc":"2.0","id":7,"method":"x","params":{oops}'
    batch = b"[1,2]"
    oversized_response = b'{"jsonrpc":"2.0","id":"zc-out-0","result":{"t":"' + b"y" * 5000 + b'"}}'
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            "--config-dir", str(config_dir), "--max-message-bytes", "1000", env=env(tmp_path)
        ) as bridge:
            # Sent in one write: each bad line must still get its own answer, in order.
            await bridge.send(b"\n".join([oversized, not_utf8, not_json, batch, b""]))
            errors = [await bridge.read_json() for _ in range(4)]
            assert [(e["id"], e["error"]["code"]) for e in errors] == [
                (9, -32600),
                ("u", -32700),
                (7, -32700),
                (None, -32600),
            ]
            assert "1000-byte line limit" in errors[0]["error"]["message"]
            assert "batches are not supported" in errors[3]["error"]["message"]
            # An over-long *response* is replaced by an error the gateway can match, so the
            # server-side call it answers does not hang.
            await bridge.send_line(oversized_response)
            await gateway.wait_for_frames(1)
            # Relaying goes on.
            await bridge.send_line(jsonrpc_request(10, "test/echo"))
            assert (await bridge.read_json())["id"] == 10
            await bridge.close_stdin()
            assert await bridge.wait() == 0
    received = gateway.received_json()
    assert received[0]["id"] == "zc-out-0"
    assert received[0]["error"]["code"] == -32603
    assert [message.get("method") for message in received[1:]] == ["test/echo"]


async def test_stdin_eof_waits_for_replies_still_owed(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            "--config-dir", str(config_dir), "--log-level", "info", env=env(tmp_path)
        ) as bridge:
            await bridge.send_line(jsonrpc_request("slow", "test/hold"))
            await gateway.wait_for_frames(1)
            await bridge.close_stdin()
            await bridge.wait_for_stderr("stdin closed; waiting up to 10 s for 1 replies")
            gateway.release.set()
            reply = await bridge.read_json()
            assert reply == {
                "jsonrpc": "2.0",
                "id": "slow",
                "result": {"method": "test/hold", "params": {}},
            }
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    assert gateway.close_codes == [1000]


async def test_stdin_eof_grace_expiry_answers_owed_requests(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            "--config-dir", str(config_dir), "--eof-grace", "0.2", env=env(tmp_path)
        ) as bridge:
            await bridge.send_line(jsonrpc_request(3, "test/never"))
            await gateway.wait_for_frames(1)
            await bridge.close_stdin()
            reply = await bridge.read_json()
            assert reply["id"] == 3
            assert reply["error"]["data"] == {
                "bridge": "stdin_closed",
                "method": "test/never",
                "details": reply["error"]["message"],
            }
            assert "no reply within 0.2 s" in reply["error"]["message"]
            assert await bridge.wait() == 0


@pytest.mark.parametrize(
    ("method", "params", "cause"),
    [
        (
            "test/close",
            {"code": 1011, "reason": "boom"},
            "the gateway closed the connection (code 1011: boom)",
        ),
        ("test/abort", {}, "the connection to the gateway was lost"),
    ],
)
async def test_without_reconnect_a_lost_connection_answers_in_flight_requests_and_exits_1(
    gateway: FakeGateway,
    config_dir: Path,
    tmp_path: Path,
    method: str,
    params: dict[str, object],
    cause: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            "--config-dir", str(config_dir), "--no-reconnect", env=env(tmp_path)
        ) as bridge:
            await bridge.send_line(jsonrpc_request(5, "test/never"))
            await gateway.wait_for_frames(1)
            await bridge.send_line(jsonrpc_request(6, method, params))
            errors = [await bridge.read_json(), await bridge.read_json()]
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 1
    assert sorted(error["id"] for error in errors) == [5, 6]
    for error in errors:
        assert cause in error["error"]["message"]
        assert error["error"]["data"]["bridge"] == "connection_lost"
    assert cause in bridge.stderr_text
    assert gateway.url in bridge.stderr_text


async def test_without_reconnect_a_normal_close_is_still_an_error_for_the_ide(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    # The agent vanished under the IDE: exit 1 even for a clean close.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            "--config-dir", str(config_dir), "--no-reconnect", env=env(tmp_path)
        ) as bridge:
            await bridge.send_line(jsonrpc_request(1, "test/close", {"code": 1001}))
            error = await bridge.read_json()
            assert error["id"] == 1
            assert await bridge.wait() == 1
    assert "code 1001" in bridge.stderr_text


async def test_regular_files_as_stdin_and_stdout(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    # `zeroclaw-acp-bridge < requests > replies` (not pipes) uses the threaded stdio path.
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(jsonrpc_request(1, "test/echo") + b"\n" + jsonrpc_request(2, "x"))
    replies = tmp_path / "replies.jsonl"
    with trio.fail_after(TIMEOUT), requests.open("rb") as stdin, replies.open("wb") as stdout:
        result = await trio.run_process(
            ["zeroclaw-acp-bridge", "--config-dir", str(config_dir)],
            executable=str(BRIDGE),
            stdin=stdin,
            stdout=stdout,
            env=env(tmp_path),
            check=False,
        )
    assert result.returncode == 0
    assert sorted(json.loads(line)["id"] for line in replies.read_bytes().splitlines()) == [1, 2]


async def test_sigterm_closes_the_websocket_as_going_away(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env(tmp_path)) as bridge:
            await bridge.send_line(jsonrpc_request(1, "test/echo"))
            await bridge.read_json()
            bridge.process.terminate()
            assert await bridge.wait() == 128 + 15
        await gateway.connection_closed.wait()
    assert gateway.close_codes == [1001]


async def test_stdout_closed_by_the_ide_ends_the_bridge_quietly(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env(tmp_path)) as bridge:
            await bridge.send_line(jsonrpc_request(1, "test/echo"))
            await bridge.read_json()
            await bridge.stdout.aclose()  # the IDE stops reading
            await bridge.send_line(jsonrpc_request(2, "test/echo"))  # its reply cannot go out
            assert await bridge.wait() == 0
        await gateway.connection_closed.wait()
    assert gateway.close_codes == [1000]
    assert "stdout was closed by the client" in bridge.stderr_text


async def test_a_terminal_as_stdin_works(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    # Someone trying the bridge by hand: stdin is a TTY (read in a thread, never switched
    # to non-blocking mode), stdout a pipe.
    controller, terminal = pty.openpty()
    try:
        with trio.fail_after(TIMEOUT):
            process = await trio.lowlevel.open_process(
                [str(BRIDGE), "--config-dir", str(config_dir)],
                stdin=terminal,
                stdout=subprocess.PIPE,
                env=env(tmp_path),
            )
            assert process.stdout is not None
            os.write(controller, jsonrpc_request(1, "test/echo") + b"\n")
            reply = b""
            while not reply.endswith(b"\n"):
                reply += await process.stdout.receive_some(65536)
            assert json.loads(reply)["id"] == 1
            os.write(controller, b"\x04")  # Ctrl-D at the start of a line: end of input
            assert await process.wait() == 0
            await process.stdout.aclose()
    finally:
        os.close(controller)
        os.close(terminal)


async def test_frames_that_are_not_json_rpc_and_duplicate_responses_never_reach_the_ide(
    gateway: FakeGateway, config_dir: Path, tmp_path: Path
) -> None:
    update = '{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}'
    first_answer = '{"jsonrpc":"2.0","id":1,"result":{"first":true}}'
    unreadable_id_error = '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no id"}}'
    hostile = [
        "[1,2]",
        '"just a string"',
        "42",
        '{"jsonrpc":"2.0","id":true,"result":{}}',
        '{"jsonrpc":"2.0","id":{"a":1},"result":{}}',
        '{"jsonrpc":"2.0","id":[1],"error":{"code":1,"message":"x"}}',
        '{"jsonrpc":"2.0","id":null,"result":{}}',
        '{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"both"}}',
        '{"jsonrpc":"2.0","id":false,"method":"fs/read_text_file","params":{}}',
    ]
    frames = [*hostile, update, first_answer, '{"jsonrpc":"2.0","id":1,"result":{"again":1}}']
    frames.append(unreadable_id_error)
    with trio.fail_after(TIMEOUT):
        async with running_bridge("--config-dir", str(config_dir), env=env(tmp_path)) as bridge:
            # The fake gateway sends the frames, then its own (third) answer to request 1.
            await bridge.send_line(jsonrpc_request(1, "test/frames", {"frames": frames}))
            seen = [await bridge.read_line() for _ in range(3)]
            # One request at a time (the gateway answers each in its own task): whatever
            # came after the frames above is on stdout before this reply.
            await bridge.send_line(jsonrpc_request(2, "test/echo"))
            seen.append(await bridge.read_line())
            await bridge.close_stdin()
            assert await bridge.read_remaining_lines() == []
            assert await bridge.wait() == 0
    assert seen[:3] == [update.encode(), first_answer.encode(), unreadable_id_error.encode()]
    assert json.loads(seen[3])["id"] == 2
    dropped = [line for line in bridge.stderr_text.splitlines() if "dropped a frame" in line]
    assert len(dropped) == len(hostile) + 2
    assert sum("a second response to request 1" in line for line in dropped) == 2
