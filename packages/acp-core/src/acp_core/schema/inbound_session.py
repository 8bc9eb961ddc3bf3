"""Inbound params of the session settings (``session/set_config_option``, ACP "Session
Config Options") and of ACP's session methods beyond the ZeroClaw ACP documentation's own:
``session/set_mode`` (ACP "Session Modes") and ``session/fork`` (ACP's unstable
schema, ``schema.unstable.json``), read as leniently as the rest of ``inbound``."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonObject
from acp_core.schema.inbound import (
    InboundParams,
    McpServer,
    NewSessionParams,
    RestoreParams,
    _session_id,
)


class SetModeParams(InboundParams, kw_only=True):
    """``session/set_mode``: the session and the ``modeId`` of one of its ``availableModes``."""

    session_id: str
    mode_id: str

    @classmethod
    def from_object(cls, params: JsonObject) -> SetModeParams:
        session_id = _session_id(params)
        mode_id = params.get("modeId")
        if not isinstance(mode_id, str):
            raise InvalidParamsError("Missing required parameter: modeId")
        return cls(session_id=session_id, mode_id=mode_id)


class ForkParams(RestoreParams, kw_only=True):
    """``session/fork``: the session to copy, and the new session's ``cwd``,
    ``additionalDirectories`` and ``mcpServers`` read as ``session/new`` reads them."""

    # The MCP server union is read by the lenient reader only (msgspec cannot decode an
    # untagged union of Structs).
    strict_fast_path: ClassVar[bool] = False

    cwd: str | None = None
    mcp_servers: list[McpServer] = msgspec.field(default_factory=list)

    @classmethod
    def from_object(cls, params: JsonObject) -> ForkParams:
        session_id = _session_id(params)
        like_new = NewSessionParams.from_object(params)
        return cls(
            session_id=session_id,
            cwd=like_new.cwd,
            mcp_servers=like_new.mcp_servers,
            additional_directories=like_new.additional_directories,
        )


class SetConfigOptionParams(InboundParams, kw_only=True):
    """``session/set_config_option``: the option's ``configId`` and the chosen value id.

    ACP also has ``type: "boolean"`` values; no option here is boolean, so a boolean value
    is refused like any value the option does not offer."""

    session_id: str
    config_id: str
    value: str

    @classmethod
    def from_object(cls, params: JsonObject) -> SetConfigOptionParams:
        session_id = _session_id(params)
        config_id = params.get("configId")
        if not isinstance(config_id, str):
            raise InvalidParamsError("Missing required parameter: configId")
        value = params.get("value")
        if not isinstance(value, str):
            raise InvalidParamsError("Invalid parameter: value must be a value id (a string)")
        return cls(session_id=session_id, config_id=config_id, value=value)
