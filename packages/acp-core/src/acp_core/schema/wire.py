"""The base of every ACP wire type: ``WireStruct`` (camelCase names, absent optionals
omitted), what the generated types need (``Json``, ``narrow``, ``default_null``), the
protocol constants, and the msgspec codec helpers."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

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


class WireStruct(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """Base of every ACP payload: camelCase on the wire, absent optionals omitted."""


S = TypeVar("S", bound=msgspec.Struct)


def default_null() -> None:
    """The default factory of a field sent as ``null`` when it has no value: msgspec's
    ``omit_defaults`` leaves out a field equal to its plain default, never one made by a
    factory (ACP ``Diff.oldText``: null for a new file)."""
    return


@functools.cache
def _own_required(
    merged: type[msgspec.Struct], variants: tuple[type[msgspec.Struct], ...]
) -> tuple[tuple[tuple[str, str], ...], ...]:
    """For each variant, the (name, wire name) of the fields it requires beyond ``merged``."""
    shared = {f.name for f in msgspec.structs.fields(merged) if f.required}
    return tuple(
        tuple(
            (f.name, f.encode_name)
            for f in msgspec.structs.fields(variant)
            if f.required and f.name not in shared
        )
        for variant in variants
    )


def narrow(value: S, merged: type[S], variants: tuple[type[S], ...]) -> S:
    """``value`` as the first of ``variants`` whose required fields it carries.

    msgspec cannot decode a union of object shapes without a tag (ACP's
    ``EmbeddedResourceResource``: text or blob contents), so such a field is decoded as
    ``merged``, which has every variant's fields, and narrowed here. A value built as a
    variant already is returned as it is.

    Raises:
        ValueError: no variant fits (msgspec reports it as a ``ValidationError``).
    """
    if type(value) is not merged:
        return value
    fields = msgspec.structs.asdict(value)
    own = _own_required(merged, variants)
    for variant, required in zip(variants, own, strict=True):
        if all(fields[name] is not None for name, _ in required):
            return variant(**fields)
    wanted = " or ".join(f"`{wire}`" for required in own for _, wire in required)
    raise ValueError(f"expected {wanted}")


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
