"""Our ACP Registry entry (packaging/acp-registry/zeroclaw/): valid against the registry's
own schema, within the rules its CI applies, and in step with the package it starts.

The rules beyond the schema are the ones the registry's CONTRIBUTING.md ("Validation")
lists for every submission: the id names the entry's directory, the version is x.y.z, a
uvx package is pinned to exactly that version (never "latest"), and the icon is a square
16x16 SVG drawn only in ``currentColor``.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from typing import Any

from jsonschema import Draft7Validator

from tests.acp_registry import (
    ENTRY_DIR,
    ICON,
    auth_check_failure,
    manifest,
    registry_schema,
    server_project,
)

SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
ALLOWED_PAINTS = {"currentcolor", "none", "inherit"}


def test_the_entry_is_valid_against_the_registry_schema() -> None:
    schema = registry_schema()
    Draft7Validator.check_schema(schema)
    errors = sorted(Draft7Validator(schema).iter_errors(manifest()), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    # The fields editors show in their agent lists are all there.
    assert {"id", "name", "description", "version", "license", "icon", "distribution"} <= set(
        manifest()
    )


def test_the_entry_follows_the_registry_rules() -> None:
    entry = manifest()
    assert entry["id"] == ENTRY_DIR.name
    assert re.fullmatch(r"[a-z][a-z0-9-]*", entry["id"])
    assert SEMVER.fullmatch(entry["version"])
    assert entry["icon"] == f"./{ICON.name}"
    assert set(entry["distribution"]) == {"uvx"}
    assert "latest" not in entry["distribution"]["uvx"]["package"].lower()


def test_the_uvx_command_starts_zeroclaw_acp_from_this_version_of_the_package() -> None:
    """The registry runs ``uvx <package> <args>``; uvx runs the executable named like the
    package, which acp-server provides as the same command as ``zeroclaw``."""
    entry = manifest()
    project = server_project()
    uvx = entry["distribution"]["uvx"]
    assert uvx["package"] == f"{project['name']}=={project['version']}"
    assert uvx["args"] == ["acp"]
    assert project["scripts"][project["name"]] == project["scripts"]["zeroclaw"]
    # In step: one version for the entry, the pyproject and the installed package.
    assert entry["version"] == project["version"] == version(project["name"])
    # The license the entry states is the package's (none declared: not open source yet).
    assert entry["license"] == project.get("license", "proprietary")


def test_the_icon_is_a_16px_square_drawn_in_current_color() -> None:
    svg = ICON.read_text(encoding="utf-8")
    root = re.search(r"<svg\b[^>]*>", svg)
    assert root is not None
    width = re.search(r'\swidth="(\d+)"', root.group(0))
    height = re.search(r'\sheight="(\d+)"', root.group(0))
    assert width is not None
    assert height is not None
    assert (width.group(1), height.group(1)) == ("16", "16")
    assert 'viewBox="0 0 16 16"' in root.group(0)
    paints = re.findall(r'\b(?:fill|stroke)\s*=\s*"([^"]*)"', svg)
    paints += re.findall(r"\b(?:fill|stroke)\s*:\s*([^;\"]+)", svg)
    assert paints
    assert {paint.strip().lower() for paint in paints} <= ALLOWED_PAINTS
    assert "currentColor" in svg


def test_the_agent_offers_an_auth_method_the_registry_check_accepts() -> None:
    """The registry lists only agents whose ``initialize`` offers an ``agent`` or
    ``terminal`` auth method to its check (which enables terminal auth); ours is the
    terminal setup, whose args name a command the entry's executable has."""
    from acp_server.cli.main import cli
    from acp_server.protocol.services.auth_methods import auth_methods

    offered: list[dict[str, Any]] = json.loads(json.dumps(auth_methods(terminal_auth=True)))
    assert auth_check_failure({"authMethods": offered}) is None
    [method] = offered
    assert method["type"] == "terminal"
    assert method["args"][0] in cli.commands
    # ACP: a terminal method only for a client that can run one; the check alone fails then.
    assert auth_check_failure({"authMethods": auth_methods(terminal_auth=False)}) is not None
