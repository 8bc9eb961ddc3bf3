"""Which way each ACP client is asked (acp_server/protocol/client_profile.py), from the
``initialize`` it sends."""

from __future__ import annotations

from typing import Any

import pytest

from acp_core import schema
from acp_server.protocol.client_profile import BEFORE_INITIALIZE, ClientProfile, client_profile


def profile(**params: Any) -> ClientProfile:
    return client_profile(
        schema.decode_params(schema.InitializeParams, {"protocolVersion": 1, **params})
    )


@pytest.mark.parametrize(
    ("client_info", "choices", "ids"),
    [
        ({"name": "zed", "version": "0.200.0"}, "names", "zeroclaw"),
        ({"name": "toad", "title": "Toad"}, "names", "zeroclaw"),
        ({"name": "zeroclaw-prompt"}, "names", "zeroclaw"),
        # Options labelled and keyed by kind, or answered y/N and on their own.
        ({"name": "CodeCompanion.nvim", "version": "1.0.0"}, "unasked", "zeroclaw"),
        ({"name": "acpx", "version": "0.19.1"}, "unasked", "zeroclaw"),
        # Unknown: one option per kind, so any way of keying options stays faithful.
        ({"name": "JetBrains"}, "one_per_kind", "zeroclaw"),
        ({"name": "sdk-test"}, "one_per_kind", "zeroclaw"),
        # No clientInfo (avante.nvim): answers by kind, and approves by optionId spelling.
        (None, "unasked", "kinds"),
        ({"version": "1"}, "unasked", "kinds"),
        ("not an object", "unasked", "kinds"),
    ],
)
def test_each_client_is_asked_the_way_it_can_answer(
    client_info: Any, choices: str, ids: str
) -> None:
    params = {} if client_info is None else {"clientInfo": client_info}
    shown = profile(**params)
    assert (shown.choice_questions, shown.option_ids) == (choices, ids)
    assert not shown.reject_with_edit
    assert not shown.cancel_marker_tool_call


def test_extras_are_opt_in_through_zeroclaw_meta() -> None:
    meta = {"zeroclaw": {"rejectWithEdit": True, "cancelMarkerToolCall": True}}
    asked = profile(clientInfo={"name": "zed"}, _meta=meta)
    assert asked.reject_with_edit
    assert asked.cancel_marker_tool_call
    loose = profile(_meta={"zeroclaw": {"rejectWithEdit": "yes", "cancelMarkerToolCall": 1}})
    assert not loose.reject_with_edit
    assert not loose.cancel_marker_tool_call


def test_a_peer_that_skips_initialize_gets_the_documented_frames() -> None:
    assert BEFORE_INITIALIZE.option_ids == "zeroclaw"
    assert BEFORE_INITIALIZE.choice_questions == "names"
