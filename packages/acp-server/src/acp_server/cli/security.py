"""``zeroclaw security status [--json]``: the OS sandbox posture of each risk profile, the
server's private paths and whether that posture hides them from shell commands, and the
availability of each backend on this machine (with the reason when unavailable)."""

from __future__ import annotations

import json

import click

from acp_core.jsonrpc import JsonValue
from acp_server.cli.main import CliState
from acp_server.config import Config
from acp_server.security.sandbox import SandboxPosture, resolve_posture, system_probe
from acp_server.security.sandbox.posture import ABSTRACT_SOCKETS_SAID


@click.group("security")
def security_command() -> None:
    """The security posture of this configuration on this machine."""


@security_command.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_obj
def status_command(state: CliState, as_json: bool) -> None:
    """Each risk profile's shell sandbox (requested, active, why it fell back), whether its
    shell commands are kept from the server's own files (config and data directories, TLS
    key, the server user's home), and which sandbox backends work here. Exits 0; a profile
    that requires an unavailable sandbox is shown as refusing shell commands."""
    config = state.load()
    probe = system_probe()
    backends = probe.all()
    profiles = {
        name: resolve_posture(config.risk_profiles[name], probe)
        for name in sorted(config.risk_profiles)
    }
    if as_json:
        document: dict[str, JsonValue] = {
            "backends": [
                {"name": status.name, "available": status.available, "detail": status.detail}
                for status in backends
            ],
            "riskProfiles": {
                name: {**posture.meta(), "serverFiles": _server_files_json(config, name, posture)}
                for name, posture in profiles.items()
            },
        }
        click.echo(json.dumps(document, indent=2))
        return
    click.echo("sandbox backends:")
    for status in backends:
        mark = "available" if status.available else "unavailable"
        click.echo(f"  {status.name:<11} {mark}: {status.detail}")
    click.echo("risk profiles:")
    for name, posture in profiles.items():
        click.echo(f"  {name}: {posture.describe()}")
        said = ABSTRACT_SOCKETS_SAID[posture.abstract_sockets]
        click.echo(f"    the host's abstract Unix sockets (D-Bus, X11, IDE helpers): {said}")
        listed = ", ".join(
            f"{item.label} {item.path}" for item in config.risk_profiles[name].private_paths
        )
        hidden = "hidden" if posture.hides_private_paths else f"NOT hidden ({posture.active})"
        click.echo(f"    the server's own files, {hidden} from shell commands: {listed}")


def _server_files_json(config: Config, name: str, posture: SandboxPosture) -> JsonValue:
    """The profile's private paths and whether its posture hides them from shell commands
    (the file tools refuse them under every posture)."""
    paths: list[JsonValue] = [
        {"label": item.label, "path": str(item.path)}
        for item in config.risk_profiles[name].private_paths
    ]
    return {"hidden": posture.hides_private_paths, "paths": paths}
