"""deliver_file: hand a workspace file back to the client (the ZeroClaw ACP documentation, "Delivering files").

The file must pass the same jail as file_read (and is opened the same way: the file the
jail checked, acp_server/security/beneath.py), be a regular file and be at most 10 MiB
(read bounded to limit + 1, so a file growing under us is still caught). Its bytes are
copied to ``uploads/<sha256>.<ext>`` and identified by ``attachment://deliver/<sha256>.<ext>``,
never by the caller's filename. The model-facing result is a small JSON object carrying the
``uri`` (the ZeroClaw ACP documentation: "carried structurally on the tool result (JSON field uri)"); the card shows
one human line (``delivery_summary``), no base64 and no machine trailer: the runtime embeds
the blob in the ``tool_call_update`` after re-checking the copy with
``uploads.read_verified``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec
import trio
from msgspec import Meta, field

from acp_core.blobs import (
    DEFAULT_MAX_BLOB_BYTES,
    DELIVER_URI_PREFIX,
    deliver_uri,
    file_extension,
    guess_mime,
)
from acp_server.agent.io.uploads import UploadError, store_upload
from acp_server.agent.tools._args import strip_control_chars
from acp_server.agent.tools._titles import target_title
from acp_server.agent.tools.arguments import SchemaOf, ToolArguments, parse_arguments, read_stored
from acp_server.agent.tools.base import (
    DeliveredFile,
    RefusedCall,
    ToolContext,
    ToolDefinition,
    ToolError,
    ToolOutput,
)
from acp_server.agent.tools.files import display_path, open_regular_file, resolve
from acp_server.model import DeliveredRecord, ToolRecord
from acp_server.patterns import LazyPattern
from acp_server.security import PathArgument, SecurityPolicy, ToolRules, deliver_path_denial

DEFAULT_MAX_DELIVER_BYTES: Final = DEFAULT_MAX_BLOB_BYTES
_MIME_SHAPE: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$&^_.+-/;= "
)


class _Stored(msgspec.Struct, frozen=True):
    path: Path
    size: int
    sha256: str
    ext: str


def _read_bounded(policy: SecurityPolicy, path: Path, shown: str, limit: int) -> bytes:
    with open(open_regular_file(policy, path, shown), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise ToolError(f"File too large: {size} bytes (limit: {limit} bytes)")
        data = handle.read(limit + 1)
    if len(data) > limit:  # it grew after fstat
        raise ToolError(f"File too large: more than {limit} bytes (limit: {limit} bytes)")
    return data


def _copy_to_uploads(
    policy: SecurityPolicy, path: Path, shown: str, uploads_dir: Path, limit: int
) -> _Stored:
    data = _read_bounded(policy, path, shown, limit)
    digest = hashlib.sha256(data).hexdigest()
    ext = file_extension(path.name)
    # The on-disk name is the uri's last segment (the ZeroClaw ACP documentation: "the same full digest").
    storage_name = deliver_uri(digest, ext).removeprefix(DELIVER_URI_PREFIX)
    try:
        stored = store_upload(uploads_dir, storage_name, data)
    except UploadError as exc:
        raise ToolError(str(exc)) from None
    return _Stored(stored, len(data), digest, ext)


def _clean_mime(value: str | None, filename: str) -> str:
    """The caller's MIME type when it is a plausible one, else a guess from the extension."""
    if value is not None:
        candidate = value.strip()
        if candidate and "/" in candidate and all(char in _MIME_SHAPE for char in candidate):
            return candidate
    return guess_mime(filename)


def _legacy_delivery_record(arguments: Mapping[str, Any], text: str) -> ToolRecord | None:
    """The record of a delivery stored before results carried one (schema < 3): read back
    from its result text, the only place those rows kept it."""
    delivered = parse_delivery_text(text)
    if delivered is None:
        return None
    filename, size, uri = delivered
    given = read_stored(DeliverFileArguments, arguments)
    if given is None:
        return None
    return ToolRecord(
        delivered=DeliveredRecord(
            uri=uri,
            filename=filename,
            title=delivery_title(given, filename),
            mime_type=delivery_mime(given, filename),
            size=size,
        )
    )


class DeliverFileArguments(ToolArguments):
    path: Annotated[str, Meta(min_length=1, description="File path inside the workspace.")]
    mime_type: (
        Annotated[str, Meta(description="MIME type; guessed from the extension if omitted.")] | None
    ) = field(default=None, name="mimeType")
    title: (
        Annotated[
            str, Meta(description="Chat label, e.g. 'Quarterly report' (default: the filename).")
        ]
        | None
    ) = None


class DeliverFileTool:
    definition: Final = ToolDefinition(
        name="deliver_file",
        kind="other",
        rules=ToolRules(path_argument=PathArgument(plain=True)),
        title=target_title("Deliver", "path"),
        legacy_record=_legacy_delivery_record,
        arguments=DeliverFileArguments,
    )
    name = definition.name
    description = (
        "Hand a workspace file to the user for download or preview (at most 10 MiB). "
        "Returns the file's uri (attachment://deliver/...): cite exactly that uri, never "
        "invent one."
    )
    # Reads a workspace file; the uploads/ copy is server-managed storage, so read-only
    # profiles may still hand files to the user.
    side_effects = False
    parameters = SchemaOf(DeliverFileArguments)

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_DELIVER_BYTES) -> None:
        self.max_bytes = max_bytes

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        given = parse_arguments(DeliverFileArguments, arguments)
        denial = deliver_path_denial(given.path)
        if denial is not None:
            raise RefusedCall(denial)
        path = resolve(ctx, given.path)
        shown = display_path(ctx.policy, path)
        filename = path.name
        title = delivery_title(given, filename)
        mime_type = delivery_mime(given, filename)
        stored = await trio.to_thread.run_sync(
            _copy_to_uploads, ctx.policy, path, shown, ctx.uploads_dir, self.max_bytes
        )
        delivered = DeliveredFile(
            uri=deliver_uri(stored.sha256, stored.ext),
            path=stored.path,
            filename=filename,
            title=title,
            mime_type=mime_type,
            size=stored.size,
            sha256=stored.sha256,
        )
        return ToolOutput(
            delivery_result(delivered),
            delivered=delivered,
            summary=delivery_summary(filename, stored.size),
        )


# The result text, title and MIME type are functions of the call's arguments and result.
# The runtime stores them as the call's DeliveredRecord; parse_delivery_text reads them back
# from results stored before records existed (_legacy_delivery_record).


def delivery_result(delivered: DeliveredFile) -> str:
    """The model-facing result of a delivery: a JSON object with the ``uri`` to cite."""
    return json.dumps(
        {
            "delivered": delivered.filename,
            "title": delivered.title,
            "mimeType": delivered.mime_type,
            "size": delivered.size,
            "uri": delivered.uri,
        },
        ensure_ascii=False,
    )


def delivery_summary(filename: str, size: int) -> str:
    """What a delivery's card shows as ``rawOutput`` and ``body``: one short human line."""
    return f"Delivered {filename} ({size} bytes)"


_DELIVERY_TEXT: Final = LazyPattern(
    r"Delivered (?P<filename>.+) \((?P<size>[0-9]+) bytes\)\n"
    r"uri=(?P<uri>" + re.escape(DELIVER_URI_PREFIX) + r"[0-9a-f]{64}(?:\.[0-9a-z]{1,16})?)",
    re.DOTALL,
)


def parse_delivery_text(text: str) -> tuple[str, int, str] | None:
    """``(filename, size, uri)`` from the result text of a delivery stored before results
    carried a record (``Delivered <filename> (<size> bytes)`` then ``uri=<uri>``), else None."""
    match = _DELIVERY_TEXT.fullmatch(text)
    return None if match is None else (match["filename"], int(match["size"]), match["uri"])


def delivery_title(given: DeliverFileArguments, filename: str) -> str:
    """The chat label: the caller's title without control characters, else the filename."""
    return strip_control_chars(given.title or "").strip() or filename


def delivery_mime(given: DeliverFileArguments, filename: str) -> str:
    """The caller's ``mimeType`` when plausible, else a guess from the filename."""
    return _clean_mime(given.mime_type, filename)
