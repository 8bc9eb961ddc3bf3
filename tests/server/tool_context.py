"""A ToolContext for tool tests (``acp_server.testing.tool_context``), recording what tools
send back to the client, and probes for processes a tool started (shared with
tests/e2e/test_tools_e2e.py)."""

from __future__ import annotations

from pathlib import Path

import psutil

from acp_server.testing import Recorder
from acp_server.testing import tool_context as make_context

__all__ = ["Recorder", "make_context", "pids_in", "process_gone"]


def process_gone(pid: int) -> bool:
    """Gone, or a zombie waiting for init to reap it (it runs nothing any more)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def pids_in(path: Path) -> list[int]:
    """The pids a test command wrote to ``path`` (one per line), so far."""
    return [int(word) for word in path.read_text().split()] if path.exists() else []
