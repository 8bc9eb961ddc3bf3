"""ZeroClaw's own wire types, written by hand: what the ZeroClaw ACP documentation adds to
ACP and the official schema cannot say.

* ``_meta.zeroclaw`` of the ``initialize`` and ``session/new`` results;
* the prompt result's ``usage`` and ``sessionCapabilities.fork``: ACP's
  ``PromptResponse.usage`` and ``SessionForkCapabilities`` are in the schema's unstable
  part only (``schema.unstable.json``);
* the results of ``session/stop`` and of an inbound ``session/update`` /
  ``session/event``, ``{}`` results, and the ``_zeroclaw/history_trimmed`` notification.

The fields ZeroClaw adds inside ACP types (``sessionId`` and ``content`` on the prompt
result, ``workspaceDir`` on ``session/new``'s, ``body`` on ``tool_call_update``, the
``replacementContent`` of a reject-with-edit answer) are declared in
scripts/gen_acp_schema.py (``ZEROCLAW_FIELDS``) and marked ``# ZeroClaw`` in generated.py,
since their place on the wire is among ACP's own fields.
"""

from __future__ import annotations

import msgspec

from acp_core.schema.wire import Json, WireStruct


class ZeroclawMeta(WireStruct, kw_only=True):
    default_model: str | None = None
    max_sessions: int
    session_timeout_secs: int
    sandbox: dict[str, Json] | None = None
    """The default agent's OS sandbox for shell commands (requested, active, reason)."""


class InitializeMeta(WireStruct, kw_only=True):
    zeroclaw: ZeroclawMeta


class SessionZeroclawMeta(WireStruct, kw_only=True):
    sandbox: dict[str, Json] | None = None
    """The session's own OS sandbox for shell commands (from its agent's risk profile)."""


class NewSessionMeta(WireStruct, kw_only=True):
    zeroclaw: SessionZeroclawMeta


class PromptUsage(WireStruct, kw_only=True):
    """The prompt result's ``usage``: the tokens the provider counted for the turn."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None


class SessionForkCapabilities(WireStruct, kw_only=True):
    """ACP's unstable ``sessionCapabilities.fork``: ``{}`` says ``session/fork`` is served."""

    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class StopResult(WireStruct, omit_defaults=False, kw_only=True):
    """``session/stop``: the turn of ``session_id`` was stopped."""

    session_id: str
    stopped: bool = True


class EmptyResult(WireStruct, kw_only=True):
    """``{}``: the result of close, delete and cancel."""


class InboundUpdateResult(WireStruct, omit_defaults=False, kw_only=True):
    """Answer to an inbound ``session/update`` / ``session/event`` request."""

    session_id: str
    type: str
    status: str = "processed"


class HistoryTrimmedParams(WireStruct, kw_only=True):
    """Params of ``_zeroclaw/history_trimmed`` (restore had to drop old turns)."""

    session_id: str
    dropped_messages: int
    kept_turns: int
    reason: str
