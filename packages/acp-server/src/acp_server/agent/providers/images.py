"""Prompt images for providers configured with ``vision = true``.

A prompt's ``image`` block is stored under the session's ``uploads/`` like any blob and the
text the model gets carries its ``[IMAGE:<path>]`` marker (acp_core/blobs.py). A vision
provider turns each marker of a user message back into an image part of the request, in
its own shape (``openai_content``: Chat Completions ``image_url`` with a data URL;
``anthropic_blocks``: Messages API ``image`` with a base64 source). Only a marker naming a
content-addressed upload (``uploads/<sha256>.<image ext>``) whose bytes still hash to its
name is read; any other marker stays text, so a prompt cannot make the server send an
arbitrary file to the model.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Final

import msgspec

from acp_core.aliases import default_session_alias
from acp_core.blobs import DEFAULT_MAX_BLOB_BYTES, guess_mime
from acp_server.agent.io.uploads import UPLOADS_DIR_NAME, read_verified
from acp_server.config import Config
from acp_server.patterns import LazyPattern

IMAGE_MARKER: Final = LazyPattern(r"\[IMAGE:([^\]\n]+)\]")
IMAGE_MIME_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""What both providers accept as image input."""
_UPLOAD_NAME: Final = LazyPattern(r"[0-9a-f]{64}\.[a-z0-9]+")


def agent_sees_images(config: Config, connection_default: str | None) -> bool:
    """Whether the agent a ``session/new`` without an alias gets (the connection's default,
    ``[acp] default_agent``, else the one configured agent: acp_core/aliases.py) has a
    provider configured with ``vision = true``: what ``promptCapabilities.image`` says."""
    alias = default_session_alias(
        connection_default=connection_default,
        config_default=config.acp.default_agent,
        agents={name: agent.dispatchable for name, agent in config.agents.items()},
    )
    agent = config.agents.get(alias) if alias is not None else None
    provider = config.providers.get(agent.model_provider) if agent is not None else None
    return provider is not None and provider.vision


class InlineImage(msgspec.Struct, frozen=True):
    mime_type: str
    data_base64: str


def _image_at(raw_path: str) -> InlineImage | None:
    path = Path(raw_path)
    if path.parent.name != UPLOADS_DIR_NAME or not _UPLOAD_NAME.fullmatch(path.name):
        return None
    mime_type = guess_mime(path.name)
    if mime_type not in IMAGE_MIME_TYPES:
        return None
    data = read_verified(path, path.name.partition(".")[0], limit=DEFAULT_MAX_BLOB_BYTES)
    if data is None:
        return None
    return InlineImage(mime_type, base64.b64encode(data).decode("ascii"))


def split_images(text: str) -> list[str | InlineImage] | None:
    """``text`` cut at its readable image markers (each kept as text too, so the model
    still knows the path); None when it has none. Blocking: reads the uploads."""
    pieces: list[str | InlineImage] = []
    position = 0
    found = False
    for match in IMAGE_MARKER.finditer(text):
        image = _image_at(match.group(1))
        if image is None:
            continue
        found = True
        pieces.append(text[position : match.end()])
        pieces.append(image)
        position = match.end()
    if not found:
        return None
    if text[position:]:
        pieces.append(text[position:])
    return pieces


def openai_content(text: str) -> str | list[dict[str, Any]]:
    """A Chat Completions user ``content``: the text, or text and ``image_url`` parts."""
    pieces = split_images(text)
    if pieces is None:
        return text
    return [
        {"type": "text", "text": piece}
        if isinstance(piece, str)
        else {
            "type": "image_url",
            "image_url": {"url": f"data:{piece.mime_type};base64,{piece.data_base64}"},
        }
        for piece in pieces
    ]


def anthropic_blocks(text: str) -> list[dict[str, Any]]:
    """Messages API user blocks: text blocks and base64 ``image`` blocks."""
    pieces = split_images(text) or [text]
    return [
        {"type": "text", "text": piece}
        if isinstance(piece, str)
        else {
            "type": "image",
            "source": {"type": "base64", "media_type": piece.mime_type, "data": piece.data_base64},
        }
        for piece in pieces
        if not isinstance(piece, str) or piece
    ]
