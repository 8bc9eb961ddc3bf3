"""``rawOutput`` keeps the ZeroClaw ACP documentation's shape: the call's result text, a string (the
documentation's ``session/prompt`` example shows ``"rawOutput": "..."``; ``deliver_file``'s is a
short human summary), the same text as ``body``, for every tool, completed or failed
(the editors page under docs/ says what that means in Toad, which wants an object)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.e2e.helpers import open_session, spawn_acp
from tests.e2e.offers_helpers import CEILING_SECS, output_text, run_tools, tool_line
from tests.helpers import echo_config, write_config

pytestmark = pytest.mark.e2e


async def test_every_closing_update_carries_its_text_as_a_string(tmp_path: Path) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config(level="full"))
    workspace = (tmp_path / "ws").resolve()
    workspace.mkdir()
    (workspace / "report.txt").write_text("figures\n")
    with trio.fail_after(CEILING_SECS):
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            finished = await run_tools(
                client,
                session_id,
                tool_line("file_write", {"path": "a.txt", "content": "one\n"}),
                tool_line("file_read", {"path": "a.txt"}),
                tool_line("file_read", {"path": "missing.txt"}),
                tool_line("shell", {"command": "echo hi"}),
                tool_line("deliver_file", {"path": "report.txt"}),
            )
    assert [update["status"] for update in finished] == [
        "completed",
        "completed",
        "failed",
        "completed",
        "completed",
    ]
    for update in finished:
        assert isinstance(update["rawOutput"], str), update
        assert update["rawOutput"] == update["body"]
        assert update["rawOutput"] in output_text(update)
    assert finished[-1]["rawOutput"] == "Delivered report.txt (8 bytes)"
