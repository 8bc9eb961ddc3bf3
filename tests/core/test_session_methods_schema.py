"""The params of ``session/set_mode`` and ``session/fork``, and the ``initialize`` flag
that allows a terminal auth method, as a client sends them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from acp_core import methods, schema
from acp_core.aliases import default_session_alias
from acp_core.errors import InvalidParamsError
from acp_core.schema.wire import Json


def decode(params_type: type[schema.InboundParams], params: object) -> object:
    return schema.decode_inbound(params_type, msgspec.Raw(msgspec.json.encode(params)))


def test_set_mode_reads_the_session_and_mode_and_names_what_is_missing() -> None:
    spec = methods.METHODS[methods.SESSION_SET_MODE]
    assert spec.inbound_params is schema.SetModeParams
    assert spec.ordering == "admitted"
    read = decode(schema.SetModeParams, {"sessionId": "s", "modeId": "readonly"})
    assert read == schema.SetModeParams(session_id="s", mode_id="readonly")
    with pytest.raises(InvalidParamsError, match="modeId"):
        decode(schema.SetModeParams, {"sessionId": "s", "modeId": 3})
    with pytest.raises(InvalidParamsError, match="sessionId"):
        decode(schema.SetModeParams, {"modeId": "readonly"})


def test_fork_reads_the_new_sessions_place_as_session_new_does() -> None:
    params = {
        "sessionId": "s",
        "cwd": "/w",
        "additionalDirectories": ["/x"],
        "mcpServers": [{"name": "m", "command": "m-server", "args": [], "env": []}],
    }
    read = decode(schema.ForkParams, params)
    assert isinstance(read, schema.ForkParams)
    assert (read.session_id, read.cwd, read.additional_directories) == ("s", "/w", ["/x"])
    assert [server.name for server in read.mcp_servers] == ["m"]
    assert decode(schema.ForkParams, {"sessionId": "s"}) == schema.ForkParams(session_id="s")
    with pytest.raises(InvalidParamsError, match="mcpServers"):
        decode(schema.ForkParams, {"sessionId": "s", "mcpServers": {}})


@pytest.mark.parametrize(
    ("capabilities", "offered"),
    [
        ({"auth": {"terminal": True}}, True),
        ({"_meta": {"terminal-auth": True}}, True),  # the older form (the registry's check)
        ({"auth": {"terminal": False}}, False),
        ({"auth": "yes", "_meta": []}, False),
        ({}, False),
    ],
)
def test_terminal_auth_is_allowed_only_when_the_client_says_it_can_run_one(
    capabilities: dict[str, object], offered: bool
) -> None:
    read = decode(schema.InitializeParams, {"clientCapabilities": capabilities})
    assert isinstance(read, schema.InitializeParams)
    assert read.terminal_auth is offered


def test_initialize_offers_fork_with_a_store_and_the_auth_methods_given() -> None:
    method: dict[str, Json] = {
        "id": "setup",
        "name": "Set up",
        "type": "terminal",
        "args": ["init"],
    }
    built: Any = schema.to_builtins(
        schema.initialize_result(
            store_available=True,
            version="1",
            default_model=None,
            max_sessions=1,
            session_timeout_secs=1,
            auth_methods=[method],
        )
    )
    assert built["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
    assert built["authMethods"] == [method]


@pytest.mark.parametrize(
    ("connection_default", "config_default", "agents", "picked"),
    [
        (None, None, {"only": True}, "only"),  # the sole agent counts
        (None, "b", {"a": True, "b": True}, "b"),
        ("a", "b", {"a": True, "b": True}, "a"),
        (None, None, {"a": True, "b": True}, None),  # session/new would refuse
        ("gone", None, {"a": True}, None),
    ],
)
def test_the_default_session_alias_is_the_one_session_new_picks(
    connection_default: str | None,
    config_default: str | None,
    agents: dict[str, bool],
    picked: str | None,
) -> None:
    assert (
        default_session_alias(
            connection_default=connection_default, config_default=config_default, agents=agents
        )
        == picked
    )
