"""An MCP ``tools/call`` result as the model sees it.

Text passes through; embedded base64 blobs (and image/audio data) are written under the
session's ``uploads/`` with the prompt-blob helpers (``acp_core.blobs`` naming,
``acp_server.agent.io.uploads.store_upload`` writing) and replaced by the same markers a
prompt attachment gets; the whole is cut at ``DEFAULT_MAX_TOOL_OUTPUT_BYTES``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Final

import trio

from acp_core.blobs import (
    DEFAULT_MAX_BLOB_BYTES,
    PART_SEPARATOR,
    decode_blob,
    display_name,
    guess_mime,
    prompt_marker,
    storage_name,
)
from acp_core.errors import InvalidParamsError
from acp_server.agent.io.uploads import UploadError, store_upload
from acp_server.agent.tools.base import DEFAULT_MAX_TOOL_OUTPUT_BYTES, ToolOutput

if TYPE_CHECKING:
    import mcp_types

_EXTENSION_BY_MIME: Final = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mpeg": "mp3",
    "audio/ogg": "ogg",
    "application/pdf": "pdf",
    "text/plain": "txt",
    "application/json": "json",
}


def _materialize(uploads_dir: Path, data: bytes, filename: str, mime_type: str) -> str:
    """Write one decoded blob under uploads/ and return its prompt marker (blocking)."""
    path = store_upload(uploads_dir, storage_name(data, filename), data)
    return prompt_marker(mime_type, filename, str(path))


async def _blob_piece(uploads_dir: Path, blob: str, filename: str, mime_type: str | None) -> str:
    try:
        data = decode_blob(blob, max_blob_bytes=DEFAULT_MAX_BLOB_BYTES)
    except InvalidParamsError as error:
        return f"[{filename} not saved: {error}]"
    mime = (mime_type or "").strip() or guess_mime(filename)
    try:
        return await trio.to_thread.run_sync(_materialize, uploads_dir, data, filename, mime)
    except UploadError as error:
        return f"[{filename} not saved: {error}]"


def _media_filename(kind: str, mime_type: str) -> str:
    extension = _EXTENSION_BY_MIME.get(mime_type.strip().lower(), "bin")
    return f"{kind}.{extension}"


async def render_result(result: mcp_types.CallToolResult, uploads_dir: Path) -> ToolOutput:
    """A ``tools/call`` result as the model sees it, blobs saved under ``uploads_dir``."""
    import mcp_types

    pieces: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            pieces.append(block.text)
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.BlobResourceContents):
                name = display_name(str(resource.uri))
                pieces.append(
                    await _blob_piece(uploads_dir, resource.blob, name, resource.mime_type)
                )
            else:
                pieces.append(resource.text)
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            name = _media_filename(block.type, block.mime_type)
            pieces.append(await _blob_piece(uploads_dir, block.data, name, block.mime_type))
        elif isinstance(block, mcp_types.ResourceLink):
            pieces.append(f"[Resource: {block.name}] {block.uri}")
    if not pieces and result.structured_content is not None:
        pieces.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = _bounded(PART_SEPARATOR.join(pieces))
    if result.is_error:
        return ToolOutput(text=f"Error: {text or 'the tool reported a failure'}", ok=False)
    return ToolOutput(text=text or "(no output)")


def _bounded(text: str) -> str:
    encoded = text.encode()
    if len(encoded) <= DEFAULT_MAX_TOOL_OUTPUT_BYTES:
        return text
    kept = encoded[:DEFAULT_MAX_TOOL_OUTPUT_BYTES].decode(errors="ignore")
    return (
        f"{kept}\n[output truncated: {len(encoded)} bytes, limit {DEFAULT_MAX_TOOL_OUTPUT_BYTES}]"
    )
