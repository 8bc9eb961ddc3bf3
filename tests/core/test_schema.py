from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from acp_core import schema
from acp_core.errors import InvalidParamsError
from acp_core.schema import (
    AgentMessageChunk,
    BlobResource,
    CancelledOutcome,
    EmbeddedResource,
    InboundUpdateParams,
    InitializeParams,
    McpServerHttp,
    McpServerStdio,
    NewSessionParams,
    PlanEntry,
    PlanUpdate,
    PromptParams,
    ResourceLink,
    SelectedOutcome,
    SessionIdParams,
    SessionNotification,
    TextContent,
    TextResource,
    ToolCallDiff,
    ToolCallStart,
    ToolCallUpdate,
    decode_params,
    encode,
    initialize_result,
    parse_permission_outcome,
    permission_options,
    to_builtins,
)


def wire(value: object) -> Any:
    return json.loads(encode(value))


# ----------------------------------------------------------------- inbound leniency


@pytest.mark.parametrize("key", ["sessionId", "session_id"])
def test_session_id_alias(key: str) -> None:
    assert decode_params(SessionIdParams, {key: "s-1"}).session_id == "s-1"


def test_camel_session_id_wins_over_snake() -> None:
    assert decode_params(SessionIdParams, {"sessionId": "a", "session_id": "b"}).session_id == "a"


@pytest.mark.parametrize("params", [None, {}, {"sessionId": 5}, {"session_id": None}])
def test_missing_session_id_names_the_parameter(params: Any) -> None:
    with pytest.raises(InvalidParamsError) as info:
        decode_params(SessionIdParams, params)
    assert info.value.message == "Missing required parameter: sessionId"
    assert info.value.code == -32602


def test_params_array_is_rejected_clearly() -> None:
    with pytest.raises(InvalidParamsError, match="expected a JSON object"):
        decode_params(SessionIdParams, ["s-1"])


@pytest.mark.parametrize(
    ("params", "alias"),
    [
        ({"agentAlias": "a"}, "a"),
        ({"agent_alias": "b"}, "b"),
        ({"agent": "c"}, "c"),
        ({"agentAlias": "  ", "agent": "c"}, "c"),
        ({"agentAlias": " a ", "agent": "c"}, "a"),
        ({"agent": "   "}, None),
        ({"_meta": {"zeroclaw": {"agentAlias": "m"}}}, "m"),
        ({}, None),
    ],
)
def test_agent_alias_aliases_and_blank_is_absent(params: dict[str, Any], alias: str | None) -> None:
    assert decode_params(NewSessionParams, params).agent_alias == alias


@pytest.mark.parametrize(
    ("params", "cwd"),
    [
        ({"cwd": "/a", "workspaceDir": "/b"}, "/a"),
        ({"workspaceDir": "/b", "workspace_dir": "/c"}, "/b"),
        ({"workspace_dir": "/c"}, "/c"),
        ({}, None),
    ],
)
def test_cwd_aliases_first_present_wins(params: dict[str, Any], cwd: str | None) -> None:
    assert decode_params(NewSessionParams, params).cwd == cwd


def test_non_string_cwd_is_invalid_params_naming_it() -> None:
    with pytest.raises(InvalidParamsError, match="workspaceDir must be a string"):
        decode_params(NewSessionParams, {"workspaceDir": 3})


def test_mcp_servers_accept_list_and_dict_env() -> None:
    params = decode_params(
        NewSessionParams,
        {
            "mcpServers": [
                {
                    "name": "fs",
                    "command": "mcp-fs",
                    "args": ["--root", "/"],
                    "env": [{"name": "A", "value": "1"}],
                },
                {"name": "gh", "command": "mcp-gh", "env": {"TOKEN": "x"}},
                {"type": "http", "name": "web", "url": "http://127.0.0.1:1/mcp", "headers": []},
            ]
        },
    )
    first, second, third = params.mcp_servers
    assert isinstance(first, McpServerStdio)
    assert first.args == ["--root", "/"]
    assert [(e.name, e.value) for e in first.env] == [("A", "1")]
    assert isinstance(second, McpServerStdio)
    assert [(e.name, e.value) for e in second.env] == [("TOKEN", "x")]
    assert isinstance(third, McpServerHttp)
    assert third.url == "http://127.0.0.1:1/mcp"


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ("nope", "mcpServers must be an array"),
        ([{"command": "x"}], r"mcpServers\[0\].name"),
        ([{"name": "x"}], r"mcpServers\[0\].command"),
        ([{"name": "x", "command": "y", "args": [1]}], r"mcpServers\[0\].args"),
        ([{"name": "x", "command": "y", "env": [{"name": "A"}]}], r"mcpServers\[0\].env\[0\]"),
    ],
)
def test_bad_mcp_servers_name_the_field(servers: Any, message: str) -> None:
    with pytest.raises(InvalidParamsError, match=message):
        decode_params(NewSessionParams, {"mcpServers": servers})


def test_prompt_string_becomes_one_text_part() -> None:
    params = decode_params(PromptParams, {"sessionId": "s", "prompt": "hello"})
    assert params.prompt == [TextContent(text="hello")]


def test_prompt_parts_of_every_kind() -> None:
    params = decode_params(
        PromptParams,
        {
            "session_id": "s",
            "prompt": [
                {"text": "untyped"},
                {"type": "text", "text": "typed"},
                {"type": "resource", "resource": {"uri": "file:///a.rs", "text": "code"}},
                {
                    "type": "resource",
                    "resource": {
                        "uri": "file:///r.pdf",
                        "mimeType": "application/pdf",
                        "blob": "aGk=",
                    },
                },
                {"type": "resource_link", "uri": "file:///x.md", "name": "x.md"},
                {"type": "mystery"},
                "not an object",
            ],
        },
    )
    assert params.prompt == [
        TextContent(text="untyped"),
        TextContent(text="typed"),
        EmbeddedResource(resource=TextResource(uri="file:///a.rs", text="code")),
        EmbeddedResource(
            resource=BlobResource(uri="file:///r.pdf", mime_type="application/pdf", blob="aGk=")
        ),
        ResourceLink(uri="file:///x.md", name="x.md"),
    ]


@pytest.mark.parametrize("prompt", [None, 5, {"text": "x"}, True])
def test_missing_or_invalid_prompt(prompt: Any) -> None:
    params: dict[str, Any] = {"sessionId": "s"}
    if prompt is not None:
        params["prompt"] = prompt
    with pytest.raises(InvalidParamsError) as info:
        decode_params(PromptParams, params)
    assert info.value.message == (
        "Missing required parameter: prompt (must be string or array of parts)"
    )


def test_session_id_is_checked_before_prompt() -> None:
    with pytest.raises(InvalidParamsError, match="sessionId"):
        decode_params(PromptParams, {"prompt": 5})


def test_resource_without_text_or_blob_is_named() -> None:
    with pytest.raises(InvalidParamsError, match=r"prompt\[0\].resource"):
        decode_params(
            PromptParams,
            {"sessionId": "s", "prompt": [{"type": "resource", "resource": {"uri": "u"}}]},
        )


def test_initialize_reads_elicitation_capabilities() -> None:
    none = decode_params(InitializeParams, None)
    assert not none.elicitation_form
    empty = decode_params(InitializeParams, {"clientCapabilities": {"elicitation": {}}})
    assert empty.elicitation_form
    assert not empty.elicitation_url
    url = decode_params(InitializeParams, {"clientCapabilities": {"elicitation": {"url": {}}}})
    assert url.elicitation_url
    assert not url.elicitation_form
    odd = decode_params(InitializeParams, {"protocolVersion": 0, "clientCapabilities": "weird"})
    assert odd.client_capabilities is None
    mixed = decode_params(
        InitializeParams,
        {
            "clientCapabilities": {
                "terminal": {},
                "fs": {"readTextFile": "yes"},
                "elicitation": {"form": {}},
            }
        },
    )
    assert mixed.elicitation_form
    assert mixed.client_capabilities is not None
    assert mixed.client_capabilities.terminal is None
    assert mixed.client_capabilities.fs is None
    full = decode_params(
        InitializeParams,
        {"clientCapabilities": {"fs": {"readTextFile": True}, "terminal": True}},
    )
    assert full.client_capabilities is not None
    assert full.client_capabilities.fs is not None
    assert full.client_capabilities.fs.read_text_file
    assert full.client_capabilities.terminal is True


@pytest.mark.parametrize(
    ("params", "event"),
    [
        ({"sessionId": "s", "type": "custom"}, "custom"),
        ({"sessionId": "s", "update": {"sessionUpdate": "ping"}}, "ping"),
        ({"sessionId": "s"}, "unknown"),
    ],
)
def test_inbound_update_event_type(params: dict[str, Any], event: str) -> None:
    assert decode_params(InboundUpdateParams, params).event_type == event


# ----------------------------------------------------------------- outbound shapes


def test_initialize_without_store_omits_session_capabilities_and_default_model() -> None:
    result = wire(
        initialize_result(
            store_available=False,
            version="1.2.3",
            default_model=None,
            max_sessions=10,
            session_timeout_secs=3600,
        )
    )
    assert result["agentCapabilities"]["loadSession"] is False
    assert "sessionCapabilities" not in result["agentCapabilities"]
    assert result["_meta"] == {"zeroclaw": {"maxSessions": 10, "sessionTimeoutSecs": 3600}}
    assert result["agentInfo"] == {
        "name": "zeroclaw-acp",
        "title": "ZeroClaw ACP",
        "version": "1.2.3",
    }


def test_permission_options_match_the_documentation_and_zeroclaw() -> None:
    assert wire(permission_options(edit=False)) == [
        {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    ]
    # One option per kind unless the client opted in to reject-with-edit, a second
    # reject_once that a client keying options by kind could not reach.
    assert wire(permission_options(edit=True)) == wire(permission_options(edit=False))
    edit = wire(permission_options(edit=True, reject_with_edit=True))
    assert [o["optionId"] for o in edit] == [
        "allow-once",
        "allow-always",
        "reject-with-edit",
        "reject-once",
    ]


def test_kind_spelled_option_ids_keep_names_kinds_and_order() -> None:
    zeroclaw = wire(permission_options(edit=True, reject_with_edit=True))
    kinds = wire(permission_options(edit=True, ids="kinds", reject_with_edit=True))
    assert [o["optionId"] for o in kinds] == [
        "allow_once",
        "allow_always",
        "reject_with_edit",
        "reject_once",
    ]
    assert [(o["name"], o["kind"]) for o in kinds] == [(o["name"], o["kind"]) for o in zeroclaw]


@pytest.mark.parametrize(
    ("result", "outcome"),
    [
        (
            {"outcome": {"outcome": "selected", "optionId": "allow-once"}},
            SelectedOutcome(option_id="allow-once"),
        ),
        (
            {
                "outcome": {
                    "outcome": "selected",
                    "optionId": "reject-with-edit",
                    "replacementContent": "x",
                }
            },
            SelectedOutcome(option_id="reject-with-edit", replacement_content="x"),
        ),
        ({"outcome": {"outcome": "cancelled"}}, CancelledOutcome()),
        ({"outcome": {"outcome": "selected"}}, CancelledOutcome()),
        ({"outcome": {"outcome": "maybe"}}, CancelledOutcome()),
        ({"outcome": "selected"}, CancelledOutcome()),
        (None, CancelledOutcome()),
        ([], CancelledOutcome()),
    ],
)
def test_permission_outcome_malformed_is_cancelled(result: Any, outcome: object) -> None:
    assert parse_permission_outcome(result) == outcome


def test_raw_input_null_is_kept_but_absent_is_omitted() -> None:
    start = ToolCallStart(tool_call_id="t", title="shell", raw_input=None)
    assert wire(start) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "t",
        "title": "shell",
        "rawInput": None,
    }
    update = ToolCallUpdate(tool_call_id="t", status="completed")
    assert wire(update) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t",
        "status": "completed",
    }


def test_diff_of_a_new_file_sends_old_text_null() -> None:
    assert wire(ToolCallDiff(path="/a", new_text="new")) == {
        "type": "diff",
        "path": "/a",
        "oldText": None,
        "newText": "new",
    }


def test_plan_update_shape() -> None:
    plan = PlanUpdate(
        entries=[
            PlanEntry(
                content="Do it",
                status="in_progress",
                priority="high",
                meta={"zeroclaw": {"activeForm": "Doing it"}},
            )
        ]
    )
    assert wire(plan) == {
        "sessionUpdate": "plan",
        "entries": [
            {
                "content": "Do it",
                "status": "in_progress",
                "priority": "high",
                "_meta": {"zeroclaw": {"activeForm": "Doing it"}},
            }
        ],
    }


def test_turn_cancelled_update_is_a_styled_think_tool_call() -> None:
    update = wire(schema.turn_cancelled_update("s-1", "[turn cancelled via client]", marker_id="7"))
    assert update == {
        "sessionUpdate": "tool_call",
        "toolCallId": "turn-cancelled-s-1-7",
        "title": "turn-cancelled",
        "kind": "think",
        "status": "completed",
        "name": "turn-cancelled",
        "content": [
            {"type": "content", "content": {"type": "text", "text": "[turn cancelled via client]"}}
        ],
    }


def test_each_turn_cancelled_marker_has_its_own_id() -> None:
    first = schema.turn_cancelled_update("s-1", "[turn cancelled via client]")
    second = schema.turn_cancelled_update("s-1", "[turn cancelled via client]")
    assert first.tool_call_id.startswith("turn-cancelled-s-1-")
    assert first.tool_call_id != second.tool_call_id


def test_strict_decode_rejects_unknown_update_kind() -> None:
    with pytest.raises(msgspec.ValidationError):
        schema.decode(SessionNotification, b'{"sessionId":"s","update":{"sessionUpdate":"nope"}}')
    with pytest.raises(InvalidParamsError, match=r"\$.update"):
        schema.convert(SessionNotification, {"sessionId": "s", "update": {"sessionUpdate": "nope"}})


def test_to_builtins_matches_encode() -> None:
    note = SessionNotification(
        session_id="s", update=AgentMessageChunk(content=TextContent(text="hi"))
    )
    assert to_builtins(note) == wire(note)


def test_ask_user_choices_become_options_with_a_reject_last() -> None:
    assert wire(schema.choice_options(["Yes", "No"])) == [
        {"optionId": "choice-0", "name": "Yes", "kind": "allow_once"},
        {"optionId": "choice-1", "name": "No", "kind": "reject_once"},
    ]
    assert wire(schema.choice_options(["Only"])) == [
        {"optionId": "choice-0", "name": "Only", "kind": "allow_once"}
    ]


def test_one_per_kind_choices_never_share_a_kind() -> None:
    options = wire(schema.choice_options(["Go", "Python", "Rust", "C"], one_per_kind=True))
    assert options == [
        {"optionId": "choice-0", "name": "1. Go", "kind": "allow_once"},
        {"optionId": "choice-1", "name": "2. Python", "kind": "reject_once"},
        {"optionId": "choice-2", "name": "3. Rust", "kind": "reject_always"},
        {"optionId": "choice-3", "name": "4. C", "kind": "allow_always"},
    ]
    with pytest.raises(ValueError, match="at most 4"):
        schema.choice_options(["a", "b", "c", "d", "e"], one_per_kind=True)


@pytest.mark.parametrize(
    ("option_id", "index"),
    [
        ("choice-0", 0),
        ("choice-2", 2),
        ("choice-3", None),
        ("choice-01", None),
        ("choice-", None),
        ("choice--1", None),
        ("xchoice-1", None),
        ("allow-once", None),
        ("choice-١", None),
    ],
)
def test_chosen_index(option_id: str, index: int | None) -> None:
    assert schema.chosen_index(SelectedOutcome(option_id=option_id), 3) == index


def test_cancelled_outcome_picks_no_choice() -> None:
    assert schema.chosen_index(CancelledOutcome(), 3) is None
