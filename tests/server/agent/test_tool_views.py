"""What a tool call's card shows before it runs (``ToolPresentation.view``): absolute
paths inside the jail, the line it starts at, and diffs read from the file as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_server.agent.tools.base import ToolDefinition
from acp_server.agent.tools.files import (
    DIFF_CONTEXT_LINES,
    MAX_WHOLE_FILE_DIFF_BYTES,
    FileEditTool,
    FileReadTool,
    FileWriteTool,
)
from acp_server.agent.tools.registry import definition_for
from acp_server.config import RiskProfileConfig
from acp_server.model import CallView, FileDiff, FileLocation
from acp_server.security import SecurityPolicy


@pytest.fixture
def policy(tmp_path: Path) -> SecurityPolicy:
    workspace = tmp_path / "ws"
    (workspace / ".secrets").mkdir(parents=True)
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    profile = RiskProfileConfig(forbidden_paths=(str(workspace / ".secrets"),))
    return SecurityPolicy(profile, workspace.resolve())


def view(definition: ToolDefinition, arguments: dict[str, Any], policy: SecurityPolicy) -> CallView:
    return definition.presentation.view(arguments, policy, definition.rules)


def test_reads_point_at_the_absolute_file_and_its_first_line(policy: SecurityPolicy) -> None:
    notes = str(policy.workspace / "notes.txt")
    read = FileReadTool.definition
    assert view(read, {"path": "notes.txt", "offset": 2}, policy).locations == (
        FileLocation(notes, 2),
    )
    assert view(read, {"path": "./notes.txt"}, policy).locations == (FileLocation(notes),)
    # Refused paths and arguments that are not paths give the card nothing to point at.
    assert view(read, {"path": ".secrets/key"}, policy) == CallView()
    assert view(read, {"path": "../outside"}, policy) == CallView()
    assert view(read, {"path": 7}, policy) == CallView()
    deliver = definition_for("deliver_file")
    assert view(deliver, {"path": "notes.txt"}, policy).locations == (FileLocation(notes),)


def test_writes_carry_the_text_they_replace(policy: SecurityPolicy) -> None:
    write = FileWriteTool.definition
    root = policy.workspace
    fresh = view(write, {"path": "sub/new.txt", "content": "x"}, policy)
    assert fresh.diffs == (FileDiff(str(root / "sub" / "new.txt"), None, "x"),)
    over = view(write, {"path": "notes.txt", "content": "y"}, policy)
    assert over.diffs == (FileDiff(str(root / "notes.txt"), "one\ntwo\nthree\n", "y"),)
    (root / "blob.bin").write_bytes(b"\x00\x01")
    [binary] = view(write, {"path": "blob.bin", "content": "z"}, policy).diffs
    assert binary.old_text == "(blob.bin: a binary file of 2 bytes before this write)"
    (root / "big.txt").write_text("a" * (MAX_WHOLE_FILE_DIFF_BYTES + 1))
    [big] = view(write, {"path": "big.txt", "content": "z"}, policy).diffs
    assert big.old_text is not None
    assert "too large to show" in big.old_text


def test_an_edit_shows_the_whole_small_file_at_its_changed_line(policy: SecurityPolicy) -> None:
    edit = FileEditTool.definition
    notes = str(policy.workspace / "notes.txt")
    shown = view(edit, {"path": "notes.txt", "old_string": "three", "new_string": "3"}, policy)
    assert shown == CallView(
        diffs=(FileDiff(notes, "one\ntwo\nthree\n", "one\ntwo\n3\n"),),
        locations=(FileLocation(notes, 3),),
    )


def test_an_edit_that_cannot_apply_is_refused_before_anyone_is_asked(
    policy: SecurityPolicy,
) -> None:
    edit = FileEditTool.definition
    missing = view(edit, {"path": "notes.txt", "old_string": "four", "new_string": "4"}, policy)
    assert missing.refusal is not None
    assert missing.refusal.startswith("Error: old_string not found in notes.txt")
    twice = view(edit, {"path": "notes.txt", "old_string": "o", "new_string": "0"}, policy)
    assert twice.refusal is not None
    assert "matches 2 times" in twice.refusal
    gone = view(edit, {"path": "gone.txt", "old_string": "a", "new_string": "b"}, policy)
    assert gone.refusal == "Error: File not found: gone.txt"
    for shown in (missing, twice, gone):
        assert shown.diffs == ()
    # What the tool itself refuses (no change, empty old_string) it reports when it runs.
    same = view(edit, {"path": "notes.txt", "old_string": "one", "new_string": "one"}, policy)
    assert same.refusal is None


@given(
    before=st.integers(min_value=0, max_value=12),
    after=st.integers(min_value=0, max_value=12),
    changed=st.text(alphabet="xy\n", min_size=1, max_size=6),
)
def test_a_large_file_shows_the_changed_lines_with_context(
    tmp_path_factory: pytest.TempPathFactory, before: int, after: int, changed: str
) -> None:
    workspace = tmp_path_factory.mktemp("ws")
    filler = "f" * (MAX_WHOLE_FILE_DIFF_BYTES // 4) + "\n"
    head = "".join(f"b{index}\n" for index in range(before))
    tail = "".join(f"a{index}\n" for index in range(after)) + filler * 6
    old = "<" + changed + ">"
    text = head + old + "\n" + tail
    (workspace / "big.txt").write_text(text)
    policy = SecurityPolicy(RiskProfileConfig(), workspace)
    arguments = {"path": "big.txt", "old_string": old, "new_string": "NEW"}
    shown = view(FileEditTool.definition, arguments, policy)
    [diff] = shown.diffs
    assert diff.old_text is not None
    # The hunk is the file's text around the change, changed the same way: the changed
    # lines with DIFF_CONTEXT_LINES whole lines before (fewer at the top of the file) and
    # after (the rest of the changed line, then whole lines).
    hunk_start = len(head) - diff.old_text.index("<")
    assert text[hunk_start:].startswith(diff.old_text)
    assert diff.new_text == diff.old_text.replace(old, "NEW")
    assert diff.old_text[: diff.old_text.index("<")].count("\n") == min(DIFF_CONTEXT_LINES, before)
    after_change = diff.old_text[diff.old_text.index(">") + 1 :]
    assert after_change.count("\n") == 1 + DIFF_CONTEXT_LINES
    assert after_change.endswith("\n")
    assert len(diff.old_text) < len(text)
    [location] = shown.locations
    assert location.line == before + 1
