"""Where a short prompt turn's time goes: the server and a client in one process, profiled.

``serve_connection`` runs over a real pipe pair with the product's stdio transport and the
offline echo provider (``chunk_delay_ms = 0``), persisting each turn to a SQLite store in
a temporary directory unless ``--in-memory``; a minimal client in the same trio run sends
one-word prompts one after another, as bench/server_turns.py does over a child's pipes.
Run it under pyinstrument to see the split:

    uv run --with pyinstrument pyinstrument -r text bench/profile_short_turn.py --turns 3000

Without a profiler it prints turns/s for the in-process pair (not comparable with
server_turns.py, whose client runs in another process).

``--provider openai`` (or ``anthropic``) puts a real provider on the path instead of the echo
provider: the local model server of bench/provider_turns.py (bench/support/fake_provider.py,
in a thread of this process, answering five words at once) over HTTP, as a user's turn
goes. Its own time shows under the server thread, not the event loop's:

    uv run --with pyinstrument pyinstrument -r text bench/profile_short_turn.py \
        --provider openai --turns 500

``--owner-check-cost`` measures what "one live copy per session" adds to a short turn: the
fencing-epoch read a prompt makes before its turn starts (acp_server/protocol/services/ownership.py,
``check_still_held``). First the read alone
(``current_epoch``, on ``SessionStore`` and through ``AsyncSessionStore``'s worker-thread
hop), then ``--rounds`` rounds of ``--turns`` prompts with the check and as many with it
turned off, interleaved so the noise of a shared machine falls on both alike: the CPU time
and the wall time a turn takes each way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.provider_turns import write_config as write_provider_config
from bench.support.fake_provider import FakeProvider

from acp_core.framing import encode_line
from acp_server.agent.io.http_clients import http_clients
from acp_server.app import open_session_store
from acp_server.config import Config, default_config, load_config
from acp_server.protocol.connection import serve_connection
from acp_server.protocol.services import ownership
from acp_server.protocol.services.context import AcpApp
from acp_server.protocol.stdio import StdioTransport
from acp_server.storage import open_store

PROVIDER_TURNS_PER_SESSION = 10
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


async def _client(
    send: trio.lowlevel.FdStream,
    receive: trio.lowlevel.FdStream,
    cwd: str,
    turns: int,
    agent: str | None = None,
    turns_per_session: int | None = None,
) -> float:
    turns_per_session = turns_per_session or turns
    pending = b""
    next_id = 0

    async def call(method: str, params: dict[str, object]) -> object:
        nonlocal pending, next_id
        next_id += 1
        request = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
        await send.send_all(encode_line(_encode(request)))
        while True:
            data = await receive.receive_some(1 << 16)
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if b'"method"' not in line:
                    message = _decode(line)
                    if message.get("id") == next_id:
                        return message.get("result", message.get("error"))

    await call("initialize", {"protocolVersion": 1})
    elapsed = 0.0
    for first in range(0, turns, turns_per_session):
        new = await call("session/new", {"cwd": cwd, "mcpServers": [], "agentAlias": agent})
        assert isinstance(new, dict)
        short = {"sessionId": new["sessionId"], "prompt": [{"type": "text", "text": "hello"}]}
        start = time.perf_counter()
        for _ in range(min(turns_per_session, turns - first)):
            await call("session/prompt", short)
        elapsed += time.perf_counter() - start
    await send.aclose()
    return elapsed


async def main(turns: int, persist: bool, provider: str | None) -> None:
    elapsed = await short_turns(turns, persist, provider)
    on = f", {provider} provider over HTTP" if provider else ""
    print(f"{turns / elapsed:,.0f} short turns/s ({'persisting' if persist else 'in memory'}{on})")


def _config(root: Path, persist: bool, provider: str | None) -> tuple[Config, FakeProvider | None]:
    if provider is None:
        config = default_config(root, environ={})
        if not persist:
            from msgspec.structs import replace

            config = replace(config, acp=replace(config.acp, session_persistence=False))
        return config, None
    server = FakeProvider(long_words=1)
    write_provider_config(root / "config", server.base_url, persist=persist)
    return load_config(root / "config", environ={}), server


async def short_turns(turns: int, persist: bool, provider: str | None = None) -> float:
    """Seconds ``turns`` one-word prompts take, one after another, in a fresh directory."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config, server = _config(root, persist, provider)
        # The session's cwd is a directory of its own: the server refuses one that holds
        # its config directory (protocol/services/roots.py), and the default config lives in root.
        workspace = root / "workspace"
        workspace.mkdir()
        to_server_r, to_server_w = os.pipe()
        to_client_r, to_client_w = os.pipe()
        store = await open_session_store(config)
        app = AcpApp(config=config, store=store, launch_dir=root)
        transport = StdioTransport(
            trio.lowlevel.FdStream(to_server_r), trio.lowlevel.FdStream(to_client_w)
        )
        elapsed = 0.0
        async with http_clients(), trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, transport, app)
            elapsed = await _client(
                trio.lowlevel.FdStream(to_server_w),
                trio.lowlevel.FdStream(to_client_r),
                str(workspace),
                turns,
                agent=provider,
                # A model call sends the whole history: keep conversations short, as
                # bench/provider_turns.py does.
                turns_per_session=PROVIDER_TURNS_PER_SESSION if provider else None,
            )
        if store is not None:
            await store.aclose()
        if server is not None:
            server.close()
    return elapsed


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered) * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us"


async def epoch_read_alone(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "acp-sessions.db")
        await store.create_session("s1", "default", tmp)
        direct: list[float] = []
        for _ in range(calls):
            start = time.perf_counter()
            store.sync.current_epoch("s1")
            direct.append(time.perf_counter() - start)
        hopped: list[float] = []
        for _ in range(calls):
            start = time.perf_counter()
            await store.current_epoch("s1")
            hopped.append(time.perf_counter() - start)
        await store.aclose()
    print(f"current_epoch, SessionStore:            {_percentiles(direct)}")
    print(f"current_epoch, AsyncSessionStore (hop): {_percentiles(hopped)}")


async def _no_hold_check(*_args: object) -> None:
    await trio.lowlevel.checkpoint()


async def owner_check_cost(turns: int, rounds: int) -> None:
    await epoch_read_alone(5 * turns)
    checked = ownership.check_still_held
    per_turn: dict[bool, list[float]] = {True: [], False: []}
    cpu_per_turn: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for enabled in (True, False):
            ownership.check_still_held = checked if enabled else _no_hold_check  # type: ignore[assignment]
            cpu_start = time.process_time()
            try:
                per_turn[enabled].append(await short_turns(turns, persist=True) / turns)
            finally:
                ownership.check_still_held = checked
            cpu_per_turn[enabled].append((time.process_time() - cpu_start) / turns)
    # CPU time (every thread of the process) is what the check costs a busy server; it is
    # also far less disturbed than wall time by other work on a shared machine.
    cpu_with, cpu_without = (statistics.median(cpu_per_turn[flag]) for flag in (True, False))
    print(
        f"CPU time a short turn, median of {rounds} rounds: with the check"
        f" {cpu_with * 1e6:.0f} us, without {cpu_without * 1e6:.0f} us; the check adds"
        f" {(cpu_with - cpu_without) * 1e6:+.0f} us ({cpu_with / cpu_without - 1:+.1%})"
    )
    for label, pick in (("median", statistics.median), ("best", min)):
        with_check, without = pick(per_turn[True]), pick(per_turn[False])
        print(
            f"short turns, persisting, {label} of {rounds} rounds of {turns}: with the check"
            f" {1 / with_check:,.0f}/s ({with_check * 1e6:.0f} us a turn), without"
            f" {1 / without:,.0f}/s ({without * 1e6:.0f} us); the check adds"
            f" {(with_check - without) * 1e6:+.0f} us a turn ({with_check / without - 1:+.1%})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--in-memory", action="store_true", help="no session store")
    parser.add_argument("--owner-check-cost", action="store_true", help="see the docstring")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--provider", choices=("openai", "anthropic"), default=None, help="see the docstring"
    )
    args = parser.parse_args()
    if args.owner_check_cost:
        trio.run(owner_check_cost, args.turns, args.rounds)
    else:
        trio.run(main, args.turns, not args.in_memory, args.provider)
