"""Prompt materialisation planning: turn prompt parts into agent text plus files to write.

Two phases (the ZeroClaw ACP documentation: "invalid base64 or oversize blobs return INVALID_PARAMS"; ZeroClaw's implementation
stages everything first): ``plan_prompt`` base64-decodes and size-checks *every* blob
before returning anything, so one bad part means nothing is written. The server then
performs ``PromptPlan.writes`` (content-addressed, so rewriting an identical file is
harmless) and hands ``PromptPlan.text`` to the agent.

Pure: no filesystem access; paths are POSIX strings joined with ``posixpath``.
"""

from __future__ import annotations

import binascii
import hashlib
import posixpath
from collections.abc import Iterable
from typing import Final

import msgspec

from acp_core.errors import InvalidParamsError
from acp_core.schema import (
    BlobResource,
    ContentPart,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

DEFAULT_MAX_BLOB_BYTES: Final = 10 * 1024 * 1024
"""Largest decoded blob accepted in a prompt or delivered (the ZeroClaw ACP documentation: "Maximum decoded size is 10 MB")."""
MAX_EXTENSION_CHARS: Final = 16
FALLBACK_FILENAME: Final = "upload.bin"
FALLBACK_MIME: Final = "application/octet-stream"
DELIVER_URI_PREFIX: Final = "attachment://deliver/"
PART_SEPARATOR: Final = "\n\n"

_MIME_BY_EXTENSION: Final = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "doc": "application/msword",
    "txt": "text/plain",
    "md": "text/markdown",
    "json": "application/json",
}
_URI_SCHEMES: Final = ("file://", "attachment://")


class BlobWrite(msgspec.Struct, frozen=True, kw_only=True):
    """One file the server must write: ``data`` to ``path`` (= uploads dir + storage name)."""

    storage_name: str
    path: str
    data: bytes
    mime_type: str
    display_name: str
    sha256: str


class PromptPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The agent-facing prompt text and the uploads to write before the turn starts."""

    text: str
    writes: list[BlobWrite]


def display_name(uri: str | None) -> str:
    """A safe display filename from a resource URI (as ZeroClaw's implementation names delivered files).

    The last path segment after stripping ``file://`` / ``attachment://``; separators,
    NUL and control characters become ``_``, as does ``..``; nothing usable → ``upload.bin``.
    """
    if not uri:
        return FALLBACK_FILENAME
    path = uri
    for scheme in _URI_SCHEMES:
        if path.startswith(scheme):
            path = path[len(scheme) :]
            break
    segment = path.rsplit("/", 1)[-1]
    if segment in ("", ".", ".."):
        return FALLBACK_FILENAME
    cleaned = "".join(
        "_" if (char in "/\\" or ord(char) < 0x20 or ord(char) == 0x7F) else char
        for char in segment
    )
    return cleaned.replace("..", "_")


def file_extension(filename: str) -> str:
    """The lowercased extension if it is 1–16 ASCII letters/digits, else ``""``."""
    _, dot, ext = filename.rpartition(".")
    if not dot or not _:
        # No dot, or a leading-dot name such as ".bashrc": no extension.
        return ""
    ext = ext.lower()
    if 1 <= len(ext) <= MAX_EXTENSION_CHARS and ext.isascii() and ext.isalnum():
        return ext
    return ""


def guess_mime(filename: str) -> str:
    """MIME type from the filename extension; ``application/octet-stream`` when unknown."""
    return _MIME_BY_EXTENSION.get(file_extension(filename), FALLBACK_MIME)


def storage_name(data: bytes, filename: str) -> str:
    """Content-addressed name ``<sha256 hex>.<ext>`` (ext from ``filename``, if valid)."""
    return _storage_name(hashlib.sha256(data).hexdigest(), file_extension(filename))


def _storage_name(sha256_hex: str, ext: str) -> str:
    return f"{sha256_hex}.{ext}" if ext else sha256_hex


def deliver_uri(sha256_hex: str, ext: str) -> str:
    """``attachment://deliver/<sha256>.<ext>``: a delivered file's opaque identity."""
    return DELIVER_URI_PREFIX + _storage_name(sha256_hex, ext)


def decode_blob(blob: str, *, max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES) -> bytes:
    """Strict standard-alphabet base64 (surrounding whitespace trimmed), size-checked.

    Raises:
        InvalidParamsError: ``Invalid base64: …`` or ``Embedded resource exceeds 10 MB
            limit (<n> bytes)``.
    """
    try:
        # strict_mode: no stray characters, no data after padding, no missing padding,
        # matching ZeroClaw's standard-alphabet decoder.
        data = binascii.a2b_base64(blob.strip(), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidParamsError(f"Invalid base64: {exc}") from None
    if len(data) > max_blob_bytes:
        raise InvalidParamsError(
            f"Embedded resource exceeds {_limit_label(max_blob_bytes)} limit ({len(data)} bytes)"
        )
    return data


def _limit_label(limit: int) -> str:
    mib = 1024 * 1024
    return f"{limit // mib} MB" if limit % mib == 0 else f"{limit}-byte"


def prompt_marker(mime_type: str, name: str, path: str) -> str:
    """What the agent sees for an attachment (ZeroClaw's exact markers)."""
    if mime_type.startswith("image/"):
        return f"[IMAGE:{path}]"
    return f"[Document: {name}] {path}"


def resource_link_line(link: ResourceLink) -> str:
    """A resource_link the client did not inline, as a reference line for the agent.

    The base spec requires agents to accept resource_link; ZeroClaw's implementation silently dropped
    it (ACP spec: content, resource links), so a link-only prompt would fail. We tell the agent where it is.
    A link without a name is shown by its URI.
    """
    return f"[Resource: {link.name or link.uri}] {link.uri}"


_IMAGE_EXTENSIONS: Final = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}


def _planned_write(
    writes: dict[str, BlobWrite], uploads_dir: str, data: bytes, name: str, mime_type: str
) -> str:
    """Plan writing ``data`` as ``uploads/<sha256>.<ext>`` (once per content); its marker."""
    digest = hashlib.sha256(data).hexdigest()
    stored = _storage_name(digest, file_extension(name))
    path = posixpath.join(uploads_dir, stored)
    writes.setdefault(
        stored,
        BlobWrite(
            storage_name=stored,
            path=path,
            data=data,
            mime_type=mime_type,
            display_name=name,
            sha256=digest,
        ),
    )
    return prompt_marker(mime_type, name, path)


def plan_prompt(
    parts: Iterable[ContentPart],
    *,
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
    uploads_dir: str | None,
) -> PromptPlan:
    """Plan a ``session/prompt``: validate every blob, then build the agent text.

    Args:
        parts: the prompt parts, in order (``PromptParams.prompt``).
        uploads_dir: the session's ``<workspaceDir>/uploads`` directory, or None when the
            session has no workspace (then any blob is an error).

    Raises:
        InvalidParamsError: a blob without workspace, bad base64, an oversize blob, or a
            prompt that yields no text at all.
    """
    pieces: list[str] = []
    images = 0  # markers of image blocks: a prompt of images alone has no text part
    writes: dict[str, BlobWrite] = {}
    for part in parts:
        if isinstance(part, TextContent):
            pieces.append(part.text)
        elif isinstance(part, EmbeddedResource):
            resource = part.resource
            if isinstance(resource, BlobResource) or (
                resource.blob is not None and resource.text is None
            ):
                if uploads_dir is None:
                    raise InvalidParamsError("resource.blob requires an active session workspace")
                data = decode_blob(resource.blob or "", max_blob_bytes=max_blob_bytes)
                name = display_name(resource.uri)
                mime_type = (resource.mime_type or "").strip() or guess_mime(name)
                pieces.append(_planned_write(writes, uploads_dir, data, name, mime_type))
            elif resource.text is not None:
                pieces.append(resource.text)
        elif isinstance(part, ResourceLink):
            pieces.append(resource_link_line(part))
        elif isinstance(part, ImageContent):
            # Stored like a blob; a provider with vision = true sends it as an image.
            if uploads_dir is None:
                raise InvalidParamsError("an image block requires an active session workspace")
            data = decode_blob(part.data, max_blob_bytes=max_blob_bytes)
            mime_type = part.mime_type.strip().lower() or FALLBACK_MIME
            extension = _IMAGE_EXTENSIONS.get(mime_type, "bin")
            name = display_name(part.uri) if part.uri else f"image.{extension}"
            if guess_mime(name) != mime_type:
                name = f"{name}.{extension}"
            pieces.append(_planned_write(writes, uploads_dir, data, name, mime_type))
            images += 1
        # audio blocks: not advertised (promptCapabilities audio false); ignored.
    if len(pieces) == images:
        raise InvalidParamsError("Parameter 'prompt' array must contain at least one text part")
    return PromptPlan(text=PART_SEPARATOR.join(pieces), writes=list(writes.values()))
