"""Helpers every test folder shares: waiting on a real condition, and the config builder.

``echo_config`` is the one builder of a ``config.toml`` document (one agent ``echo`` on the
offline echo provider, options for the settings tests vary). ``write_config`` writes such a
document into a config directory, as the `zeroclaw` commands read it; ``make_config`` writes
it and reads it back through the real loader, for tests that run the server in memory.

``poll_until`` waits for a condition nothing can notify a test about (another process's
state, a file appearing, a server's /health counter), up to a deadline.

``swapping_directory`` runs the process that races the file tools: it keeps swapping a
workspace directory with a symbolic link to outside.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest
import tomli_w
import trio

from acp_server.config import Config, load_config

JsonDict = dict[str, Any]

POLL_STEP_SECS: Final = 0.02
"""How often ``poll_until`` looks at its condition."""
DEFAULT_POLL_DEADLINE_SECS: Final = 10.0

TIMING_SENSITIVE: Final = pytest.mark.xdist_group("timing")
"""For a test that measures a process's memory or holds a real-time deadline of a few
seconds: under pytest-xdist (``--dist loadgroup``) all of them run one after another on one
worker, so that none of them is the load that slows another down."""

ECHO_AGENT: Final = "echo"
"""The alias of the agent ``echo_config`` always defines (unless ``agents`` replaces it)."""


async def poll_until(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    within: float = DEFAULT_POLL_DEADLINE_SECS,
) -> None:
    """Return as soon as ``condition()`` (sync or async) holds; look every ``POLL_STEP_SECS``.

    Raises:
        trio.TooSlowError: it did not hold within ``within`` seconds.
    """
    with trio.fail_after(within):
        while True:
            outcome = condition()
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if outcome:
                return
            await trio.sleep(POLL_STEP_SECS)


# Keeps `d` alternately a real directory, missing and a link: each rename is atomic, so a
# check may see the real directory and the open that follows it the link.
_SWAPPER: Final = """
import os, sys, time
os.chdir(sys.argv[1])
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    os.rename("d.real", "d")
    os.rename("d", "d.real")
    os.rename("d.link", "d")
    os.rename("d", "d.link")
"""


@contextmanager
def swapping_directory(
    workspace: Path, outside: Path, *, max_secs: float
) -> Iterator[subprocess.Popen[bytes]]:
    """A process that keeps making ``workspace/d`` the directory ``workspace/d.real`` (which
    the caller made), nothing, and a symbolic link to ``outside``, until the block ends (or
    ``max_secs`` pass, should the test die without ending it)."""
    (workspace / "d.link").symlink_to(outside)
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(workspace), str(max_secs)])
    try:
        yield swapper
    finally:
        swapper.kill()
        swapper.wait()


def echo_config(
    *,
    chunk_delay_ms: int = 0,
    level: str = "supervised",
    max_sessions: int | None = None,
    session_timeout_secs: int | None = None,
    default_agent: str | None = None,
    providers: Mapping[str, Mapping[str, Any]] | None = None,
    agents: Mapping[str, Mapping[str, Any]] | None = None,
    extra_agents: Mapping[str, Mapping[str, Any]] | None = None,
    risk: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
) -> JsonDict:
    """A config.toml document with the agent ``echo`` on the offline echo provider.

    ``providers`` adds ``[providers.models.<type>]`` tables (``{type: {alias: entry}}``)
    next to ``echo.default``. ``agents`` replaces the agent table (each body gets the echo
    provider and the default risk and runtime profiles unless it names its own);
    ``extra_agents`` is added next to ``echo`` as given.
    """
    acp: JsonDict = {}
    if max_sessions is not None:
        acp["max_sessions"] = max_sessions
    if session_timeout_secs is not None:
        acp["session_timeout_secs"] = session_timeout_secs
    if default_agent is not None:
        acp["default_agent"] = default_agent
    profiles = {"risk_profile": "default", "runtime_profile": "default"}
    base_agents = agents if agents is not None else {ECHO_AGENT: {}}
    table: JsonDict = {
        alias: {"model_provider": "echo.default", **profiles, **body}
        for alias, body in base_agents.items()
    }
    table.update({alias: dict(body) for alias, body in (extra_agents or {}).items()})
    document: JsonDict = {
        "schema_version": 3,
        "providers": {
            "models": {
                "echo": {"default": {"model": "echo", "chunk_delay_ms": chunk_delay_ms}},
                **{kind: dict(tables) for kind, tables in (providers or {}).items()},
            }
        },
        "agents": table,
        "risk_profiles": {"default": {"level": level, **(risk or {})}},
        "runtime_profiles": {"default": dict(runtime or {})},
    }
    if acp:
        document["acp"] = acp
    return document


def write_config(config_dir: Path, document: Mapping[str, Any] | str) -> Path:
    """Write ``config_dir/config.toml`` (a TOML string or a document) and return the dir."""
    config_dir.mkdir(parents=True, exist_ok=True)
    text = document if isinstance(document, str) else tomli_w.dumps(dict(document))
    (config_dir / "config.toml").write_text(text, encoding="utf-8")
    return config_dir


def session_dir(base: Path) -> Path:
    """``base / "ws"``, created: a session cwd beside the config directory that
    ``make_config(base)`` and ``write_config(base, ...)`` fill (config.toml, data/). A
    session root may not contain the server's own files (security/grants.py)."""
    path = base / "ws"
    path.mkdir(parents=True, exist_ok=True)
    return path


def make_config(config_dir: Path, **options: Any) -> Config:
    """``echo_config(**options)`` written to ``config_dir`` and read by the real loader
    (no environment: a developer's API keys or overrides never change a test)."""
    return load_config(write_config(config_dir, echo_config(**options)), environ={})


def rpc_error(code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error object as the server sends it: ``data.details`` repeats the message
    (ACP clients such as Toad show only that)."""
    return {"code": code, "message": message, "data": {"details": message}}
