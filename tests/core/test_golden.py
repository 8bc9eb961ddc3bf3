"""Every example in the ZeroClaw ACP documentation, parsed into its acp-core type and re-emitted identically.

Fixtures live in ``golden/*.json``; ``zeroclaw_*.json`` add shapes the ZeroClaw ACP documentation leaves out but
ZeroClaw's implementation emits, with ``source`` saying which. In each, ``wire`` is the ZeroClaw ACP documentation's example (placeholders such as
``{...}`` filled in), ``canonical`` (only where present) is what we emit after lenient
intake normalised it, e.g. a plain-string prompt becomes one typed text part. Comparison
is on parsed JSON *and* key order, which is the ZeroClaw ACP documentation's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_core import schema
from acp_core.jsonrpc import (
    Notification,
    Request,
    Response,
    encode_notification,
    encode_request,
    encode_result,
    parse_message,
)
from acp_core.methods import METHODS

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = sorted(GOLDEN.glob("*.json"))


def ordered(value: Any) -> Any:
    """A JSON value with key order made significant (dicts become lists of pairs)."""
    if isinstance(value, dict):
        return [(key, ordered(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [ordered(item) for item in value]
    return value


def load(path: Path) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return fixture


def typed_payload(fixture: dict[str, Any], payload: Any) -> schema.WireStruct:
    """Parse a message's params/result (or a fragment) into its acp-core type."""
    if fixture["role"] == "fragment":
        fragment_type: type[schema.WireStruct] = getattr(schema, fixture["type"])
        return schema.convert(fragment_type, payload)
    spec = METHODS[fixture["method"]]
    if fixture["role"] == "result":
        assert spec.result is not None
        return schema.convert(spec.result, payload)
    if fixture["direction"] == "inbound":
        assert spec.inbound_params is not None
        return schema.decode_params(spec.inbound_params, payload)
    assert spec.outbound_params is not None
    return schema.convert(spec.outbound_params, payload)


def reemit(fixture: dict[str, Any]) -> Any:
    raw = json.dumps(fixture["wire"]).encode()
    if fixture["role"] == "fragment":
        return json.loads(schema.encode(typed_payload(fixture, fixture["wire"])))
    message = parse_message(raw)
    if isinstance(message, Request):
        assert fixture["role"] == "request"
        assert message.method == fixture["method"]
        out = encode_request(message.id, message.method, typed_payload(fixture, message.params))
    elif isinstance(message, Notification):
        assert fixture["role"] == "notification"
        out = encode_notification(message.method, typed_payload(fixture, message.params))
    else:
        assert isinstance(message, Response)
        assert fixture["role"] == "result"
        out = encode_result(message.id, typed_payload(fixture, message.result))
    return json.loads(out)


def test_there_is_a_fixture_for_every_documented_method() -> None:
    covered = {load(path)["method"] for path in FIXTURES} - {None}
    not_in_the_documentation = {
        "session/event",
        "_zeroclaw/history_trimmed",
        "$/cancel_request",
        "session/list",
        "session/delete",
        "session/set_config_option",
        "session/set_mode",
        "session/fork",
    }
    assert covered >= set(METHODS) - not_in_the_documentation


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_golden_round_trip(path: Path) -> None:
    fixture = load(path)
    expected = fixture.get("canonical", fixture["wire"])
    assert ordered(reemit(fixture)) == ordered(expected)


def golden_payload(name: str, key: str) -> Any:
    return load(GOLDEN / f"{name}.json")["wire"][key]


def test_initialize_builder_reproduces_the_documentation() -> None:
    built = schema.initialize_result(
        store_available=True,
        version="0.7.x",
        default_model="anthropic/claude-sonnet-4.6",
        max_sessions=10,
        session_timeout_secs=3600,
    )
    expected = golden_payload("initialize_result", "result")
    # The ZeroClaw ACP documentation's markers, plus ACP's list and delete (the store serves both) and the extra
    # roots of additionalDirectories (stored with the session), and ACP's unstable fork.
    expected["agentCapabilities"]["sessionCapabilities"].update(
        {"list": {}, "delete": {}, "additionalDirectories": {}, "fork": {}}
    )
    assert ordered(schema.to_builtins(built)) == ordered(expected)


def test_permission_builders_reproduce_the_documentation() -> None:
    params = golden_payload("request_permission_request", "params")
    assert schema.to_builtins(schema.permission_options(edit=False)) == params["options"]
    tool_call = schema.PermissionToolCall(
        tool_call_id=params["toolCall"]["toolCallId"],
        title="Approve shell?",
        kind="execute",
        status="pending",
        raw_input={"tool": "shell", "summary": "git status --short"},
        content=[schema.text_tool_content("git status --short")],
    )
    assert ordered(schema.to_builtins(tool_call)) == ordered(params["toolCall"])


def test_permission_outcomes_of_the_documentation() -> None:
    selected = schema.parse_permission_outcome(
        golden_payload("request_permission_selected", "result")
    )
    assert selected == schema.SelectedOutcome(option_id="allow-once")
    cancelled = schema.parse_permission_outcome(
        golden_payload("request_permission_cancelled", "result")
    )
    assert cancelled == schema.CancelledOutcome()


def test_deliver_file_resource_is_narrowed_to_a_blob() -> None:
    block = schema.convert(
        schema.ToolCallContentBlock, load(GOLDEN / "deliver_file_resource.json")["wire"]
    )
    assert isinstance(block.content, schema.EmbeddedResource)
    assert isinstance(block.content.resource, schema.BlobResource)
    assert block.content.resource.uri.startswith("attachment://deliver/")


def test_zeroclaw_builders_match_their_fixtures() -> None:
    cancelled = golden_payload("zeroclaw_update_turn_cancelled", "params")
    built = schema.turn_cancelled_update(
        cancelled["sessionId"], "[turn cancelled via client]", marker_id="1"
    )
    # ZeroClaw's implementation reuses one id per session; ours adds a suffix so each marker is its own
    # tool call (ACP: ids are unique within a session). Everything else is ZeroClaw's.
    reference_id = cancelled["update"]["toolCallId"]
    assert built.tool_call_id == f"{reference_id}-1"
    built_wire = schema.to_builtins(built)
    assert isinstance(built_wire, dict)
    assert ordered({**built_wire, "toolCallId": reference_id}) == ordered(cancelled["update"])
    edit = golden_payload("zeroclaw_request_permission_edit", "params")
    # The fixture offers reject-with-edit to every client; we only to one that opts in.
    assert (
        schema.to_builtins(schema.permission_options(edit=True, reject_with_edit=True))
        == edit["options"]
    )
    outcome = schema.parse_permission_outcome(
        golden_payload("zeroclaw_request_permission_reject_with_edit", "result")
    )
    assert outcome == schema.SelectedOutcome(
        option_id="reject-with-edit", replacement_content="use baz instead"
    )
