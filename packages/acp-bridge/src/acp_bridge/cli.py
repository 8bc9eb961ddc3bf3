"""The `zeroclaw-acp-bridge` command line."""

from __future__ import annotations

import sys


def main() -> None:
    sys.stderr.write("zeroclaw-acp-bridge: not yet implemented\n")
    raise SystemExit(1)
