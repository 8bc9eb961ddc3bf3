"""``python -m acp_server``: the same as the ``zeroclaw`` command."""

from __future__ import annotations

from acp_server.cli.launch import main

main()
