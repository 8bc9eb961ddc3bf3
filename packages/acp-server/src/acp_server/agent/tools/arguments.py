"""One definition of each tool's arguments: a msgspec ``Struct``.

A built-in tool declares its arguments once, as a ``ToolArguments`` subclass. The JSON
Schema the model is sent as the tool's ``parameters`` is derived from it
(``arguments_schema``: msgspec's schema with its ``$defs`` inlined into one flat object,
as providers want it), and a call's arguments are read through the same Struct
(``parse_arguments``), so what the model is told and what the tool accepts cannot drift
apart. A refused call gets a ``RefusedCall`` naming the argument and what was expected,
worded from the same schema (``_explained``).

What the JSON Schema cannot say stays with the tool: checks on meaning (an edit that
changes nothing, a header the client frames itself) and lone surrogates, refused before
the Struct is consulted (``_args.unreadable_argument``). Two leniencies are part of
reading arguments, both kept from the hand-written checks this replaced: an optional
argument given as ``null`` is taken as not given (models often send that), and a whole
number written as a float (``3.0``) is an integer, as JSON Schema's ``integer`` type
counts it. A tool may also accept another spelling of a value (``canonical``).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from typing import Any, Final, TypeVar, get_args

import msgspec

from acp_server.agent.tools._args import unreadable_argument
from acp_server.agent.tools.base import RefusedCall
from acp_server.patterns import LazyPattern


class ToolArguments(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Base of a tool's arguments. Unknown arguments are refused: the schema says
    ``additionalProperties: false``, and a misspelt name should be named, not ignored."""

    @classmethod
    def canonical(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` in the spelling the schema names; a tool that also accepts
        another spelling of some value (http_request's ``post``) maps it here."""
        return arguments


Arguments = TypeVar("Arguments", bound=ToolArguments)


_ENUM_ORDER: Final = "x-enum-order"
"""Carries a ``Literal``'s order through msgspec's schema (which sorts an enum) to
``arguments_schema``, which puts it back and drops the key."""


def one_of(choices: Any, description: str | None = None) -> msgspec.Meta:
    """The schema of a ``Literal`` of strings: typed ``string`` and its values in the
    order the ``Literal`` lists them (``low``, ``medium``, ``high``, ``critical``)."""
    listed = {"type": "string", _ENUM_ORDER: list(get_args(choices))}
    return msgspec.Meta(description=description, extra_json_schema=listed)


_SCHEMAS: Final[weakref.WeakKeyDictionary[type[msgspec.Struct], dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)


def arguments_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of ``struct`` as the model is sent it: one flat object (nested
    Structs inlined, no ``$ref``), property descriptions kept, the Structs' own names and
    docstrings left out (the tool's description speaks for it), an optional argument's
    ``null`` left unsaid, and ``required`` always present. Made once per Struct and
    shared by every session: read it, never change it."""
    cached = _SCHEMAS.get(struct)
    if cached is None:
        cached = _SCHEMAS[struct] = _flat_schema(struct)
    return cached


class SchemaOf:
    """A tool class's ``parameters``: ``arguments_schema(struct)``, made the first time a
    model is told the tools, not when a session builds them (``session/new`` stays quick)."""

    def __init__(self, struct: type[msgspec.Struct]) -> None:
        self.struct = struct

    def __get__(self, instance: object, owner: type | None = None) -> dict[str, Any]:
        return arguments_schema(self.struct)


def _flat_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    generated = msgspec.json.schema(struct)
    definitions: dict[str, dict[str, Any]] = generated.pop("$defs", {})
    for definition in definitions.values():
        definition.pop("title", None)
        definition.pop("description", None)

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        reference = node.pop("$ref", None)
        if isinstance(reference, str):
            node = {**definitions[reference.rsplit("/", 1)[-1]], **node}
        members = node.get("anyOf")
        if isinstance(members, list):
            kept = [member for member in members if member != {"type": "null"}]
            if len(kept) == 1:  # ``X | None``: the model is told X
                del node["anyOf"]
                node = {**kept[0], **node}
                if "$ref" in node:
                    return inline(node)
        if "default" in node and node["default"] is None:
            del node["default"]
        order = node.pop(_ENUM_ORDER, None)
        if order is not None:
            assert sorted(order) == sorted(node["enum"]), (order, node)
            node["enum"] = order
        return {key: inline(value) for key, value in node.items()}

    flat: dict[str, Any] = inline(generated)
    flat.setdefault("required", [])
    return flat


def parse_arguments(struct: type[Arguments], arguments: Mapping[str, Any]) -> Arguments:
    """``arguments`` read as ``struct``.

    Raises:
        RefusedCall: a lone surrogate anywhere in them, or they do not fit the schema the
            model was sent; the message names the argument and what was expected.
    """
    problem = unreadable_argument(arguments)
    if problem is not None:
        raise RefusedCall(problem)
    given = struct.canonical(arguments if isinstance(arguments, dict) else dict(arguments))
    try:
        return msgspec.convert(given, struct)
    except msgspec.ValidationError as error:
        problem = str(error)
    # Only once refused, as it is rare: whole numbers written as floats read as integers.
    whole = _whole_numbers_as_int(given)
    if whole is not given:
        try:
            return msgspec.convert(whole, struct)
        except msgspec.ValidationError as error:
            problem, given = str(error), whole
    raise RefusedCall(_explained(problem, arguments_schema(struct), given))


def read_stored(struct: type[Arguments], arguments: Mapping[str, Any]) -> Arguments | None:
    """``arguments`` of a call stored long ago, read as ``struct`` when they fit (names
    the Struct does not know are ignored: a call the tool ran before they were refused);
    None when they do not."""
    known = set(struct.__struct_encode_fields__)
    try:
        return parse_arguments(struct, {k: v for k, v in arguments.items() if k in known})
    except RefusedCall:
        return None


def _whole_numbers_as_int(value: Any) -> Any:
    """``value`` with each float that is a whole number made an int (JSON Schema counts
    ``3.0`` as an integer; msgspec does not). The same object when there is none."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        changed = {key: _whole_numbers_as_int(item) for key, item in value.items()}
        same = all(changed[key] is item for key, item in value.items())
        return value if same else changed
    if isinstance(value, list):
        items = [_whole_numbers_as_int(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


# --- refusals, worded from the schema -----------------------------------------------------

_AT: Final = LazyPattern(r"^(?P<text>.*?)(?: - at `\$(?P<path>.*)`)?$", re.DOTALL)
_STEP: Final = LazyPattern(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_MISSING: Final = LazyPattern(r"Object missing required field `(?P<name>.*)`")
_UNKNOWN: Final = LazyPattern(r"Object contains unknown field `(?P<name>.*)`")
_LENGTH: Final = LazyPattern(r"Expected `(?P<kind>\w+)` of length (?P<op>[<>]=) (?P<limit>\d+)")
_BOUND: Final = LazyPattern(r"Expected `\w+` (?P<op>[<>]=?) (?P<limit>\S+)")
_ENUM: Final = LazyPattern(r"Invalid enum value ")
_WRONG_TYPE: Final = LazyPattern(r"Expected `[^`]+`, got `(?P<got>\w+)`")

_Step = str | int | None
"""A step into the arguments: a name, a list index, or None for any key of a map."""


def _explained(message: str, schema: dict[str, Any], given: Any) -> str:
    """msgspec's ``ValidationError`` text, said the way the model is told its tools: the
    argument by its name (``todos[1].status``), quoted, and what it should be."""
    matched = _AT.match(message)
    assert matched is not None  # the pattern matches any text
    text = matched["text"]
    steps = _steps(matched["path"] or "")
    missing = _MISSING.fullmatch(text)
    if missing is not None:
        steps = [*steps, missing["name"]]
        return f"Missing or invalid '{_name(steps)}': expected {_expected(_at(schema, steps))}"
    unknown = _UNKNOWN.fullmatch(text)
    if unknown is not None:
        known = ", ".join(_at(schema, steps).get("properties", {})) or "none"
        if not steps:
            return f"Unknown argument '{unknown['name']}' (the arguments are: {known})"
        return f"Unknown field '{unknown['name']}' in '{_name(steps)}' (its fields: {known})"
    if None in steps:  # a value in a map (headers): the map is named
        steps = steps[: steps.index(None)]
        return f"Invalid '{_name(steps)}': expected {_expected(_at(schema, steps))}"
    node = _at(schema, steps)
    name = _name(steps)
    length = _LENGTH.fullmatch(text)
    if length is not None:
        limit = int(length["limit"])
        if length["kind"] == "str" and length["op"] == "<=":
            return f"'{name}' is too long (limit: {limit} characters)"
        if length["kind"] == "str":
            return f"'{name}' must not be empty" if limit == 1 else f"'{name}' is too short"
        count = len(_value_at(given, steps) or ())
        if length["op"] == "<=":
            return f"Too many {name}: {count} (limit: {limit})"
        return f"Too few {name}: {count} (at least {limit})"
    bound = _BOUND.fullmatch(text)
    if bound is not None:
        word = "at least" if bound["op"].startswith(">") else "at most"
        return f"Invalid '{name}': must be {word} {bound['limit']}"
    if _ENUM.match(text):
        value = _value_at(given, steps)
        return f"Invalid '{name}': {value!r} (one of {', '.join(node.get('enum', ()))})"
    wrong = _WRONG_TYPE.fullmatch(text)
    if wrong is not None:
        if not steps:
            return f"Invalid arguments: expected {_expected(schema)}, got {wrong['got']}"
        if isinstance(steps[-1], int) and _is_scalar(node):  # an item of a list of strings
            steps = steps[:-1]
            return f"Invalid '{_name(steps)}': expected {_expected(_at(schema, steps))}"
        required = steps[-1] in _at(schema, steps[:-1]).get("required", ())
        lead = "Missing or invalid" if required else "Invalid"
        return f"{lead} '{name}': expected {_expected(node)}"
    return f"Invalid '{name}': {text}" if steps else f"Invalid arguments: {text}"


def _steps(path: str) -> list[_Step]:
    steps: list[_Step] = []
    for name, index in _STEP.findall(path):
        if name:
            steps.append(name)
        else:
            steps.append(None if index == "..." else int(index))
    return steps


def _name(steps: list[_Step]) -> str:
    shown = ""
    for step in steps:
        if isinstance(step, int):
            shown += f"[{step}]"
        elif step is not None:
            shown += f".{step}" if shown else step
    return shown


def _at(schema: dict[str, Any], steps: list[_Step]) -> dict[str, Any]:
    """The part of ``schema`` that describes the value at ``steps``."""
    node = schema
    for step in steps:
        if isinstance(step, int):
            node = node.get("items", {})
        elif step is None:
            extra = node.get("additionalProperties")
            node = extra if isinstance(extra, dict) else {}
        else:
            node = node.get("properties", {}).get(step, {})
    return node


def _value_at(given: Any, steps: list[_Step]) -> Any:
    """The value the arguments hold at ``steps`` (None if there is none)."""
    value = given
    try:
        for step in steps:
            value = value[step]
    except (KeyError, IndexError, TypeError):
        return None
    return value


def _is_scalar(node: dict[str, Any]) -> bool:
    return node.get("type") in ("string", "integer", "number", "boolean")


def _expected(node: dict[str, Any]) -> str:
    """What a value of the schema ``node`` is, in words: ``a non-empty string``, ``a list
    of objects with content and status``."""
    if "enum" in node:
        return "one of " + ", ".join(map(str, node["enum"]))
    kind = node.get("type")
    if kind == "string":
        return "a non-empty string" if node.get("minLength", 0) >= 1 else "a string"
    if kind == "integer":
        return "an integer"
    if kind == "number":
        return "a number"
    if kind == "boolean":
        return "true or false"
    if kind == "array":
        return "a list of " + _plural(node.get("items", {}))
    if kind == "object":
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return "an object of " + _plural(extra)
        required = list(node.get("required", ()))
        if not required:
            return "an object"
        names = (
            required[-1] if len(required) == 1 else f"{', '.join(required[:-1])} and {required[-1]}"
        )
        return f"an object with {names}"
    return "a value"


_NOUN: Final = LazyPattern(r"\b(string|integer|number|object|list|value)\b")


def _plural(node: dict[str, Any]) -> str:
    """``_expected`` for several: ``non-empty strings``, ``objects with content and status``."""
    single = _expected(node)
    if single == "true or false":
        return "booleans (true or false)"
    if single.startswith("one of "):
        return f"values ({single})"
    return _NOUN.sub(r"\1s", single.split(" ", 1)[1], count=1)
