"""The ACP Registry's agent schema, loaded at test time, and our entry for it.

Zed and JetBrains discover agents through the ACP Registry (the ``agentclientprotocol/registry``
repository, published at ``cdn.agentclientprotocol.com/registry/v1/latest/``): one
``<id>/agent.json`` per agent, validated by the registry's ``agent.schema.json``. Our entry
lives in ``packaging/acp-registry/zeroclaw/`` in the registry's own layout, so submitting it
is copying that folder.

The schema is never copied into this repository. ``registry_schema()`` reads it from, in
order: ``$ZEROCLAW_ACP_REGISTRY_SCHEMA`` (a path, e.g. into a checkout of the registry), the
cache directory (``$ZEROCLAW_ACP_REGISTRY_CACHE``, default
``~/.cache/zeroclaw-tests/acp-registry``), or a download of the published schema (its own
``$id``) into that cache. When none works the tests that need it skip, saying why; with
``ZEROCLAW_REQUIRE_REGISTRY_TESTS=1`` they fail instead.
"""

from __future__ import annotations

import json
import os
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Final, NoReturn

import pytest

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
ENTRY_DIR: Final = REPO_ROOT / "packaging" / "acp-registry" / "zeroclaw"
MANIFEST: Final = ENTRY_DIR / "agent.json"
ICON: Final = ENTRY_DIR / "icon.svg"
SERVER_PYPROJECT: Final = REPO_ROOT / "packages" / "acp-server" / "pyproject.toml"
WORKSPACE_PYPROJECT: Final = REPO_ROOT / "pyproject.toml"

SCHEMA_URL: Final = "https://cdn.agentclientprotocol.com/registry/v1/latest/agent.schema.json"
SCHEMA_ENV: Final = "ZEROCLAW_ACP_REGISTRY_SCHEMA"
CACHE_ENV: Final = "ZEROCLAW_ACP_REGISTRY_CACHE"
REQUIRE_ENV: Final = "ZEROCLAW_REQUIRE_REGISTRY_TESTS"
DOWNLOAD_TIMEOUT_SECS: Final = 15
MAX_SCHEMA_BYTES: Final = 1024 * 1024


AUTH_CHECK_INITIALIZE: Final = {
    "protocolVersion": 1,
    "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
    "clientCapabilities": {
        "terminal": True,
        "fs": {"readTextFile": True, "writeTextFile": True},
        "_meta": {"terminal_output": True, "terminal-auth": True},
    },
}
"""The ``initialize`` params of the registry's auth check (its ``verify_agents.py
--auth-check``, ``.github/workflows/client.py`` ``run_auth_check``)."""
ACCEPTED_AUTH_TYPES: Final = frozenset({"agent", "terminal"})


def auth_check_failure(initialize_result: dict[str, Any]) -> str | None:
    """Why the registry's auth check refuses an agent's ``initialize`` result (None: it
    passes). Its rule (CONTRIBUTING.md, "Authentication validation"; AUTHENTICATION.md):
    at least one ``authMethods`` entry whose type is ``agent`` or ``terminal``, the type
    read from ``type``, else from a ``_meta`` key ``terminal-auth`` / ``agent-auth``,
    else ``agent``."""
    methods = initialize_result.get("authMethods") or []
    if not methods:
        return "No authMethods in response"
    types = []
    for method in methods:
        kind = method.get("type")
        meta = method.get("_meta")
        if not kind and isinstance(meta, dict):
            kind = (
                "terminal" if "terminal-auth" in meta else "agent" if "agent-auth" in meta else None
            )
        types.append(kind or "agent")
    if not ACCEPTED_AUTH_TYPES & set(types):
        return f"No auth method with type 'agent' or 'terminal'. Found types: {types}"
    return None


def unavailable(what: str, reason: str) -> NoReturn:
    """Skip (or, under ``ZEROCLAW_REQUIRE_REGISTRY_TESTS=1``, fail) with ``reason``."""
    message = f"{what} unavailable: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)")
    pytest.skip(message)


def manifest() -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return entry


def server_project() -> dict[str, Any]:
    """``[project]`` of packages/acp-server/pyproject.toml: the package the entry runs."""
    project: dict[str, Any] = tomllib.loads(SERVER_PYPROJECT.read_text(encoding="utf-8"))["project"]
    return project


def workspace_exclude_newer() -> str:
    """The workspace's ``[tool.uv] exclude-newer``: resolve what the lock could have."""
    document = tomllib.loads(WORKSPACE_PYPROJECT.read_text(encoding="utf-8"))
    value: str = document["tool"]["uv"]["exclude-newer"]
    return value


def _cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "zeroclaw-tests" / "acp-registry"


def _checked(text: str, origin: str) -> dict[str, Any]:
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        unavailable("ACP Registry schema", f"{origin} is not JSON ({exc})")
    if not isinstance(schema, dict) or schema.get("$id") != SCHEMA_URL:
        unavailable("ACP Registry schema", f"{origin} is not the registry's agent schema")
    return schema


def registry_schema() -> dict[str, Any]:
    """The registry's ``agent.schema.json`` (see the module docstring for where from)."""
    configured = os.environ.get(SCHEMA_ENV)
    if configured:
        path = Path(configured)
        if not path.is_file():
            unavailable("ACP Registry schema", f"{SCHEMA_ENV}={configured} is not a file")
        return _checked(path.read_text(encoding="utf-8"), str(path))
    cached = _cache_dir() / "agent.schema.json"
    if cached.is_file():
        return _checked(cached.read_text(encoding="utf-8"), str(cached))
    try:
        with urllib.request.urlopen(SCHEMA_URL, timeout=DOWNLOAD_TIMEOUT_SECS) as response:
            body = response.read(MAX_SCHEMA_BYTES + 1)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        unavailable(
            "ACP Registry schema",
            f"cannot download {SCHEMA_URL} ({exc}); set {SCHEMA_ENV} to the agent.schema.json "
            "of a checkout of agentclientprotocol/registry",
        )
    if len(body) > MAX_SCHEMA_BYTES:
        unavailable("ACP Registry schema", f"{SCHEMA_URL} is larger than {MAX_SCHEMA_BYTES} B")
    schema = _checked(body.decode("utf-8", errors="replace"), SCHEMA_URL)
    cached.parent.mkdir(parents=True, exist_ok=True)
    # One scratch name per process: parallel test workers may download it at once.
    partial = cached.with_suffix(f".partial-{os.getpid()}")
    partial.write_bytes(body)
    partial.replace(cached)
    return schema
