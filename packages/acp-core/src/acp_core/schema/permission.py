"""``session/request_permission``: options, the request, and reading the outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from acp_core.jsonrpc import JsonValue
from acp_core.schema.content import (
    ToolCallContent,
    ToolCallLocation,
)
from acp_core.schema.wire import (
    PermissionOptionKind,
    ToolCallStatus,
    ToolKind,
    WireStruct,
)

if TYPE_CHECKING:
    Json: TypeAlias = JsonValue
else:
    # msgspec cannot evaluate the recursive JsonValue alias; Any decodes the same values.
    Json = Any

# --------------------------------------------------------------------------- permission


class PermissionOption(WireStruct, kw_only=True):
    option_id: str
    name: str
    kind: PermissionOptionKind


class PermissionToolCall(WireStruct, kw_only=True):
    """The ``toolCall`` of a permission request. ZeroClaw's own data (the text an edit
    prompt offers for ``reject-with-edit``) travels in ``_meta.zeroclaw``: ACP forbids
    custom fields at the root of its types."""

    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolCallStatus
    raw_input: Json | UnsetType = UNSET
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    meta: dict[str, Json] | None = msgspec.field(default=None, name="_meta")


class RequestPermissionParams(WireStruct, kw_only=True):
    session_id: str
    options: list[PermissionOption]
    tool_call: PermissionToolCall


class SelectedOutcome(WireStruct, tag_field="outcome", tag="selected", kw_only=True):
    option_id: str
    # reject-with-edit carries the text to use as the tool result (reference extension).
    replacement_content: str | None = None


class CancelledOutcome(WireStruct, tag_field="outcome", tag="cancelled", kw_only=True):
    pass


PermissionOutcome: TypeAlias = SelectedOutcome | CancelledOutcome


class RequestPermissionResult(WireStruct, kw_only=True):
    outcome: PermissionOutcome


ALLOW_ONCE: Final = PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once")
ALLOW_ALWAYS: Final = PermissionOption(
    option_id="allow-always", name="Always allow", kind="allow_always"
)
# The reference sends kind "reject_with_edit", which base ACP does not define: strict clients
# (the official SDKs) then reject the whole permission request, so edit tools could never be
# approved. The optionId alone identifies the choice; the kind says what it means to a UI.
REJECT_WITH_EDIT: Final = PermissionOption(
    option_id="reject-with-edit", name="Reject with edit", kind="reject_once"
)
REJECT_ONCE: Final = PermissionOption(option_id="reject-once", name="Reject", kind="reject_once")


def permission_options(*, edit: bool) -> list[PermissionOption]:
    """The approval choices, in the seed's order; file edits also offer ``reject-with-edit``."""
    if edit:
        return [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_WITH_EDIT, REJECT_ONCE]
    return [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE]


CHOICE_OPTION_PREFIX: Final = "choice-"


def choice_options(choices: Sequence[str]) -> list[PermissionOption]:
    """ask_user's choices as permission options ``choice-0`` … ``choice-<n-1>``.

    As in the reference, every choice is ``allow_once`` except that the last of two or more
    is ``reject_once``, so clients that colour options by kind show a "no" button.
    """
    last = len(choices) - 1
    return [
        PermissionOption(
            option_id=f"{CHOICE_OPTION_PREFIX}{index}",
            name=text,
            kind="reject_once" if index == last and last >= 1 else "allow_once",
        )
        for index, text in enumerate(choices)
    ]


def chosen_index(outcome: PermissionOutcome, choice_count: int) -> int | None:
    """Which ask_user choice an outcome picked, or None (cancelled, unknown option id)."""
    if not isinstance(outcome, SelectedOutcome):
        return None
    prefix, _, digits = outcome.option_id.partition(CHOICE_OPTION_PREFIX)
    if prefix or not digits.isascii() or not digits.isdigit():
        return None
    index = int(digits)
    return index if index < choice_count and digits == str(index) else None


def parse_permission_outcome(result: JsonValue) -> PermissionOutcome:
    """Read a ``session/request_permission`` result.

    Anything malformed counts as ``CancelledOutcome``: an approval the client did not
    clearly give is a denial (the reference treats unknown outcomes as "no decision").
    """
    try:
        return msgspec.convert(result, RequestPermissionResult).outcome
    except msgspec.ValidationError:
        return CancelledOutcome()
