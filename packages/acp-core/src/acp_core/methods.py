"""ACP method names and what travels with each.

Every method string lives here (tests/meta/test_method_literals.py finds any other).
``METHODS`` maps a method to its ``MethodSpec``: who sends it, whether it is a request or a
notification, the acp-core types of its params and result, and how a server orders it
against the requests around it, so a dispatcher is nothing but this table plus handlers.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

from acp_core import schema

INITIALIZE: Final = "initialize"
SESSION_NEW: Final = "session/new"
SESSION_PROMPT: Final = "session/prompt"
SESSION_UPDATE: Final = "session/update"
SESSION_EVENT: Final = "session/event"
"""Legacy inbound alias of ``session/update`` (ZeroClaw v0); never sent."""
SESSION_CANCEL: Final = "session/cancel"
SESSION_STOP: Final = "session/stop"
SESSION_LOAD: Final = "session/load"
SESSION_RESUME: Final = "session/resume"
SESSION_CLOSE: Final = "session/close"
SESSION_LIST: Final = "session/list"
SESSION_DELETE: Final = "session/delete"
SESSION_SET_CONFIG_OPTION: Final = "session/set_config_option"
SESSION_SET_MODE: Final = "session/set_mode"
SESSION_FORK: Final = "session/fork"
"""ACP's unstable ``session/fork`` (``schema.unstable.json``), behind ``sessionCapabilities.fork``."""
SESSION_REQUEST_PERMISSION: Final = "session/request_permission"
HISTORY_TRIMMED: Final = "_zeroclaw/history_trimmed"
CANCEL_REQUEST: Final = "$/cancel_request"
"""ACP protocol-level notification, both directions (ACP spec: cancellation): the sender gives up
on one of its requests (``{"requestId": id}``); a peer may ignore it (``$/`` notifications
are optional)."""

Direction: TypeAlias = Literal["client_to_agent", "agent_to_client", "both"]
CallKind: TypeAlias = Literal["request", "notification", "either"]
Ordering: TypeAlias = Literal["inline", "admitted", "concurrent"]
"""How a server orders an inbound call against the others on its connection:

* ``inline``: handled whole by the reader, in arrival order, and answered at once; it
  never waits behind anything (``session/cancel`` must reach a running turn).
* ``admitted``: an admission step runs in arrival order (``session/prompt`` reserves the
  session's turn, ``session/close`` and ``session/delete`` detach the session,
  ``session/load`` marks the id as being restored), the rest concurrently; so a call sent right behind it sees its effect.
* ``concurrent``: runs in its own task; the reader goes on to the next message.
"""


class MethodSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a method carries.

    ``inbound_params`` is what a client sends us (decode with ``schema.decode_params``);
    ``outbound_params`` what we send. ``result`` is the success result's type, or None for
    notifications. ``session/update`` travels both ways with different params.
    """

    name: str
    direction: Direction
    kind: CallKind
    inbound_params: type[schema.InboundParams] | None = None
    outbound_params: type[schema.WireStruct] | None = None
    result: type[schema.WireStruct] | None = None
    ordering: Ordering = "concurrent"


METHODS: Final[dict[str, MethodSpec]] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            name=INITIALIZE,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.InitializeParams,
            result=schema.InitializeResult,
        ),
        MethodSpec(
            name=SESSION_NEW,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.NewSessionParams,
            result=schema.NewSessionResult,
        ),
        MethodSpec(
            name=SESSION_PROMPT,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.PromptParams,
            result=schema.PromptResult,
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_CANCEL,
            direction="client_to_agent",
            # Normally a notification; answered with {} if it arrives with an id.
            kind="either",
            inbound_params=schema.SessionIdParams,
            result=schema.EmptyResult,
            ordering="inline",
        ),
        MethodSpec(
            name=SESSION_STOP,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.SessionIdParams,
            result=schema.StopResult,
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_LOAD,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.RestoreParams,
            result=schema.RestoredSessionResult,
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_RESUME,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.RestoreParams,
            result=schema.RestoredSessionResult,
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_CLOSE,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.SessionIdParams,
            result=schema.EmptyResult,
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_LIST,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.ListSessionsParams,
            result=schema.ListSessionsResult,
        ),
        MethodSpec(
            name=SESSION_DELETE,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.SessionIdParams,
            result=schema.EmptyResult,
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_SET_CONFIG_OPTION,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.SetConfigOptionParams,
            result=schema.SetConfigOptionResult,
            # In arrival order: a prompt sent right behind it runs with the new choice.
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_SET_MODE,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.SetModeParams,
            result=schema.EmptyResult,
            # The mode config option's other face: ordered like session/set_config_option.
            ordering="admitted",
        ),
        MethodSpec(
            name=SESSION_FORK,
            direction="client_to_agent",
            kind="request",
            inbound_params=schema.ForkParams,
            # The fork is a new session: session/new's result shape.
            result=schema.NewSessionResult,
        ),
        MethodSpec(
            name=CANCEL_REQUEST,
            direction="both",
            # A notification by definition; answered with {} if it arrives with an id.
            kind="either",
            inbound_params=schema.CancelRequestParams,
            outbound_params=schema.CancelRequestParams,
            result=schema.EmptyResult,
            ordering="inline",
        ),
        MethodSpec(
            name=SESSION_UPDATE,
            direction="both",
            kind="either",
            inbound_params=schema.InboundUpdateParams,
            outbound_params=schema.SessionNotification,
            result=schema.InboundUpdateResult,
        ),
        MethodSpec(
            name=SESSION_EVENT,
            direction="client_to_agent",
            kind="either",
            inbound_params=schema.InboundUpdateParams,
            result=schema.InboundUpdateResult,
        ),
        MethodSpec(
            name=SESSION_REQUEST_PERMISSION,
            direction="agent_to_client",
            kind="request",
            outbound_params=schema.RequestPermissionParams,
            result=schema.RequestPermissionResult,
        ),
        MethodSpec(
            name=HISTORY_TRIMMED,
            direction="agent_to_client",
            kind="notification",
            outbound_params=schema.HistoryTrimmedParams,
        ),
    )
}

INBOUND_METHODS: Final = frozenset(
    name for name, spec in METHODS.items() if spec.inbound_params is not None
)
"""Methods a client may call on the server; anything else is -32601."""
