from __future__ import annotations

from acp_core import methods, schema


def test_every_documented_method_is_in_the_table() -> None:
    expected = {
        "initialize",
        "session/new",
        "session/prompt",
        "session/update",
        "session/event",
        "session/cancel",
        "session/stop",
        "session/load",
        "session/resume",
        "session/close",
        "session/list",
        "session/delete",
        "session/set_config_option",
        "session/set_mode",
        "session/fork",
        "session/request_permission",
        "_zeroclaw/history_trimmed",
        "$/cancel_request",
    }
    assert set(methods.METHODS) == expected
    assert all(spec.name == name for name, spec in methods.METHODS.items())


def test_inbound_methods_are_what_a_client_may_call() -> None:
    assert "session/request_permission" not in methods.INBOUND_METHODS
    assert methods.HISTORY_TRIMMED not in methods.INBOUND_METHODS
    assert methods.SESSION_EVENT in methods.INBOUND_METHODS
    assert methods.METHODS[methods.SESSION_PROMPT].inbound_params is schema.PromptParams
    assert methods.METHODS[methods.SESSION_UPDATE].outbound_params is schema.SessionNotification


def test_cancels_are_inline_and_turn_changing_calls_admitted_in_arrival_order() -> None:
    ordering = {name: spec.ordering for name, spec in methods.METHODS.items()}
    assert ordering[methods.SESSION_CANCEL] == "inline"
    assert ordering[methods.CANCEL_REQUEST] == "inline"
    assert ordering[methods.SESSION_PROMPT] == "admitted"
    assert ordering[methods.SESSION_CLOSE] == "admitted"
    assert ordering[methods.SESSION_STOP] == "admitted"
    assert ordering[methods.SESSION_LOAD] == "admitted"
    assert ordering[methods.SESSION_RESUME] == "admitted"
    assert ordering[methods.SESSION_NEW] == "concurrent"
