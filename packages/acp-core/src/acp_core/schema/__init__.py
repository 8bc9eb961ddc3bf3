"""Typed ACP messages: every method and notification ZeroClaw speaks, both directions.

Its modules (every name is importable from here):

* ``generated``: ACP's standard types, generated from the official schema by
  scripts/gen_acp_schema.py (do not edit it by hand);
* ``zeroclaw``: ZeroClaw's own types (``_meta.zeroclaw``, ``session/stop``, the prompt
  result's usage, ``_zeroclaw/history_trimmed``), written by hand;
* ``inbound``, ``inbound_session``: the params a client sends, read leniently;
* ``permission``, ``builders``: the permission options and the messages acp_core builds;
* ``wire``: the ``WireStruct`` base and the codec helpers.

Two rules shape them:

* **What we emit has exactly the documented shape.** Outbound types are msgspec Structs
  with camelCase wire names (``rename="camel"``), snake_case attributes, and absent
  optionals omitted (``omit_defaults``; JSON-valued fields such as ``rawInput`` use
  ``UNSET`` so an explicit ``null`` stays expressible). Field order is the key order of
  the ZeroClaw ACP documentation's examples.
* **What we accept is lenient where the ZeroClaw ACP documentation says so.** Inbound
  params go through ``decode_params(ParamsType, params)``, which accepts its aliases
  (``sessionId`` / ``session_id``; ``agentAlias`` / ``agent_alias`` / ``agent``; ``cwd`` /
  ``workspaceDir`` / ``workspace_dir``), a plain-string prompt, untyped ``{"text": …}``
  parts, and raises ``InvalidParamsError`` naming the offending parameter.

Everything else (tagged unions, validation) is msgspec's C decoder: ``decode`` /
``convert`` turn bytes or builtins into these types, ``encode`` / ``to_builtins`` go back.
See docs/decisions.md for why msgspec.
"""

from __future__ import annotations

from acp_core.schema import generated
from acp_core.schema.builders import (
    initialize_result,
    text_block,
    text_tool_content,
    turn_cancelled_update,
)
from acp_core.schema.generated import *  # noqa: F403 (its __all__ lists ACP's types)
from acp_core.schema.inbound import (
    PROMPT_REQUIRED_MESSAGE,
    CancelRequestParams,
    ClientCapabilities,
    ContentPart,
    ElicitationCapabilities,
    EnvVariable,
    FileSystemCapabilities,
    HttpHeader,
    InboundParams,
    InboundUpdateParams,
    InitializeParams,
    ListSessionsParams,
    McpServer,
    McpServerHttp,
    McpServerStdio,
    NewSessionParams,
    PromptParams,
    RestoreParams,
    SessionIdParams,
    decode_inbound,
    decode_params,
)
from acp_core.schema.inbound_session import ForkParams, SetConfigOptionParams, SetModeParams
from acp_core.schema.permission import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    CHOICE_OPTION_PREFIX,
    KIND_OPTION_IDS,
    MAX_ONE_PER_KIND_CHOICES,
    REJECT_ONCE,
    REJECT_WITH_EDIT,
    OptionIds,
    choice_options,
    chosen_index,
    parse_permission_outcome,
    permission_options,
)
from acp_core.schema.wire import (
    AGENT_NAME,
    AGENT_TITLE,
    PROTOCOL_VERSION,
    WireStruct,
    convert,
    decode,
    encode,
    to_builtins,
)
from acp_core.schema.zeroclaw import (
    EmptyResult,
    HistoryTrimmedParams,
    InboundUpdateResult,
    InitializeMeta,
    NewSessionMeta,
    PromptUsage,
    SessionForkCapabilities,
    SessionZeroclawMeta,
    StopResult,
    ZeroclawMeta,
)

__all__ = [
    "AGENT_NAME",
    "AGENT_TITLE",
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "CHOICE_OPTION_PREFIX",
    "KIND_OPTION_IDS",
    "MAX_ONE_PER_KIND_CHOICES",
    "PROMPT_REQUIRED_MESSAGE",
    "PROTOCOL_VERSION",
    "REJECT_ONCE",
    "REJECT_WITH_EDIT",
    "CancelRequestParams",
    "ClientCapabilities",
    "ContentPart",
    "ElicitationCapabilities",
    "EmptyResult",
    "EnvVariable",
    "FileSystemCapabilities",
    "ForkParams",
    "HistoryTrimmedParams",
    "HttpHeader",
    "InboundParams",
    "InboundUpdateParams",
    "InboundUpdateResult",
    "InitializeMeta",
    "InitializeParams",
    "ListSessionsParams",
    "McpServer",
    "McpServerHttp",
    "McpServerStdio",
    "NewSessionMeta",
    "NewSessionParams",
    "OptionIds",
    "PromptParams",
    "PromptUsage",
    "RestoreParams",
    "SessionForkCapabilities",
    "SessionIdParams",
    "SessionZeroclawMeta",
    "SetConfigOptionParams",
    "SetModeParams",
    "StopResult",
    "WireStruct",
    "ZeroclawMeta",
    "choice_options",
    "chosen_index",
    "convert",
    "decode",
    "decode_inbound",
    "decode_params",
    "encode",
    "initialize_result",
    "parse_permission_outcome",
    "permission_options",
    "text_block",
    "text_tool_content",
    "to_builtins",
    "turn_cancelled_update",
]
__all__ += generated.__all__
