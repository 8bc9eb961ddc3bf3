"""`zeroclaw prompt` and `zeroclaw demo`: a terminal client for `zeroclaw acp`."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add the client commands to the `zeroclaw` group."""
