"""A skill tool's command template filled in: every ``{{arg}}`` becomes its value as
literal text, quoted for the place where it stands.

The template is a shell command line the skill's author wrote; the values come from the
model. Where a placeholder stands decides how its value is quoted, so that the shell reads
back exactly the value (POSIX sh, "Quoting"), never an expansion or a second command:

- unquoted, also inside ``$( … )``: the value as one shell word (``shlex.quote``);
- inside ``' … '``: each ``'`` of the value becomes ``'\\''`` (close, quoted quote, reopen);
- inside ``" … "``: ``\\``, ``$``, `` ` `` and ``"`` get a backslash, the only characters
  special there.

Backquotes, ``${ … }``, ``$(( … ))``, ``$' … '``, a ``$( … )`` inside double quotes and a
here-document (``<<``) each have quoting rules of their own: this reading stops at the
first of them, and a placeholder after it makes the tool unusable
(``unquotable_placeholders``), rather than risk quoting a value for the wrong context.
Comments (``#`` at the start of a word, to the end of the line) are skipped.
``{{skill_dir}}`` is quoted the same way as the arguments.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Mapping
from typing import Final

import msgspec

from acp_server.patterns import LazyPattern

PLACEHOLDER: Final = LazyPattern(r"\{\{\s*([A-Za-z0-9_-]+)\s*\}\}")


class Context(enum.Enum):
    UNQUOTED = "unquoted"
    SINGLE = "single quotes"
    DOUBLE = "double quotes"
    SUBSTITUTION = "$( … )"
    OPAQUE = "backquotes, ${ … }, $(( … )), $' … ', $( … ) in double quotes or a here-document"
    """Everything after the first of these: a placeholder there cannot be quoted."""


QUOTABLE: Final = frozenset(
    {Context.UNQUOTED, Context.SUBSTITUTION, Context.SINGLE, Context.DOUBLE}
)
_OPAQUE_OPENERS: Final = ("`", "${", "$((", "$'", "<<")
_WORD_BOUNDARY: Final = frozenset(" \t\n;&|()<>")


class Placeholder(msgspec.Struct, frozen=True):
    name: str
    start: int
    end: int
    context: Context


def _comment_end(template: str, index: int) -> int | None:
    """Where a comment starting at ``index`` ends (the newline), when one starts there."""
    if template[index] != "#" or (index and template[index - 1] not in _WORD_BOUNDARY):
        return None
    end = template.find("\n", index)
    return len(template) if end < 0 else end


def _step(template: str, index: int, stack: list[Context]) -> int:
    """Read the shell syntax at ``index`` in the context on top of ``stack`` (pushing or
    popping contexts); returns where reading goes on."""
    context = stack[-1]
    char = template[index]
    if context is Context.SINGLE:
        if char == "'":
            stack.pop()
        return index + 1
    if char == "\\":
        return index + 2
    if context is Context.DOUBLE:
        if char == '"':
            stack.pop()
        elif char == "`" or template.startswith(("$(", "${"), index):
            stack.append(Context.OPAQUE)
        return index + 1
    comment_end = _comment_end(template, index)
    if comment_end is not None:
        return comment_end
    if template.startswith(_OPAQUE_OPENERS, index):
        stack.append(Context.OPAQUE)
    elif template.startswith("$(", index):
        stack.append(Context.SUBSTITUTION)
        return index + 2
    elif char == ")" and context is Context.SUBSTITUTION:
        stack.pop()
    elif char == "'":
        stack.append(Context.SINGLE)
    elif char == '"':
        stack.append(Context.DOUBLE)
    return index + 1


def placeholders(template: str) -> list[Placeholder]:
    """Every ``{{name}}`` of ``template`` with the context it stands in: a small reading of
    the shell's quoting, enough to know how a value must be quoted there. Once anything it
    does not follow opens (``Context.OPAQUE``), every later placeholder is opaque."""
    found: list[Placeholder] = []
    stack = [Context.UNQUOTED]
    index = 0
    while index < len(template):
        if stack[-1] is Context.OPAQUE:
            found += [
                Placeholder(match.group(1), match.start(), match.end(), Context.OPAQUE)
                for match in PLACEHOLDER.finditer(template, index)
            ]
            break
        match = PLACEHOLDER.match(template, index)
        if match is not None:
            found.append(Placeholder(match.group(1), match.start(), match.end(), stack[-1]))
            index = match.end()
        else:
            index = _step(template, index, stack)
    return found


def unquotable_placeholders(template: str) -> list[Placeholder]:
    """The placeholders standing where no quoting makes a value literal."""
    return [found for found in placeholders(template) if found.context not in QUOTABLE]


def quoted(value: str, context: Context) -> str:
    """``value`` as literal text at a place of ``context`` (one of ``QUOTABLE``)."""
    if context is Context.SINGLE:
        return value.replace("'", "'\\''")
    if context is Context.DOUBLE:
        return re.sub(r'([\\$`"])', r"\\\1", value)
    return shlex.quote(value)


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each placeholder named in ``values`` replaced by its value,
    quoted for its context; other placeholders are left as written.

    Raises:
        ValueError: a placeholder with a value stands where it cannot be quoted.
    """
    out: list[str] = []
    done = 0
    for found in placeholders(template):
        if found.name not in values:
            continue
        if found.context not in QUOTABLE:
            raise ValueError(f"{{{{{found.name}}}}} stands inside {found.context.value}")
        out.append(template[done : found.start])
        out.append(quoted(values[found.name], found.context))
        done = found.end
    out.append(template[done:])
    return "".join(out)
