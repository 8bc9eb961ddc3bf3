"""Write ``acp_core/schema/generated.py`` and ``generated_leaves.py``: ACP's standard types as msgspec Structs, generated
from the official ACP JSON Schema (``schema/v1/schema.json`` of the npm package
``@agentclientprotocol/sdk``, the version tests/acp_schema.py pins and installs).

Run: ``uv run python scripts/gen_acp_schema.py [--schema PATH] [--check]``. Without
``--schema`` the schema comes from the test cache (installed with npm on first use, as the
schema tests do). ``--check`` writes nothing and exits 1 when the file is out of date
(tests/core/test_generated_schema.py makes the same check in CI).

Only names and types carry over from the schema, not its prose. The rules:

* a ``$defs`` object becomes a ``WireStruct`` (camelCase on the wire, snake_case in Python,
  keyword-only); ``_meta`` becomes ``meta``;
* an optional property is ``T | None = None``, omitted from the wire when None (never
  ``null``); a property without a type (``rawInput``) is ``Json | UnsetType = UNSET``, so
  an explicit ``null`` stays expressible; a property whose default is a scalar or a list
  (``loadSession``, ``image``, ``authMethods``) is required in Python: it is always sent, so
  no client has to know the default;
* a ``oneOf`` of string constants is a ``Literal``; an open one (a plain string among the
  constants) is ``str``;
* a ``oneOf`` discriminated by a constant property (``sessionUpdate``, content ``type``,
  ``outcome``) becomes msgspec tagged Structs, one per variant, and a union alias; a
  variant is named after the type it refers to when nothing else uses that type, else
  after its tag;
* a union msgspec cannot decode (object variants without a tag) is ``Json``, unless the
  tables below say how to read it.

The tables below are the decisions the schema cannot make: the names acp_core uses, the
ZeroClaw fields (the ZeroClaw ACP documentation adds a few fields to ACP types), and the key
order of the documentation's examples (tests/core/golden pins it byte for byte).
"""

from __future__ import annotations

import argparse
import difflib
import json
import keyword
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
OUTPUT: Final = REPO / "packages/acp-core/src/acp_core/schema/generated.py"
LEAVES_OUTPUT: Final = OUTPUT.with_name("generated_leaves.py")

ROOTS: Final = (
    "InitializeResponse",
    "NewSessionResponse",
    "LoadSessionResponse",
    "ListSessionsResponse",
    "SetSessionConfigOptionResponse",
    "PromptResponse",
    "SessionNotification",
    "RequestPermissionRequest",
    "RequestPermissionResponse",
)
"""What acp_core sends or reads as ACP types; every type they use comes along."""

NAMES: Final = {
    "InitializeResponse": "InitializeResult",
    "NewSessionResponse": "NewSessionResult",
    "LoadSessionResponse": "RestoredSessionResult",
    "ListSessionsResponse": "ListSessionsResult",
    "SetSessionConfigOptionResponse": "SetConfigOptionResult",
    "PromptResponse": "PromptResult",
    "RequestPermissionRequest": "RequestPermissionParams",
    "RequestPermissionResponse": "RequestPermissionResult",
    "RequestPermissionOutcome": "PermissionOutcome",
    "RequestPermissionOutcome.cancelled": "CancelledOutcome",
    "SelectedPermissionOutcome": "SelectedOutcome",
    "ToolCall": "ToolCallStart",
    "ToolCallUpdate": "PermissionToolCall",
    "Content": "ToolCallContentBlock",
    "Diff": "ToolCallDiff",
    "Terminal": "ToolCallTerminal",
    "Plan": "PlanUpdate",
    "SessionConfigSelect": "ConfigOption",
    "SessionConfigSelectOption": "ConfigOptionValue",
    "UnstructuredCommandInput": "AvailableCommandInput",
    "TextResourceContents": "TextResource",
    "BlobResourceContents": "BlobResource",
}
"""Schema name (or ``Union.tag`` for a variant named after its tag) → acp_core's name."""

SAME_SHAPE: Final = {"ResumeSessionResponse": "LoadSessionResponse"}
"""Types generated once under one name: the generator checks they still match."""

NARROWED: Final = {
    # ACP offers boolean options only to a client that declares
    # clientCapabilities.session.configOptions.boolean; ZeroClaw sends select options.
    "SessionConfigOption": "select",
    # Options without groups: msgspec cannot tell two array shapes apart.
    "SessionConfigSelectOptions": "Ungrouped",
}
"""Unions read as one of their variants (a tag, or a variant's ``title``)."""

MERGED: Final = {
    # A resource with both `blob` and `text` is a binary attachment, as the lenient
    # prompt reader (schema/inbound.py) reads it.
    "EmbeddedResourceResource": (
        "ResourceContents",
        ("BlobResourceContents", "TextResourceContents"),
    ),
}
"""Untagged unions of objects: decoded as one merged Struct, then narrowed (``wire.narrow``)
to the first variant, in this order, whose required fields are present."""

ZEROCLAW_FIELDS: Final = {
    "ToolCallUpdate": {"body": "str | None"},
    "PromptResult": {"sessionId": "str", "content": "str", "usage": "PromptUsage | None"},
    "NewSessionResult": {"workspaceDir": "str", "_meta": "NewSessionMeta | None"},
    "InitializeResult": {"_meta": "InitializeMeta | None"},
    # reject-with-edit's replacement text (ZeroClaw ACP documentation: permissions).
    "SelectedOutcome": {"replacementContent": "str | None"},
    # ACP's unstable sessionCapabilities.fork (schema.unstable.json): session/fork is served.
    "SessionCapabilities": {"fork": "SessionForkCapabilities | None"},
}
"""Fields the ZeroClaw ACP documentation adds to ACP types (or types more narrowly); the
types they name live in schema/zeroclaw.py. ``PromptResult.usage`` and
``SessionCapabilities.fork`` are ACP's unstable ``PromptResponse.usage`` and
``SessionCapabilities.fork`` (schema.unstable.json)."""

WIRE_ORDER: Final = {
    "ToolCallStart": ("toolCallId", "title", "kind", "status", "rawInput", "name", "content"),
    "ToolCallUpdate": (
        *("toolCallId", "status", "rawOutput", "name", "title", "kind", "body", "content"),
        *("locations", "rawInput"),
    ),
    "PermissionToolCall": ("toolCallId", "title", "kind", "status", "rawInput", "content"),
    "RequestPermissionParams": ("sessionId", "options", "toolCall"),
    "PromptResult": ("sessionId", "stopReason", "content", "usage"),
    "NewSessionResult": ("sessionId", "workspaceDir"),
    "InitializeResult": ("protocolVersion", "agentCapabilities", "agentInfo"),
    "SessionCapabilities": ("resume", "close", "list", "delete", "additionalDirectories"),
    "PlanEntry": ("content", "status", "priority"),
    "ResourceLink": ("uri", "name", "title", "description", "mimeType", "size"),
    "ResourceContents": ("uri", "mimeType", "text", "blob"),
}
"""Key order where the ZeroClaw ACP documentation's examples differ from the schema's:
these fields first, the rest in schema order, ``_meta`` last."""

SENT_WHEN_NULL: Final = {("ToolCallDiff", "oldText")}
"""Optional fields sent as ``null`` rather than omitted: ACP's ``Diff.oldText`` is null for a
new file, and a client such as Toad previews a new file only when the key is there."""

HEADER: Final = """\
# Generated from schema/v1/schema.json of {package} {version}, the official
# ACP schema, by scripts/gen_acp_schema.py. Do not edit by hand: change the generator's
# tables and run `uv run python scripts/gen_acp_schema.py`. ZeroClaw's own types, which
# the fields marked "# ZeroClaw" use, are written by hand in schema/zeroclaw.py.
"""


PRIMITIVES: Final = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


@dataclass
class Field:
    """One property: its wire name, its Python annotation, and how it defaults."""

    wire: str
    annotation: str
    default: str | None = None  # Python source of the default; None: required
    factory: bool = False  # ``default`` is a default_factory
    zeroclaw: bool = False

    @property
    def python(self) -> str:
        if self.wire == "_meta":
            return "meta"
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", self.wire).lower()
        return f"{name}_" if keyword.iskeyword(name) else name

    def render(self) -> str:
        # WireStruct's rename="camel" gives the wire name, unless the two names do not map.
        renamed = re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), self.python) != self.wire
        options = [f'name="{self.wire}"'] if renamed else []
        if self.default is not None:
            options.insert(0, f"{'default_factory' if self.factory else 'default'}={self.default}")
        value = f" = {self.default}" if self.default is not None else ""
        if renamed or self.factory:
            value = f" = msgspec.field({', '.join(options)})"
        note = "  # ZeroClaw" if self.zeroclaw else ""
        return f"    {self.python}: {self.annotation}{value}{note}"


@dataclass
class Struct:
    name: str
    doc: str | None
    fields: list[Field]
    tag: tuple[str, str] | None = None
    base: str = "WireStruct"
    narrowing: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    def render(self) -> str:
        options = f', tag_field="{self.tag[0]}", tag="{self.tag[1]}"' if self.tag else ""
        lines = [f"class {self.name}({self.base}{options}, kw_only=True):"]
        if self.doc:
            lines += [f'    """{self.doc}"""', ""]
        lines += [item.render() for item in self.fields]
        for python, base, variants in self.narrowing:
            lines += ["", "    def __post_init__(self) -> None:"]
            choices = ", ".join(variants) + ("," if len(variants) == 1 else "")
            lines += [f"        self.{python} = narrow(self.{python}, {base}, ({choices}))"]
        if lines[-1] == "":
            lines.pop()
        if len(lines) == 1:
            lines.append("    pass")
        return "\n".join(lines)


def _ref_name(node: dict[str, Any]) -> str:
    return str(node["$ref"]).removeprefix("#/$defs/")


def _branches(definition: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = definition.get("oneOf", definition.get("anyOf", []))
    return found


def _tag(branch: dict[str, Any]) -> tuple[str, str] | None:
    """``(property, value)`` when ``branch`` is a variant discriminated by a constant."""
    consts = [(k, v["const"]) for k, v in branch.get("properties", {}).items() if "const" in v]
    if len(consts) == 1 and branch.get("required") == [consts[0][0]]:
        return consts[0]
    return None


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [_ref_name(value)] if "$ref" in value else []
        return found + [ref for item in value.values() for ref in _refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _refs(item)]
    return []


def _shape(value: Any) -> Any:
    """A definition without its prose or method binding, to compare two of them."""
    if isinstance(value, dict):
        ignored = ("description", "title", "x-method", "x-side")
        return {
            key: _shape(item)
            for key, item in value.items()
            if not (key in ignored and isinstance(item, str))
        }
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return value


class Generator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = schema["$defs"]
        self.uses = Counter(_refs(self.defs))
        self.literals: dict[str, str] = {}
        self.unions: dict[str, str] = {}
        self.structs: dict[str, list[Struct]] = {}
        self.pending: list[str] = []

    def body(self) -> tuple[list[tuple[str, str]], list[str]]:
        """The definitions (name, text) in module order, and the names they define."""
        for alias, original in SAME_SHAPE.items():
            if _shape(self.defs[alias]) != _shape(self.defs[original]):
                raise SystemExit(f"{alias} no longer has the shape of {original}: generate both")
        self.pending.extend(ROOTS)
        while self.pending:
            name = self.pending.pop()
            if name not in self.structs and name not in self.literals and name not in self.unions:
                self.emit(name)
        order = list(self.defs)
        structs = [s for name in order for s in self.structs.get(name, [])]
        blocks = [self.literals[name] for name in order if name in self.literals]
        blocks += [struct.render() for struct in structs]
        blocks += [self.unions[name] for name in order if name in self.unions]
        names = [block.split(":", 1)[0] for block in blocks if ": TypeAlias" in block]
        names += [struct.name for struct in structs]
        if len(set(names)) != len(names):
            raise SystemExit(
                f"two types share a name: {sorted(n for n in names if names.count(n) > 1)}"
            )
        return [(_defined_name(block), block) for block in blocks], sorted(names)

    # -- annotations --------------------------------------------------------------------

    def annotation(self, node: dict[str, Any]) -> tuple[str, bool]:
        """(annotation, nullable) of a property's schema."""
        if "$ref" in node:
            return self.ref(_ref_name(node)), False
        if len(node.get("allOf", ())) == 1:
            return self.annotation(node["allOf"][0])
        branches = [b for b in _branches(node) if b.get("type") != "null"]
        if len(branches) == 1:
            return self.annotation(branches[0])[0], len(branches) < len(_branches(node))
        kind = node.get("type")
        if isinstance(kind, list):
            single = next(k for k in kind if k != "null")
            return self.annotation({**node, "type": single})[0], "null" in kind
        if "const" in node:
            return f'Literal["{node["const"]}"]', False
        if kind == "array":
            return f"list[{self.annotation(node['items'])[0]}]", False
        if kind in PRIMITIVES:
            return PRIMITIVES[kind], False
        if kind == "object" and "properties" not in node:
            return "dict[str, Json]", False
        if kind is None and not branches and "properties" not in node:
            return "Json", False  # any JSON value (rawInput, rawOutput)
        raise SystemExit(f"no Python type for {json.dumps(node)[:200]}")

    def ref(self, name: str) -> str:
        definition = self.defs[name]
        branches = _branches(definition)
        if name in MERGED:
            self.pending.append(name)
            return MERGED[name][0]
        if name in NARROWED:
            chosen = self.variant(name)
            if "properties" not in definition:
                return self.annotation(chosen)[0]
            self.pending.append(name)
            return self.name_of(_ref_name(chosen["allOf"][0]))
        if "properties" in definition or definition.get("type") == "object":
            self.pending.append(name)
            return self.name_of(name)
        if branches and all("const" in b for b in branches):
            self.pending.append(name)
            return self.name_of(name)
        if branches and all(b.get("type") == "string" for b in branches):
            return "str"  # an open enum: any string, the constants are the known ones
        if len(branches) == 1:
            return self.annotation(branches[0])[0]
        if branches and all(_tag(b) for b in branches):
            self.pending.append(name)
            return self.name_of(name)
        if branches or not definition:
            return "Json"  # object variants without a tag: msgspec cannot choose one
        return self.annotation(definition)[0]

    def name_of(self, key: str) -> str:
        return NAMES.get(key, key)

    def variant(self, name: str) -> dict[str, Any]:
        choice = NARROWED[name]
        for branch in _branches(self.defs[name]):
            tag = _tag(branch)
            if choice in (branch.get("title"), tag[1] if tag else None):
                return branch
        raise SystemExit(f"{name} has no variant {choice!r}: update NARROWED")

    # -- definitions --------------------------------------------------------------------

    def emit(self, name: str) -> None:
        definition = self.defs[name]
        branches = _branches(definition)
        if name in MERGED:
            self.emit_merged(name)
        elif name in NARROWED:
            chosen = self.variant(name)
            ref, tag = _ref_name(chosen["allOf"][0]), _tag(chosen)
            assert tag is not None
            target = self.defs[ref]
            props = {**definition["properties"], tag[0]: chosen["properties"][tag[0]]}
            props.update(target["properties"])
            required = [*definition.get("required", ()), tag[0], *target.get("required", ())]
            about = f"ACP ``{name}`` of ``type`` ``{tag[1]}`` (``{ref}``)."
            self.add(name, self.struct(self.name_of(ref), about, props, required))
        elif "properties" in definition or definition.get("type") == "object":
            python = self.name_of(name)
            doc = f"ACP ``{name}``." if python != name else None
            props, required = definition.get("properties", {}), definition.get("required", [])
            self.add(name, self.struct(python, doc, props, required))
        elif all("const" in b for b in branches):
            values = ", ".join(f'"{b["const"]}"' for b in branches)
            self.literals[name] = f"{self.name_of(name)}: TypeAlias = Literal[{values}]"
        else:
            members = " | ".join(self.emit_variant(name, branch) for branch in branches)
            self.unions[name] = f"{self.name_of(name)}: TypeAlias = {members}"

    def emit_variant(self, union: str, branch: dict[str, Any]) -> str:
        tag = _tag(branch)
        if tag is None:
            raise SystemExit(f"{union}: a variant without a tag")
        refs = [_ref_name(part) for part in branch.get("allOf", ())]
        ref = refs[0] if refs else None
        if ref is not None and self.uses[ref] == 1:
            python, doc = self.name_of(ref), f"ACP ``{ref}``, the ``{tag[1]}`` ``{union}``."
        else:
            default = "".join(part.capitalize() for part in tag[1].split("_"))
            python = NAMES.get(f"{union}.{tag[1]}", default)
            doc = f"ACP ``{union}`` ``{tag[1]}``" + (f" (a ``{ref}``)." if ref else ".")
        source = self.defs[ref] if ref else {}
        props = {k: v for k, v in branch["properties"].items() if k != tag[0]}
        props.update(source.get("properties", {}))
        struct = self.struct(python, doc, props, source.get("required", []), tag)
        self.add(union, struct)
        return python

    def emit_merged(self, name: str) -> None:
        base, variants = MERGED[name]
        shapes = [self.defs[variant] for variant in variants]
        props: dict[str, Any] = {}
        for shape in shapes:
            props.update(shape["properties"])
        common = set.intersection(*(set(shape["required"]) for shape in shapes))
        doc = f"ACP ``{name}``, read as one of: {', '.join(self.name_of(v) for v in variants)}."
        self.add(name, self.struct(base, doc, props, sorted(common)))
        for variant, shape in zip(variants, shapes, strict=True):
            declared = shape["properties"]
            own = {k: v for k, v in declared.items() if k in shape["required"] and k not in common}
            struct = self.struct(self.name_of(variant), f"ACP ``{variant}``.", own, list(own))
            struct.base = base
            self.add(name, struct)

    def add(self, key: str, struct: Struct) -> None:
        self.structs.setdefault(key, []).append(struct)

    def struct(
        self,
        python: str,
        doc: str | None,
        props: dict[str, Any],
        required: list[str],
        tag: tuple[str, str] | None = None,
    ) -> Struct:
        fields = [self.field(python, wire, node, wire in required) for wire, node in props.items()]
        for wire, annotation in ZEROCLAW_FIELDS.get(python, {}).items():
            found = [item for item in fields if item.wire == wire]
            if found:
                found[0].annotation, found[0].zeroclaw = annotation, True
            else:
                default = "None" if annotation.endswith("| None") else None
                fields.append(Field(wire, annotation, default, zeroclaw=True))
        order = WIRE_ORDER.get(python, ())
        missing = set(order) - {item.wire for item in fields}
        if missing:
            raise SystemExit(f"{python} has no field {sorted(missing)}: update WIRE_ORDER")
        rank = {wire: index for index, wire in enumerate(order)}
        fields.sort(key=lambda item: (item.wire == "_meta", rank.get(item.wire, len(rank))))
        struct = Struct(python, doc, fields, tag)
        for item in fields:
            for base, variants in MERGED.values():
                if item.annotation == base:
                    choices = tuple(self.name_of(variant) for variant in variants)
                    struct.narrowing.append((item.python, base, choices))
        return struct

    def field(self, owner: str, wire: str, node: dict[str, Any], required: bool) -> Field:
        if wire == "_meta":
            return Field(wire, "dict[str, Json] | None", "None")
        annotation, nullable = self.annotation(node)
        if annotation == "Json":
            return Field(wire, "Json | UnsetType", None if required else "UNSET")
        if (owner, wire) in SENT_WHEN_NULL:
            return Field(wire, f"{annotation} | None", "default_null", factory=True)
        always_sent = node.get("default") is not None and not isinstance(node["default"], dict)
        if required or always_sent:
            return Field(wire, f"{annotation} | None" if nullable else annotation)
        return Field(wire, f"{annotation} | None", "None")


def _defined_name(block: str) -> str:
    if block.startswith("class "):
        return block.removeprefix("class ").split("(", 1)[0]
    return block.split(":", 1)[0]


def split_leaves(definitions: list[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """The names of a part of the definitions that refers to nothing outside itself (about
    half their lines, for LEAVES_OUTPUT) and the rest (for OUTPUT, which imports them).

    A definition's closure is itself and every name it refers to, transitively; the part
    is a union of the smallest closures, so it never needs a name from the rest.
    """
    texts = dict(definitions)
    refers = {
        name: {other for other in re.findall(r"\b[A-Z]\w*", text) if other in texts} - {name}
        for name, text in definitions
    }

    def closure(name: str) -> set[str]:
        seen, todo = {name}, [name]
        while todo:
            for other in refers[todo.pop()] - seen:
                seen.add(other)
                todo.append(other)
        return seen

    def lines(names: set[str]) -> int:
        return sum(texts[name].count("\n") + 3 for name in names)

    half = lines(set(texts)) // 2
    leaves: set[str] = set()
    for name in sorted(texts, key=lambda n: (lines(closure(n)), n)):
        grown = leaves | closure(name)
        if lines(grown) <= half:
            leaves = grown
    return leaves, set(texts) - leaves


def generate(schema_path: Path) -> dict[Path, str]:
    """The text of generated.py and generated_leaves.py for the schema at ``schema_path``,
    formatted by ruff. ACP's types are two modules so that each stays a readable size;
    generated.py re-exports the leaves, so its ``__all__`` still lists every type."""
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    package = json.loads((schema_path.parents[2] / "package.json").read_text(encoding="utf-8"))
    definitions, _ = Generator(schema).body()
    leaves, rest = split_leaves(definitions)
    header = HEADER.format(package=package["name"], version=package["version"])
    leaves_module = _module(
        header,
        "ACP's standard types that refer to no type of generated.py (its building blocks).",
        [(name, text) for name, text in definitions if name in leaves],
        [],
    )
    module = _module(
        header,
        "ACP's standard types (see scripts/gen_acp_schema.py for the rules).",
        [(name, text) for name, text in definitions if name in rest],
        [f"from acp_core.schema.{LEAVES_OUTPUT.stem} import *  # noqa: F403 (the leaves)"],
        reexported=sorted(leaves),
    )
    return {LEAVES_OUTPUT: leaves_module, OUTPUT: module}


def _module(
    header: str,
    doc: str,
    definitions: list[tuple[str, str]],
    imports: list[str],
    reexported: Sequence[str] = (),
) -> str:
    body = "\n\n\n".join(text for _, text in definitions)
    names = sorted(name for name, _ in definitions)
    exported = sorted([*names, *reexported])
    used = [name for name in ("UNSET", "UnsetType") if re.search(rf"\b{name}\b", body)]
    wire = ("Json", "WireStruct", "default_null", "narrow")
    wire_used = [name for name in wire if re.search(rf"\b{name}\b", body)]
    annotations = " ".join(a for fields in ZEROCLAW_FIELDS.values() for a in fields.values())
    zeroclaw = sorted(
        name
        for name in set(re.findall(r"[A-Z]\w*", annotations)) - {"None"}
        if re.search(rf"\b{name}\b", body) and name not in names
    )
    lines = [header]
    if reexported:
        # The leaves' names are used below through the star import (ruff cannot see them).
        lines += ["# ruff: noqa: F405", ""]
    lines += [f'"""{doc}"""', "", "from __future__ import annotations", ""]
    typing_used = [name for name in ("Literal", "TypeAlias") if re.search(rf"\b{name}\b", body)]
    if typing_used:
        lines += [f"from typing import {', '.join(typing_used)}", ""]
    lines.append("import msgspec")
    if used:
        lines.append(f"from msgspec import {', '.join(used)}")
    lines.append("")
    lines += imports
    if wire_used:
        lines.append(f"from acp_core.schema.wire import {', '.join(wire_used)}")
    if zeroclaw:
        lines.append(f"from acp_core.schema.zeroclaw import {', '.join(zeroclaw)}")
    lines += ["", "__all__ = [", *(f'    "{name}",' for name in exported), "]"]
    lines += ["", "", body, ""]
    return _ruff_format("\n".join(lines))


def _ruff_format(source: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(OUTPUT), "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"ruff format failed: {done.stderr.strip()}")
    return done.stdout


def default_schema() -> Path:
    """The pinned schema, installed into the test cache when it is not there yet."""
    sys.path.insert(0, str(REPO))
    import pytest
    from tests.acp_schema import install_schema

    try:
        return install_schema()
    except (pytest.skip.Exception, pytest.fail.Exception) as exc:
        raise SystemExit(str(exc)) from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schema", type=Path, help="schema/v1/schema.json of the ACP SDK")
    parser.add_argument("--check", action="store_true", help="only say if a file is stale")
    args = parser.parse_args()
    for output, text in generate(args.schema or default_schema()).items():
        current = output.read_text(encoding="utf-8") if output.exists() else ""
        if not args.check:
            output.write_text(text, encoding="utf-8")
        elif text != current:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), lineterm="")
            sys.stderr.write("\n".join(diff) + "\n")
            raise SystemExit(f"{output.relative_to(REPO)} is out of date: run this script")


if __name__ == "__main__":
    main()
