"""Shared end-to-end helpers: spawn the real console scripts, talk JSON-RPC over pipes.

Typical use (trio test; ``echo_config``, ``write_config`` and ``session_dir`` come from
``tests.helpers``; a session's cwd may not contain the config directory)::

    config_dir = write_config(tmp_path / "cfg", echo_config())
    async with spawn_acp(config_dir) as client:
        init = await client.call("initialize", {"protocolVersion": 1})
        new = await client.call("session/new", {"cwd": str(session_dir(tmp_path))})

``client.call`` collects the notifications that arrive before its response in
``client.notifications`` and answers server → client requests (``session/request_permission``)
with ``on_request``. Raw lines (for malformed-frame tests) go through ``send_raw``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from acp_core.framing import LineDecoder
from tests.jsonrpc_peer import JsonDict as JsonDict
from tests.jsonrpc_peer import JsonRpcPeer, RequestHandler
from tests.ports import unused_port as unused_port

DEFAULT_RECEIVE_TIMEOUT: Final = 20.0
DEFAULT_EXIT_TIMEOUT: Final = 15.0
# Never let a developer's real keys turn a test into a paid API call.
SCRUBBED_ENV: Final = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def console_script(name: str) -> Path:
    """A console script of this venv (``zeroclaw``, ``zeroclaw-acp-bridge``)."""
    return Path(sys.executable).parent / name


def offline_prefix() -> list[str]:
    """The command prefix that runs a child in a network namespace of its own, with no
    route anywhere (``unshare -n``, with a user namespace when not root): a test of
    addresses that must never be connected to sends nothing even if the check regresses."""
    unshare = shutil.which("unshare")
    flags = "-n" if os.geteuid() == 0 else "-rn"
    if unshare is None or subprocess_fails([unshare, flags, "--", "true"]):
        pytest.skip("cannot make a network namespace here (unshare -n)")
    return [unshare, flags, "--"]


def subprocess_fails(argv: Sequence[str]) -> bool:
    import subprocess

    return subprocess.run(argv, capture_output=True, check=False, timeout=30).returncode != 0


def unprivileged_prefix() -> list[str]:
    """The command prefix that makes file modes bind a child even when the tests run as root
    (Linux ``setpriv`` without the capabilities that override them); empty for other users."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def child_env(config_dir: Path | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in SCRUBBED_ENV}
    if config_dir is not None:
        env["ZEROCLAW_CONFIG_DIR"] = str(config_dir)
    env.update(extra or {})
    return env


class RpcPipeClient(JsonRpcPeer):
    """A line-based JSON-RPC peer over a child's stdin/stdout."""

    keep_session_info_apart = True

    def __init__(self, process: trio.Process) -> None:
        super().__init__()
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._decoder = LineDecoder()
        self.raw_lines: list[str] = []  # every stdout line, as received

    async def send_raw(self, line: bytes | str) -> None:
        data = line.encode() if isinstance(line, str) else line
        await self._stdin.send_all(data if data.endswith(b"\n") else data + b"\n")

    async def _next_message(self) -> JsonDict:
        """Raises EOFError when stdout ends."""
        while True:
            line = self._decoder.next_line()
            if line is not None:
                self.raw_lines.append(line)
                parsed: JsonDict = json.loads(line)
                return parsed
            if self._decoder.at_eof:
                raise EOFError("the server closed stdout")
            self._decoder.feed(bytes(await self._stdout.receive_some(65536)))

    async def receive(self, *, within: float = DEFAULT_RECEIVE_TIMEOUT) -> JsonDict:
        """The next message (stashed ones first). Raises EOFError when stdout ends."""
        with trio.fail_after(within):
            return await super().receive()

    async def wait_response(
        self,
        request_id: Any,
        *,
        on_request: RequestHandler | None = None,
        within: float = DEFAULT_RECEIVE_TIMEOUT,
    ) -> JsonDict:
        with trio.fail_after(within):
            return await super().wait_response(request_id, on_request=on_request)

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        on_request: RequestHandler | None = None,
        within: float = DEFAULT_RECEIVE_TIMEOUT,
    ) -> JsonDict:
        request_id = await self.request(method, params)
        return await self.wait_response(request_id, on_request=on_request, within=within)

    async def close_stdin(self) -> None:
        await self._stdin.aclose()

    def titles(self, session_id: str) -> list[JsonDict]:
        """The ``session_info_update`` objects received for ``session_id`` so far."""
        return [
            note["params"]["update"]
            for note in self.session_info
            if note["params"].get("sessionId") == session_id
        ]

    def updates(self, session_id: str | None = None) -> list[JsonDict]:
        """The ``update`` objects of the session/update notifications received so far."""
        return [
            note["params"]["update"]
            for note in self.notifications
            if note.get("method") == "session/update"
            and (session_id is None or note["params"].get("sessionId") == session_id)
        ]


async def show_system_prompt(config_dir: Path, cwd: Path) -> str:
    """What ``zeroclaw prompt --show-system-prompt --cwd CWD`` prints: the system message a
    session in ``cwd`` would send, built without a model call."""
    completed = await trio.run_process(
        [str(console_script("zeroclaw")), "prompt", "--show-system-prompt", "--cwd", str(cwd)],
        env=child_env(config_dir),
        capture_stdout=True,
    )
    return completed.stdout.decode()


def allow_once(request: JsonDict) -> JsonDict:
    return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


def reject_once(request: JsonDict) -> JsonDict:
    return {"outcome": {"outcome": "selected", "optionId": "reject-once"}}


@asynccontextmanager
async def spawn_zeroclaw(
    args: Sequence[str],
    *,
    config_dir: Path | None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    script: str = "zeroclaw",
    prefix: Sequence[str] = (),
) -> AsyncIterator[RpcPipeClient]:
    """Run ``<script> *args`` (behind the command ``prefix``, e.g. ``unshare -n``) with
    pipes for stdin/stdout (stderr is inherited: pytest captures it). On exit stdin is
    closed and the process must exit within a deadline (it is killed otherwise, and the
    test fails)."""
    import subprocess

    process = await trio.lowlevel.open_process(
        [*prefix, str(console_script(script)), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=str(cwd) if cwd is not None else None,
        env=child_env(config_dir, env),
    )
    client = RpcPipeClient(process)
    try:
        yield client
    finally:
        with trio.CancelScope(shield=True):
            try:
                await client.close_stdin()
            except trio.ClosedResourceError:
                pass
            with trio.move_on_after(DEFAULT_EXIT_TIMEOUT) as waited:
                await process.wait()
            if waited.cancelled_caught:
                process.kill()
                await process.wait()
                raise AssertionError(f"{script} {' '.join(args)} did not exit after stdin closed")


def spawn_acp(
    config_dir: Path | None,
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> Any:
    """``zeroclaw acp *args`` with ``ZEROCLAW_CONFIG_DIR=config_dir`` (async context manager)."""
    return spawn_zeroclaw(["acp", *args], config_dir=config_dir, cwd=cwd, env=env, prefix=prefix)


ZED_CLIENT_INFO: Final = {"name": "zed", "version": "0.0.0"}
"""``clientInfo`` of a client that shows permission options by name (Zed's name)."""


async def open_session(
    client: RpcPipeClient,
    cwd: Path,
    *,
    client_info: Mapping[str, Any] | None = None,
    zeroclaw_meta: Mapping[str, Any] | None = None,
    **params: Any,
) -> str:
    """initialize (with ``client_info`` and ``_meta.zeroclaw`` when given) + session/new;
    returns the session id."""
    init_params: JsonDict = {"protocolVersion": 1}
    if client_info is not None:
        init_params["clientInfo"] = dict(client_info)
    if zeroclaw_meta is not None:
        init_params["_meta"] = {"zeroclaw": dict(zeroclaw_meta)}
    init = await client.call("initialize", init_params)
    assert "result" in init, init
    new = await client.call("session/new", {"cwd": str(cwd), **params})
    assert "result" in new, new
    session_id: str = new["result"]["sessionId"]
    return session_id


async def cancel_once_running(client: RpcPipeClient, session_id: str, prompt: str) -> JsonDict:
    """Send ``prompt`` (a turn whose tool call runs until cancelled), send ``session/cancel``
    as soon as a call of it reports ``in_progress``; the prompt's response. What arrives
    meanwhile is kept in ``client.raw_lines`` only."""
    request_id = await client.prompt_request(session_id, prompt)
    seen = len(client.raw_lines)

    def running() -> bool:
        for line in client.raw_lines[seen:]:
            message = json.loads(line)
            params = message.get("params") or {}
            update = params.get("update") or {}
            if (
                message.get("method") == "session/update"
                and params.get("sessionId") == session_id
                and update.get("sessionUpdate") == "tool_call_update"
                and update.get("status") == "in_progress"
            ):
                return True
        return False

    while not running():
        await client.receive()
    await client.notify("session/cancel", {"sessionId": session_id})
    response: JsonDict = await client.wait_response(request_id)
    return response


async def prompt_turns(
    config_dir: Path,
    cwd: Path,
    prompts: Sequence[str],
    *,
    on_request: RequestHandler | None = None,
    between: Any = None,
) -> tuple[RpcPipeClient, str]:
    """``zeroclaw acp``: initialize, session/new in ``cwd``, then one session/prompt per
    text, each of which must end its turn; ``between()`` runs before every prompt but the
    first. Returns the client (its notifications) and the session id."""
    async with spawn_acp(config_dir) as client:
        client.on_request = on_request
        session_id = await open_session(client, cwd)
        for index, text in enumerate(prompts):
            if index and between is not None:
                between()
            response = await client.prompt(session_id, text)
            assert response["result"]["stopReason"] == "end_turn", response
    return client, session_id
