"""The file tools open the file they checked, through a real `zeroclaw acp`.

A process the test starts (standing in for a command the model left running) keeps
swapping a workspace directory with a symbolic link to a directory outside the jail,
while the echo provider's ``/tool`` directive calls file_read, deliver_file,
content_search and glob_search on paths below it, many times. The jail's check may see the
real directory and the open the link: no call may ever return, list or deliver what is
outside. (glob_search's window is the narrowest, a listing between two checks:
tests/server/agent/test_tools_swap_race.py races it many more times in process.)
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from tests.e2e.helpers import allow_once, open_session, spawn_acp
from tests.helpers import echo_config, swapping_directory, write_config

pytestmark = pytest.mark.e2e

SECRET: Final = "OUTSIDE-SECRET-7f3a"
INSIDE: Final = "inside-text"
CALLS_PER_PROMPT: Final = 40
PROMPTS: Final = 8
"""320 calls of each tool: main leaked within about a hundred."""
FILE_NAMES: Final = ("key.txt", *(f"more-{number}.txt" for number in range(30)))
"""The same names inside and outside: each file a search opens is one more chance to race."""
SWAPPER_MAX_SECS: Final = 120
"""The swapper stops by itself after this long even if the test dies without killing it."""


def _finished_calls(updates: list[dict[str, Any]]) -> list[str]:
    """What each finished call showed: its output and content, any embedded file decoded."""
    shown: list[str] = []
    for update in updates:
        if update["sessionUpdate"] != "tool_call_update":
            continue
        if update.get("status") not in ("completed", "failed"):
            continue
        parts = [json.dumps([update.get("rawOutput"), update.get("content")])]
        for block in update.get("content") or ():
            resource = block.get("content", {}).get("resource", {})
            if "blob" in resource:
                parts.append(base64.b64decode(resource["blob"]).decode(errors="replace"))
        shown.append("\n".join(parts))
    return shown


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("file_read", {"path": "d/key.txt"}),
        ("deliver_file", {"path": "d/key.txt"}),
        ("content_search", {"pattern": "SECRET|inside", "path": "d"}),
        ("content_search", {"pattern": "SECRET|inside"}),
        ("glob_search", {"pattern": "d/*"}),
    ],
)
async def test_a_directory_swapped_for_a_link_never_reaches_outside(
    tmp_path: Path, tool: str, arguments: dict[str, str]
) -> None:
    config_dir = write_config(tmp_path / "cfg", echo_config())
    workspace = tmp_path / "ws"
    (workspace / "d.real").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in FILE_NAMES:
        (workspace / "d.real" / name).write_text(f"{INSIDE}\n")
        (outside / name).write_text(f"{SECRET}\n")
    (outside / f"{SECRET}.txt").write_text(f"{SECRET}\n")  # what glob_search would list
    prompt = "\n".join([f"/tool {tool} {json.dumps(arguments)}"] * CALLS_PER_PROMPT)
    swapping = swapping_directory(workspace, outside, max_secs=SWAPPER_MAX_SECS)
    with trio.fail_after(SWAPPER_MAX_SECS), swapping as swapper:
        async with spawn_acp(config_dir) as client:
            session_id = await open_session(client, workspace)
            for _ in range(PROMPTS):
                response = await client.prompt(
                    session_id, prompt, on_request=allow_once, within=60.0
                )
                assert response["result"]["stopReason"] == "end_turn", response
        assert swapper.poll() is None, "the swapper stopped early: the race was not run"
    shown = _finished_calls(client.updates(session_id))
    assert len(shown) == CALLS_PER_PROMPT * PROMPTS
    leaked = [text for text in shown if SECRET in text]
    assert leaked == [], f"{len(leaked)} calls reached outside the jail, e.g. {leaked[0]}"
    if tool != "glob_search":  # the race was real: calls did read the inside files
        assert any(INSIDE in text for text in shown)
