"""``session/request_permission``: the options ZeroClaw offers, and reading the answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from acp_core.jsonrpc import JsonValue
from acp_core.schema.generated import (
    CancelledOutcome,
    PermissionOption,
    PermissionOptionKind,
    PermissionOutcome,
    RequestPermissionResult,
    SelectedOutcome,
)

OptionIds: TypeAlias = Literal["zeroclaw", "kinds"]
"""The optionIds of approval options: ``zeroclaw`` as the ZeroClaw ACP docs show them
(``allow-once``, ``allow-always``, ``reject-once``), or ``kinds``, the same options named
by their ACP kind (``allow_once``, ``allow_always``, ``reject_once``). ACP leaves ids
opaque, but avante.nvim approves an inline answer only when its optionId is ``allow``,
``allow_once`` or ``allow_always`` (lua/avante/llm_tools/helpers.lua, ``M.confirm``), so a
``zeroclaw`` "Allow once" counts there as a rejection. Answers are read in both spellings."""

ALLOW_ONCE: Final = PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once")
ALLOW_ALWAYS: Final = PermissionOption(
    option_id="allow-always", name="Always allow", kind="allow_always"
)
# ZeroClaw's implementation sends kind "reject_with_edit", which base ACP does not define: strict clients
# (the official SDKs) then reject the whole permission request, so edit tools could never be
# approved. The optionId alone identifies the choice; the kind says what it means to a UI.
REJECT_WITH_EDIT: Final = PermissionOption(
    option_id="reject-with-edit", name="Reject with edit", kind="reject_once"
)
REJECT_ONCE: Final = PermissionOption(option_id="reject-once", name="Reject", kind="reject_once")
KIND_OPTION_IDS: Final = {
    ALLOW_ONCE.option_id: "allow_once",
    ALLOW_ALWAYS.option_id: "allow_always",
    REJECT_ONCE.option_id: "reject_once",
    REJECT_WITH_EDIT.option_id: "reject_with_edit",
}
"""Each ZeroClaw optionId → its ``kinds`` spelling."""


def _spelled(option: PermissionOption, ids: OptionIds) -> PermissionOption:
    if ids == "zeroclaw":
        return option
    return PermissionOption(
        option_id=KIND_OPTION_IDS[option.option_id], name=option.name, kind=option.kind
    )


def permission_options(
    *, edit: bool, ids: OptionIds = "zeroclaw", reject_with_edit: bool = False
) -> list[PermissionOption]:
    """The approval choices, in the order the ZeroClaw ACP docs show: one option per kind, so a client that
    keys its buttons by kind (CodeCompanion.nvim binds one key per kind,
    interactions/chat/acp/request_permission.lua) reaches every one. An edit offers
    ``reject-with-edit`` too only when ``reject_with_edit``: the client said it can send
    the replacement text (``_meta.zeroclaw.rejectWithEdit`` in ``initialize``); it is a
    second ``reject_once``, which such a client would show twice and could not fill in."""
    options = [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE]
    if edit and reject_with_edit:
        options = [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_WITH_EDIT, REJECT_ONCE]
    return [_spelled(option, ids) for option in options]


CHOICE_OPTION_PREFIX: Final = "choice-"
ONE_PER_KIND_ORDER: Final[tuple[PermissionOptionKind, ...]] = (
    "allow_once",
    "reject_once",
    "reject_always",
    "allow_always",
)
"""The kinds of ask_user's choices when no two may share one. ``allow_always`` comes last:
a client may remember an "always" answer for the tool, and three choices never need it."""
MAX_ONE_PER_KIND_CHOICES: Final = len(ONE_PER_KIND_ORDER)


def choice_options(choices: Sequence[str], *, one_per_kind: bool = False) -> list[PermissionOption]:
    """ask_user's choices as permission options ``choice-0`` … ``choice-<n-1>``.

    As in ZeroClaw's implementation, every choice is ``allow_once`` except that the last of two or more
    is ``reject_once``: for clients that show each option by its name. ``one_per_kind``
    (at most ``MAX_ONE_PER_KIND_CHOICES`` choices) gives each choice a kind of its own, in
    ``ONE_PER_KIND_ORDER``, and numbers the names (``1. Go``), so a client that keys
    options by kind still sends back the one option of the kind the person picked.

    Raises:
        ValueError: ``one_per_kind`` with more choices than there are kinds.
    """
    if one_per_kind:
        if len(choices) > MAX_ONE_PER_KIND_CHOICES:
            raise ValueError(f"at most {MAX_ONE_PER_KIND_CHOICES} choices, one per kind")
        return [
            PermissionOption(
                option_id=f"{CHOICE_OPTION_PREFIX}{index}",
                name=f"{index + 1}. {text}",
                kind=ONE_PER_KIND_ORDER[index],
            )
            for index, text in enumerate(choices)
        ]
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
    clearly give is a denial (ZeroClaw's implementation treats unknown outcomes as "no decision").
    """
    try:
        return msgspec.convert(result, RequestPermissionResult).outcome
    except msgspec.ValidationError:
        return CancelledOutcome()
