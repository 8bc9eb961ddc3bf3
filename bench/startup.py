"""Cold start: spawn → ``initialize`` + ``session/new`` answered, as an editor sees it.

Two commands an editor launches, each timed from ``spawn`` until the ``session/new``
answer is read, ``--runs`` times (median, min and max):

* ``zeroclaw acp`` with a real provider configured (``openai_compatible`` at a local
  address nothing needs to answer: start-up makes no model call);
* ``zeroclaw-acp-bridge`` against a running ``zeroclaw gateway`` (paired; the token given
  through the environment, as an IDE's settings would).

With ``--base DIR`` the same commands from another checkout (``DIR/.venv/bin``) are timed in
the same run, alternating with ours, to compare before and after a change.

Each is timed twice over: with compiled bytecode cached (as after any install: pip and
``uv tool install --compile-bytecode`` write it, and Python itself does on first run; kept
here under a temporary ``PYTHONPYCACHEPREFIX``), and compiling every module from source,
the standard library's too (``PYTHONDONTWRITEBYTECODE=1`` with an empty cache, as in a
container that forbids writing it).

Then each command once more under ``python -X importtime``: the top entries by cumulative
and by self time, of what it imported before ``session/new`` was answered.

Usage: ``uv run python bench/startup.py [--runs 7] [--top 15] [--base /path/to/checkout]``
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import tomli_w
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.support.checkouts import add_base_argument, venv_bin
from bench.support.peer import Peer
from tests.e2e.gateway_harness import run_gateway

from acp_bridge.auth import TOKEN_ENV

EXIT_WAIT_SECS: Final = 10.0
SCRUBBED_ENV: Final = ("OPENROUTER_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    env: dict[str, str]


@dataclass(frozen=True)
class Start:
    wall: float
    """Seconds from spawn to the ``session/new`` answer."""
    cpu: float
    """CPU seconds the process used in all (start, the two answers, exit): steadier than
    the wall time on a machine other work shares."""
    stderr: bytes


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def time_to_session(command: Command, cwd: str, *, importtime: bool = False) -> Start:
    """One start of ``command`` (its stderr kept with ``importtime``)."""
    python_flags = ["-X", "importtime"] if importtime else []
    argv = [command.argv[0], *python_flags, *command.argv[1:]]
    cpu_before = children_cpu()
    start = time.perf_counter()
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if importtime else subprocess.DEVNULL,
        env=command.env,
    )
    stderr = b""
    try:
        peer = Peer(process)
        await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
        elapsed = time.perf_counter() - start
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        if importtime:
            assert process.stderr is not None
            chunks = []
            with trio.move_on_after(EXIT_WAIT_SECS):
                while chunk := await process.stderr.receive_some(1 << 16):
                    chunks.append(chunk)
            stderr = b"".join(chunks)
        with trio.move_on_after(EXIT_WAIT_SECS):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    return Start(elapsed, children_cpu() - cpu_before, stderr)


def top_imports(stderr: bytes, top: int) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """From ``-X importtime`` output: (µs per top-level package, the sum of its modules' own
    times; µs per module, its own time), each the ``top`` largest."""
    per_package: dict[str, int] = {}
    per_module: list[tuple[int, str]] = []
    for line in stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative_us, column = line.removeprefix("import time:").split("|", 2)
        name = column.strip()
        per_module.append((int(self_us), name))
        package = name.split(".")[0]
        per_package[package] = per_package.get(package, 0) + int(self_us)
    by_package = sorted(((us, name) for name, us in per_package.items()), reverse=True)
    return by_package[:top], sorted(per_module, reverse=True)[:top]


def write_acp_config(config_dir: Path) -> None:
    document = {
        "schema_version": 3,
        "providers": {
            "models": {
                "openai_compatible": {
                    "bench": {"model": "fake-model", "uri": "http://127.0.0.1:9/v1"}
                }
            }
        },
        "agents": {
            "coder": {
                "model_provider": "openai_compatible.bench",
                "risk_profile": "default",
                "runtime_profile": "default",
            }
        },
        "risk_profiles": {"default": {"level": "supervised"}},
        "runtime_profiles": {"default": {}},
    }
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.toml").write_text(tomli_w.dumps(document))


def bytecode_env(mode: str, pycache: Path) -> dict[str, str]:
    """The environment for ``mode``: "bytecode" (cached under ``pycache``) or "source".

    "source" points ``PYTHONPYCACHEPREFIX`` at a directory that stays empty (nothing may be
    written to it): without it, whatever ``.pyc`` files happen to sit in one checkout's
    ``__pycache__`` directories (a process started with ``-I`` writes them whatever the
    environment says) would be read by that checkout alone, and the two would not compile
    the same modules."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in (*SCRUBBED_ENV, "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    }
    if mode == "bytecode":
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(pycache.with_name("no-pycache"))
    return env


def commands(
    label: str, venv_bin: Path, env: dict[str, str], gateway_url: str, token: str
) -> list[Command]:
    python = str(venv_bin / "python")
    return [
        Command(f"{label}: zeroclaw acp", [python, str(venv_bin / "zeroclaw"), "acp"], env),
        Command(
            f"{label}: zeroclaw-acp-bridge",
            [python, str(venv_bin / "zeroclaw-acp-bridge"), "--url", gateway_url],
            {**env, TOKEN_ENV: token},
        ),
    ]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="zc-startup-bench-") as tmp:
        config_dir = Path(tmp) / "config"
        write_acp_config(config_dir)
        # A session's cwd may not contain the server's config directory.
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        async with run_gateway(config_dir) as gateway:
            token = await gateway.pair()
            url = gateway.ws_url()
            for mode in args.modes:
                env = bytecode_env(mode, Path(tmp) / "pycache")
                env.update(ZEROCLAW_CONFIG_DIR=str(config_dir), ZEROCLAW_LOG="warning")
                runs = commands("ours", Path(sys.executable).parent, env, url, token)
                if args.base is not None:
                    runs += commands("base", venv_bin(args.base), env, url, token)
                await time_starts(runs, mode, str(workspace), args)
            for command in runs:
                stderr = (await time_to_session(command, str(workspace), importtime=True)).stderr
                by_package, by_module = top_imports(stderr, args.top)
                total = sum(us for us, _ in top_imports(stderr, 10**6)[0]) / 1000
                print(f"\n{command.name} ({args.modes[-1]}): -X importtime, {total:.0f} ms in all")
                print(f"  {'ms by package':<32} ms by module (own time)")
                for (package_us, package), (module_us, module) in zip(
                    by_package, by_module, strict=False
                ):
                    print(
                        f"  {package_us / 1000:7.1f} {package:<24} {module_us / 1000:7.1f} {module}"
                    )


async def time_starts(runs: list[Command], mode: str, cwd: str, args: argparse.Namespace) -> None:
    starts: dict[str, list[Start]] = {command.name: [] for command in runs}
    for command in runs:  # warm the file cache (and write the bytecode) first
        await time_to_session(command, cwd)
    for run_index in range(args.runs):
        shift = run_index % len(runs)
        for command in runs[shift:] + runs[:shift]:
            starts[command.name].append(await time_to_session(command, cwd))
    print(f"\nspawn → initialize + session/new answered, {mode} ({args.runs} runs, alternating)")
    print(f"{'command':<34} {'median ms':>10} {'min-max ms':>14} {'CPU ms, median':>15}")
    for name, values in starts.items():
        walls = [start.wall * 1000 for start in values]
        cpu = statistics.median(start.cpu * 1000 for start in values)
        spread = f"{min(walls):.0f}-{max(walls):.0f}"
        print(f"{name:<34} {statistics.median(walls):>10.0f} {spread:>14} {cpu:>15.0f}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7, help="timed starts per command (>= 5)")
    parser.add_argument(
        "--modes",
        type=lambda text: text.split(","),
        default=["source", "bytecode"],
        help="comma-separated: bytecode (cached .pyc, as installed), source (no .pyc)",
    )
    parser.add_argument("--top", type=int, default=15, help="import-time entries to show")
    add_base_argument(parser, "time the commands")
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse_args())
