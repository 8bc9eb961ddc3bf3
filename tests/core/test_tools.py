from __future__ import annotations

import pytest

from acp_core.tools import approval_kind, is_file_edit_tool, tool_kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("shell", "execute"),
        ("cron_run", "execute"),
        ("sessions_send", "execute"),
        ("file_edit", "edit"),
        ("file_write", "edit"),
        ("cron_add", "edit"),
        ("browser_open", "edit"),
        ("memory_forget", "delete"),
        ("cron_remove", "delete"),
        # Deliberately "other": clients collapse read/search/fetch output.
        ("file_read", "other"),
        ("deliver_file", "other"),
        ("ask_user", "other"),  # a question executes nothing
        ("glob_search", "other"),
        ("web_fetch", "other"),
        ("cron_list", "other"),
        ("some_mcp_tool", "other"),
        ("", "other"),
    ],
)
def test_tool_kind_matches_zeroclaw_mapping(name: str, kind: str) -> None:
    assert tool_kind(name) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [("file_edit", "edit"), ("file_write", "edit"), ("shell", "execute"), ("cron_add", "execute")],
)
def test_approval_kind_is_edit_only_for_file_mutations(name: str, kind: str) -> None:
    assert approval_kind(name) == kind
    assert is_file_edit_tool(name) == (kind == "edit")
