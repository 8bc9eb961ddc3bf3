"""Every frame the agent sends, checked against the official ACP v1 JSON Schema.

The schema is the one the official TypeScript SDK ships (npm ``@agentclientprotocol/sdk``,
``schema/v1/schema.json``). It is installed at test time into a cache directory outside
the repository (``ZEROCLAW_ACP_SCHEMA_CACHE``, default ``~/.cache/zeroclaw-tests``) and
never copied into it. Without npm or the registry the tests that need it skip, saying
why; with ``ZEROCLAW_REQUIRE_SCHEMA_TESTS=1`` (set by ``.ci/run``) they fail instead.

``FrameChecker.check_line`` validates one line the agent wrote:

* a request or notification: its ``params`` against the schema's type for that method
  (``x-method``, handled by the client);
* a response: its ``result`` against the type of the answered method's response, or its
  ``error`` against ``Error``;
* and beyond what JSON Schema says (the ACP schema leaves objects open), no field that
  neither the schema nor ``ZEROCLAW_EXTRA_FIELDS`` (the fields the ZeroClaw ACP docs name)
  has: ACP forbids custom fields at the root of its types (they go in ``_meta``);
* no ``null`` for an optional field (it is omitted), but where ``NULL_MEANS_SOMETHING``.

A method only ACP's unstable schema defines (``session/fork``) is checked against that
schema (``schema.unstable.json`` of the same package) when the checker is given it; methods
neither defines (``session/stop``, ``_zeroclaw/...``) only as JSON-RPC 2.0 envelopes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

SDK_PACKAGE: Final = "@agentclientprotocol/sdk"
SDK_VERSION: Final = "2.4.0"
SCHEMA_IN_PACKAGE: Final = Path("node_modules/@agentclientprotocol/sdk/schema/v1/schema.json")
REQUIRE_ENV: Final = "ZEROCLAW_REQUIRE_SCHEMA_TESTS"
CACHE_ENV: Final = "ZEROCLAW_ACP_SCHEMA_CACHE"
NPM_TIMEOUT_SECS: Final = 300

ZEROCLAW_EXTRA_FIELDS: Final = frozenset(
    {
        # session/new result: the session's canonical workspace (the ZeroClaw ACP documentation, "session/new").
        ("NewSessionResponse", "workspaceDir"),
        # session/fork result (ACP's unstable schema): the fork is shaped as a new session.
        ("ForkSessionResponse", "workspaceDir"),
        # session/prompt result: the session id and the turn's final text (the ZeroClaw ACP documentation).
        ("PromptResponse", "sessionId"),
        ("PromptResponse", "content"),
        # session/prompt result: the turn's token counts, ACP's PromptResponse.usage, which
        # the SDK's schema/v1/schema.unstable.json defines and editors read.
        ("PromptResponse", "usage"),
        # initialize: ACP's sessionCapabilities.fork, of the same unstable schema; the
        # session/fork it announces is checked against that schema's types.
        ("SessionCapabilities", "fork"),
        # tool_call_update: the short result text beside rawOutput (the ZeroClaw ACP documentation, deliver_file).
        ("ToolCallUpdate", "body"),
    }
)
"""``(schema type, field)`` pairs the ZeroClaw ACP docs add to ACP types, and the one
fields of ACP's unstable schema we send (the prompt result's ``usage``,
``sessionCapabilities.fork``)."""

NULL_MEANS_SOMETHING: Final = frozenset(
    {
        # A new file's diff: ACP's Diff.oldText is "None for new files", and Toad previews
        # a new file only when the key is present.
        ("Diff", "oldText"),
    }
)
"""``(schema type, field)`` pairs where we send ``null`` on purpose. Any other optional
field is omitted when it has no value, never ``null``: Lua clients decode ``null`` as a
truthy value (CodeCompanion.nvim's ``/resume`` failed on a ``"title": null``)."""


def _cache_dir() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "zeroclaw-tests" / f"acp-sdk-{SDK_VERSION}"


def _unavailable(reason: str, what: str = "ACP schema") -> None:
    """Skip (or, under ``ZEROCLAW_REQUIRE_SCHEMA_TESTS=1``, fail) with ``reason``."""
    message = f"{what} unavailable: {reason}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{message} ({REQUIRE_ENV}=1)")
    pytest.skip(message)


@contextmanager
def _install_lock(cache: Path) -> Iterator[None]:
    """Held while one test process installs the package: pytest-xdist workers that need the
    schema at once wait for the first one's install instead of running npm into one
    directory together."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    with (cache.parent / f"{cache.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install_schema() -> Path:
    """The path of ``schema/v1/schema.json`` of the SDK, installing the package into the
    cache directory with npm when it is not there yet."""
    cache = _cache_dir()
    npm_install(cache, [f"{SDK_PACKAGE}@{SDK_VERSION}"], cache / SCHEMA_IN_PACKAGE, "ACP schema")
    return cache / SCHEMA_IN_PACKAGE


def npm_install(cache: Path, specs: list[str], installed: Path, what: str) -> None:
    """``npm install`` ``specs`` into ``cache`` (never the repository) unless ``installed``
    is there already; skips or fails (see ``_unavailable``) when npm cannot. The install
    goes into a scratch directory renamed into place, under a file lock, so parallel
    pytest-xdist workers wait for one install and an interrupted one leaves nothing half
    written."""
    if installed.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        _unavailable(f"npm is not on PATH (it installs {' '.join(specs)})", what)
    with _install_lock(cache):
        if not installed.exists():  # another worker may have installed it meanwhile
            _npm_install(str(npm), cache, specs, installed.relative_to(cache), what)


def _npm_install(npm: str, cache: Path, specs: list[str], installed: Path, what: str) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f"{cache.name}.partial-", dir=cache.parent))
    command = [
        npm,
        "install",
        "--prefix",
        str(scratch),
        "--no-save",
        "--no-package-lock",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
        *specs,
    ]
    wanted = " ".join(specs)
    try:
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=NPM_TIMEOUT_SECS, check=False
            )
        except subprocess.TimeoutExpired:
            _unavailable(f"`npm install {wanted}` took over {NPM_TIMEOUT_SECS} s", what)
        if done.returncode != 0 or not (scratch / installed).exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            _unavailable(
                f"`npm install {wanted}` failed (exit {done.returncode}): " + " | ".join(tail),
                what,
            )
        if cache.exists():  # an earlier, interrupted layout without the package
            shutil.rmtree(cache)
        scratch.rename(cache)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unstable_schema_path(schema_path: Path) -> Path:
    """``schema.unstable.json``, beside the ``schema.json`` ``install_schema`` returned."""
    return schema_path.with_name("schema.unstable.json")


@dataclass(frozen=True, slots=True)
class Violation:
    """One problem with a frame: where (a JSON path) and what."""

    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class AcpSchema:
    """The ACP v1 schema: its type definitions, by name, and validators for them."""

    root: dict[str, Any]
    defs: dict[str, Any] = field(init=False)
    _validators: dict[int, Draft202012Validator] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.defs = self.root["$defs"]

    @classmethod
    def load(cls, path: Path) -> AcpSchema:
        schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return cls(schema)

    def type_for(self, method: str, *, side: str, suffixes: tuple[str, ...]) -> str | None:
        """The name of the type for ``method`` handled by ``side`` (``x-method`` /
        ``x-side``) whose name ends with one of ``suffixes``; None when ACP has none."""
        for name, definition in self.defs.items():
            if (
                definition.get("x-method") == method
                and definition.get("x-side") == side
                and name.endswith(suffixes)
            ):
                return name
        return None

    def validator(self, node: Mapping[str, Any]) -> Draft202012Validator:
        """A validator for ``node``, a part of the schema (it lives as long as the schema,
        so its ``id`` names it)."""
        found = self._validators.get(id(node))
        if found is None:
            found = Draft202012Validator({"$defs": self.defs, **node})
            self._validators[id(node)] = found
        return found

    def errors(self, instance: Any, type_name: str, where: str) -> list[Violation]:
        """Schema errors and fields outside the schema of ``instance`` as ``type_name``."""
        node = self.defs[type_name]
        found = []
        for error in self.validator(node).iter_errors(instance):
            detail = _deepest(error)
            path = "".join(f"[{part!r}]" for part in detail.absolute_path)
            found.append(Violation(where + path, detail.message))
        if not found:
            found.extend(self._extra_fields(instance, node, where, type_name))
        return found

    # -- fields outside the schema ------------------------------------------------------

    def _in_place(
        self, node: Mapping[str, Any], instance: Any, owner: str
    ) -> Iterator[tuple[Any, str]]:
        """Every schema node that applies to ``instance`` where ``node`` does, with the
        type it belongs to: ``$ref`` targets, ``allOf`` parts and the ``anyOf`` /
        ``oneOf`` branches ``instance`` is valid against."""
        stack: list[tuple[Any, str]] = [(node, owner)]
        while stack:
            current, owner = stack.pop()
            if not isinstance(current, Mapping):
                continue
            yield current, owner
            reference = current.get("$ref")
            if isinstance(reference, str):
                name = reference.removeprefix("#/$defs/")
                stack.append((self.defs[name], name))
            stack.extend((part, owner) for part in current.get("allOf", ()))
            for key in ("anyOf", "oneOf"):
                for branch in current.get(key, ()):
                    if self.validator(branch).is_valid(instance):
                        stack.append((branch, owner))

    def _extra_fields(
        self, instance: Any, node: Mapping[str, Any], where: str, owner: str = ""
    ) -> list[Violation]:
        nodes = list(self._in_place(node, instance, owner))
        found: list[Violation] = []
        if isinstance(instance, dict):
            properties: dict[str, Any] = {}
            owners: set[str] = set()
            required: set[str] = set()
            open_object = False
            for current, owner in nodes:
                for name, schema in current.get("properties", {}).items():
                    properties.setdefault(name, schema)
                    owners.add(owner)
                required.update(current.get("required", ()))
                extra = current.get("additionalProperties")
                if extra is True or isinstance(extra, Mapping):
                    open_object = True
            if not properties:
                open_object = True  # a free-form value (rawInput, rawOutput, error data)
            for key, value in instance.items():
                if (
                    value is None
                    and key in properties
                    and key not in required
                    and not any((owner, key) in NULL_MEANS_SOMETHING for owner in owners)
                ):
                    types = ", ".join(sorted(owners)) or "?"
                    found.append(
                        Violation(f"{where}.{key}", f"null for optional {types}.{key}: omit it")
                    )
                elif key in properties:
                    found.extend(self._extra_fields(value, properties[key], f"{where}.{key}"))
                elif not open_object and not any(
                    (owner, key) in ZEROCLAW_EXTRA_FIELDS for owner in owners
                ):
                    types = ", ".join(sorted(owners)) or "?"
                    found.append(Violation(f"{where}.{key}", f"not a field of {types}"))
        elif isinstance(instance, list):
            items = [current["items"] for current, _ in nodes if "items" in current]
            if items:
                for index, value in enumerate(instance):
                    found.extend(self._extra_fields(value, items[0], f"{where}[{index}]"))
        return found


def _deepest(error: ValidationError) -> ValidationError:
    """Inside ``anyOf`` branches, the error that got furthest into the instance: it says
    where the frame went wrong, not just "valid under none of the given schemas"."""
    while error.context:
        error = max(error.context, key=lambda branch: len(branch.absolute_path))
    return error


class FrameChecker:
    """Checks every line the agent writes; remembers the client's requests so that a
    response is checked against the type of the method it answers."""

    def __init__(self, schema: AcpSchema, unstable: AcpSchema | None = None) -> None:
        self.schema = schema
        self.unstable = unstable
        self.client_requests: dict[Any, str] = {}
        self.checked = 0

    def client_sent(self, message: Mapping[str, Any]) -> None:
        """Note a request the client sent (its id and method)."""
        if "method" in message and "id" in message:
            self.client_requests[message["id"]] = message["method"]

    def check_line(self, line: str) -> list[Violation]:
        frame = json.loads(line)
        self.checked += 1
        if not isinstance(frame, dict) or frame.get("jsonrpc") != "2.0":
            return [Violation("$", 'not a JSON-RPC 2.0 object ("jsonrpc": "2.0")')]
        method = frame.get("method")
        if isinstance(method, str):
            suffixes = ("Request",) if "id" in frame else ("Notification",)
            type_name = self.schema.type_for(method, side="client", suffixes=suffixes)
            if type_name is None:
                return []
            return self.schema.errors(frame.get("params"), type_name, f"{method}.params")
        if "error" in frame:
            return self.schema.errors(frame["error"], "Error", "error")
        answered = self.client_requests.get(frame.get("id"))
        if answered is None:
            return [Violation("$.id", f"answers no request the client sent: {frame.get('id')!r}")]
        for schema in (self.schema, self.unstable):
            if schema is None:
                continue
            type_name = schema.type_for(answered, side="agent", suffixes=("Response",))
            if type_name is not None:
                return schema.errors(frame.get("result"), type_name, f"{answered}.result")
        return []
