"""A session's title is the first line the user wrote (acp_server/protocol/services/titles.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_server.protocol.services.titles import MAX_TITLE_CHARS, title_from_prompt


def test_the_first_written_line_trimmed_and_collapsed() -> None:
    assert title_from_prompt(["\n\n  Fix the   login bug\t\nmore"]) == "Fix the login bug"
    assert title_from_prompt(["", "  "]) is None


def test_avante_wrapping_and_added_context_are_not_the_users_words() -> None:
    # lua/avante/llm.lua, _continue_stream_acp: what avante.nvim sends.
    blocks = [
        "<selected_code>\n<path>app.py</path>\n<snippet>x = 1</snippet>\n</selected_code>",
        "<previous_user_message>\n# Fix the **login** bug\n</previous_user_message>",
        "<system_context>Continuing from previous session with 1 recent user messages</system_context>",
    ]
    assert title_from_prompt(blocks) == "Fix the login bug"
    assert title_from_prompt(blocks[:1] + blocks[2:]) is None


def test_markup_left_in_a_line_is_dropped_but_comparisons_stay() -> None:
    assert title_from_prompt(["> - Rename `greet` to <b>hello</b>"]) == "Rename greet to hello"
    assert title_from_prompt(["is a < b and c > d?"]) == "is a < b and c > d?"


@given(st.lists(st.text(max_size=300), max_size=4))
def test_a_title_is_one_bounded_line_or_none(texts: list[str]) -> None:
    title = title_from_prompt(texts)
    if title is not None:
        assert title
        assert "\n" not in title
        assert title == title.strip()
        assert len(title) <= MAX_TITLE_CHARS
