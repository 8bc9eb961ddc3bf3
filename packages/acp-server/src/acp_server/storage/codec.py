"""The row codec: ``ChatMessage`` / plans ↔ the column values the session store writes.

Pure functions; everything that can fail on a message (bad role, arguments that are not
JSON or too large) fails here, before the store opens a transaction.

JSON columns are written and read with msgspec (``bench/store.py``'s codec lines: a
``session/load`` decodes every stored call's arguments and record). The standard library
stays where msgspec would change what is stored or refuse what older rows hold:

- a tool call's arguments are the model's values, and ``json.dumps`` defines which of them
  are JSON (``NaN`` and ``Infinity`` are kept, where msgspec writes ``null``; a set is
  refused, where msgspec writes an array);
- a row msgspec cannot read (``NaN`` / ``Infinity`` written by ``json.dumps``, a lone
  surrogate kept as its ``\\ud800`` escape) is read by ``json.loads``, as before;
- text holding a lone surrogate cannot be UTF-8, so it is written with ASCII escapes.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
from msgspec.structs import replace

from acp_server.model import (
    CallView,
    ChatMessage,
    DeliveredRecord,
    FileDiff,
    FileLocation,
    PlanStep,
    Role,
    StreamedPlan,
    StreamedText,
    ToolCall,
    ToolRecord,
)
from acp_server.patterns import LazyPattern
from acp_server.storage.records import StoreError

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOOL_ARGUMENTS_BYTES: Final = 16 * 1024 * 1024
"""Largest encoded tool-argument object accepted for storage (a model cannot produce more)."""

_ROLES: Final[dict[str, Role]] = {
    "system": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode


def dumps(value: Any) -> str:
    """Compact JSON text with non-ASCII characters as they are: what
    ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` writes, for the values
    this module builds (text, integers, None, lists and objects of them)."""
    try:
        return _encode_json(value).decode()
    except UnicodeEncodeError:
        # A lone surrogate (tool output read with errors="surrogateescape", a model's
        # unpaired escape) has no UTF-8 form; its JSON escape does, and loads reads it back.
        return json.dumps(value, separators=(",", ":"))


def loads(raw: str) -> Any:
    """The value of a stored JSON column; ValueError when it is not JSON."""
    try:
        return _decode_json(raw)
    except ValueError:
        # msgspec refuses NaN / Infinity (json.dumps wrote them into older rows) and the
        # escape of a lone surrogate; the standard library reads both.
        return json.loads(raw)


_NUL_ESCAPE: Final = "\x01"
_ESCAPED: Final = LazyPattern("\x01(.)", re.DOTALL)


def escape_nul(text: str) -> str:
    """``text`` without NUL characters, reversibly (``unescape_nul``), for databases whose
    text type rejects them (PostgreSQL): U+0001 becomes U+0001 U+0001 and NUL becomes
    U+0001 '0'. Text with neither character, nearly all of it, is returned as it is."""
    if "\x00" not in text and _NUL_ESCAPE not in text:
        return text
    return text.replace(_NUL_ESCAPE, _NUL_ESCAPE * 2).replace("\x00", _NUL_ESCAPE + "0")


def unescape_nul(text: str) -> str:
    """The text ``escape_nul`` was given."""
    if _NUL_ESCAPE not in text:
        return text
    return _ESCAPED.sub(lambda match: "\x00" if match.group(1) == "0" else match.group(1), text)


def restore_window(
    per_turn: Sequence[tuple[int | None, int]], max_messages: int | None
) -> tuple[int, int | None]:
    """(stored message count, oldest turn_seq to restore or None for everything) from the
    message count of each turn, newest turn first and rows without a turn (written by
    ZeroClaw's own server) last: the newest whole turns within ``max_messages``, at least one."""
    total = sum(int(count) for _turn, count in per_turn)
    if max_messages is None or total <= max_messages:
        return total, None
    kept = 0
    first_turn: int | None = None
    for turn_seq, count in per_turn:
        if turn_seq is None or (kept and kept + count > max_messages):
            break
        kept += count
        first_turn = turn_seq
    return total, first_turn


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def plan_entries_json(plan: Sequence[PlanStep]) -> list[dict[str, str]]:
    """A plan as stored: the ``plan`` update's ``entries`` objects (``activeForm`` optional)."""
    entries: list[dict[str, str]] = []
    for entry in plan:
        item = {"content": entry.content, "status": entry.status, "priority": entry.priority}
        if entry.active_form is not None:
            item["activeForm"] = entry.active_form
        entries.append(item)
    return entries


def plan_to_json(plan: Sequence[PlanStep]) -> str:
    return dumps(plan_entries_json(plan))


def _plan_entries(items: Any) -> tuple[PlanStep, ...]:
    """Raises ValueError, TypeError, KeyError or AttributeError on a damaged plan."""
    return tuple(
        PlanStep(
            content=str(item["content"]),
            status=item.get("status", "pending"),
            priority=item.get("priority", "medium"),
            active_form=item.get("activeForm"),
        )
        for item in items
    )


def plan_from_json(raw: str, session_id: str) -> tuple[PlanStep, ...] | None:
    try:
        return _plan_entries(loads(raw))
    except (ValueError, TypeError, KeyError, AttributeError):
        # A damaged plan must not make the whole conversation unrecoverable.
        logger.warning("Ignoring an unreadable stored plan for session %s", session_id)
        return None


_LONE_SURROGATE: Final = LazyPattern("[\ud800-\udfff]")


def _encode_arguments(call: ToolCall) -> str:
    """The arguments as JSON text. A lone surrogate (a model's unpaired ``\\ud800``: the
    call was refused, but it is part of the conversation) is kept as its JSON escape,
    which no database refuses and ``json.loads`` reads back as it was. The standard
    library writes them: it decides which of the model's values are JSON (see above)."""
    try:
        encoded = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
        if _LONE_SURROGATE.search(encoded) is not None:
            encoded = json.dumps(call.arguments, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"Tool call {call.id} ({call.name}) has arguments that are not JSON: {exc}"
        ) from exc
    if len(encoded) > DEFAULT_MAX_TOOL_ARGUMENTS_BYTES:
        raise StoreError(
            f"Tool call {call.id} ({call.name}) arguments exceed "
            f"{DEFAULT_MAX_TOOL_ARGUMENTS_BYTES} bytes; not stored"
        )
    return encoded


def _decode_arguments(payload: str) -> dict[str, Any]:
    try:
        value = loads(payload)
    except ValueError:
        return {"arguments": payload}
    return value if isinstance(value, dict) else {"arguments": value}


def record_to_json(record: ToolRecord) -> str:
    """A tool result's record as stored in ``record_json``::

    {"streamed": [{"text": "…"}, {"plan": [<plan entries>]}],
     "delivered": {"uri": …, "filename": …, "title": …, "mimeType": …, "size": …},
     "view": {"diffs": [{"path": …, "oldText": … | null, "newText": …}],
              "locations": [{"path": …, "line": … | null}]},
     "found": [{"path": …, "line": … | null}]}

    ``view`` and ``found`` are left out when the call had none.
    """
    streamed: list[dict[str, Any]] = [
        {"plan": plan_entries_json(item.entries)}
        if isinstance(item, StreamedPlan)
        else {"text": item.text}
        for item in record.streamed
    ]
    value: dict[str, Any] = {"streamed": streamed}
    delivered = record.delivered
    if delivered is not None:
        value["delivered"] = {
            "uri": delivered.uri,
            "filename": delivered.filename,
            "title": delivered.title,
            "mimeType": delivered.mime_type,
            "size": delivered.size,
        }
    view = record.view
    if view is not None:
        value["view"] = {
            "diffs": [
                {"path": diff.path, "oldText": diff.old_text, "newText": diff.new_text}
                for diff in view.diffs
            ],
            "locations": _locations_json(view.locations),
        }
    if record.found:
        value["found"] = _locations_json(record.found)
    return dumps(value)


def _locations_json(locations: Sequence[FileLocation]) -> list[dict[str, Any]]:
    return [{"path": place.path, "line": place.line} for place in locations]


def _locations(items: Any) -> tuple[FileLocation, ...]:
    """Raises ValueError, TypeError, KeyError or AttributeError on damaged locations."""
    return tuple(
        FileLocation(
            path=str(item["path"]), line=None if item.get("line") is None else int(item["line"])
        )
        for item in items
    )


def _view(value: Any) -> CallView | None:
    """Raises ValueError, TypeError, KeyError or AttributeError on a damaged view."""
    if value is None:
        return None
    diffs = tuple(
        FileDiff(
            path=str(item["path"]),
            old_text=None if item.get("oldText") is None else str(item["oldText"]),
            new_text=str(item["newText"]),
        )
        for item in value.get("diffs", ())
    )
    return CallView(diffs=diffs, locations=_locations(value.get("locations", ())))


def record_from_json(raw: str) -> ToolRecord:
    """The stored record; a damaged one reads as empty (the result itself still loads)."""
    try:
        value = loads(raw)
        streamed = tuple(
            StreamedPlan(_plan_entries(item["plan"]))
            if "plan" in item
            else StreamedText(str(item["text"]))
            for item in value.get("streamed", ())
        )
        delivered = value.get("delivered")
        return ToolRecord(
            streamed=streamed,
            delivered=None
            if delivered is None
            else DeliveredRecord(
                uri=str(delivered["uri"]),
                filename=str(delivered["filename"]),
                title=str(delivered["title"]),
                mime_type=str(delivered["mimeType"]),
                size=int(delivered["size"]),
            ),
            view=_view(value.get("view")),
            found=_locations(value.get("found", ())),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        logger.warning("Ignoring an unreadable stored tool record")
        return ToolRecord()


ToolRow = tuple[str, str, str, str, int | None, str | None]
"""(tool_call_id, tool_name, event_kind, payload, ok, record_json) of ``acp_tool_calls``;
``ok`` and ``record_json`` are set on 'out' rows written since schema 3, else None."""


class EncodedMessage(msgspec.Struct, frozen=True):
    """A message ready for INSERT: everything that can fail is done before BEGIN."""

    role: str
    content: str
    reasoning: str | None
    tool_rows: tuple[ToolRow, ...]


def encode_message(message: ChatMessage) -> EncodedMessage:
    if message.role not in _ROLES:
        raise StoreError(f"Unknown message role {message.role!r}; not stored")
    rows: list[ToolRow] = [
        (call.id, call.name, "in", _encode_arguments(call), None, None)
        for call in message.tool_calls
    ]
    content = message.content
    if message.role == "tool" and message.tool_call_id is not None:
        # The result text lives in the 'out' row (as ZeroClaw's own server has it); the
        # message row keeps its place in the conversation order.
        # None stays None: a result without a record round-trips as one (replay then asks
        # its tool to rebuild the record from the text).
        record = None if message.record is None else record_to_json(message.record)
        rows.append(
            (
                message.tool_call_id,
                message.tool_name or "",
                "out",
                message.content,
                int(message.ok),
                record,
            )
        )
        content = ""
    return EncodedMessage(message.role, content, message.reasoning, tuple(rows))


def decode_messages(
    message_rows: Sequence[tuple[int, str, str, str | None]],
    tool_rows: Sequence[tuple[int, str, str, str, str, int | None, str | None]],
) -> tuple[ChatMessage, ...]:
    """Messages from their rows. A result's ``ok`` is its stored flag (a result ZeroClaw's
    own server wrote after the migration has none: it counts as succeeded); its ``record``
    is None only when it was written without one (before schema 3)."""
    calls_by_message: dict[int, list[ToolCall]] = {}
    results_by_message: dict[int, list[ChatMessage]] = {}
    for message_id, call_id, name, kind, payload, ok, record_json in tool_rows:
        if kind == "in":
            call = ToolCall(id=call_id, name=name, arguments=_decode_arguments(payload))
            calls_by_message.setdefault(message_id, []).append(call)
        elif kind == "out":
            result = ChatMessage(
                role="tool",
                content=payload,
                tool_call_id=call_id,
                tool_name=name or None,
                ok=ok is None or bool(ok),
                record=None if record_json is None else record_from_json(record_json),
            )
            results_by_message.setdefault(message_id, []).append(result)

    messages: list[ChatMessage] = []
    for message_id, role_text, content, reasoning in message_rows:
        role = _ROLES.get(role_text, "system")
        calls = tuple(calls_by_message.get(message_id, ()))
        results = results_by_message.get(message_id, ())
        if role == "tool" and results:
            messages.append(replace(results[0], reasoning=reasoning, tool_calls=calls))
            continue
        messages.append(
            ChatMessage(role=role, content=content, reasoning=reasoning, tool_calls=calls)
        )
        # ZeroClaw's own server's layout: results hang off the assistant message that asked
        # for them.
        messages.extend(results)
    return tuple(messages)
