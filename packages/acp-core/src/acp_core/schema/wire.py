"""The base of every ACP wire type: ``WireStruct`` (camelCase names, absent optionals
omitted), the shared literal types and constants, and the msgspec codec helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar

import msgspec

from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonValue, decode_typed

if TYPE_CHECKING:
    Json: TypeAlias = JsonValue
else:
    # msgspec cannot evaluate the recursive JsonValue alias; Any decodes the same values.
    Json = Any


PROTOCOL_VERSION: Final = 1
AGENT_NAME: Final = "zeroclaw-acp"
AGENT_TITLE: Final = "ZeroClaw ACP"

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolCallStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]
StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"
]
PlanEntryStatus: TypeAlias = Literal["pending", "in_progress", "completed"]
PlanEntryPriority: TypeAlias = Literal["high", "medium", "low"]
PermissionOptionKind: TypeAlias = Literal[
    # reject_with_edit is the reference's extension kind; accepted on input, never emitted.
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
    "reject_with_edit",
]


class WireStruct(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """Base of every ACP payload: camelCase on the wire, absent optionals omitted."""


class EmptyObject(WireStruct, kw_only=True):
    """``{}``: capability markers such as ``sessionCapabilities.resume``."""


# --------------------------------------------------------------------------- codec helpers

T = TypeVar("T")

_encoder: Final = msgspec.json.Encoder()


def encode(value: object) -> bytes:
    """Compact JSON for a Struct (or any builtin value)."""
    return _encoder.encode(value)


def decode(type_: type[T], data: bytes | str) -> T:
    """Strictly decode JSON text into ``type_`` (msgspec's C decoder, cached per type).

    Raises:
        msgspec.DecodeError / msgspec.ValidationError (both ``msgspec.DecodeError``).
    """
    return decode_typed(type_, data)


def convert(type_: type[T], value: JsonValue) -> T:
    """Strictly validate already-decoded JSON into ``type_``.

    Raises:
        InvalidParamsError: the value does not have the shape of ``type_``; the message
            includes msgspec's path (e.g. ``at `$.update.content```).
    """
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None


def to_builtins(value: object) -> JsonValue:
    """A Struct as plain dicts/lists with wire names (what ``encode`` would write)."""
    result: JsonValue = msgspec.to_builtins(value)
    return result
