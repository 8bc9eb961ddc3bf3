"""``--base DIR``: run another checkout's commands beside this one's, alternating.

For a before/after comparison in one run (the same machine load for both): make a
pristine checkout, e.g. ``git worktree add ../base main && (cd ../base && uv sync)``, and
pass its directory; its commands are taken from ``DIR/.venv/bin``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_base_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--base",
        type=lambda path: Path(path).resolve(),
        default=None,
        metavar="DIR",
        help=f"also {what} from DIR/.venv/bin (another checkout), alternating",
    )


def venv_bin(checkout: Path) -> Path:
    return checkout / ".venv" / "bin"
