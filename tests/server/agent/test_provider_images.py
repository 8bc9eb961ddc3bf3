"""Prompt images: stored under uploads/ by plan_prompt, read back only from there."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from acp_core import schema
from acp_core.blobs import plan_prompt
from acp_server.agent.io.uploads import write_blobs
from acp_server.agent.providers.images import InlineImage, anthropic_blocks, split_images

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels"


def _stored_image(workspace: Path) -> Path:
    image = schema.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    question = schema.TextContent(text="Seen?")
    plan = plan_prompt([question, image], uploads_dir=str(workspace / "uploads"))
    write_blobs(workspace, plan.writes)
    stored = workspace / "uploads" / f"{hashlib.sha256(PNG).hexdigest()}.png"
    assert plan.text == f"Seen?\n\n[IMAGE:{stored}]"
    return stored


def test_an_image_block_is_stored_like_a_blob_and_read_back(tmp_path: Path) -> None:
    stored = _stored_image(tmp_path)
    assert stored.read_bytes() == PNG
    pieces = split_images(f"look: [IMAGE:{stored}] please")
    assert pieces == [
        f"look: [IMAGE:{stored}]",
        InlineImage("image/png", base64.b64encode(PNG).decode()),
        " please",
    ]


def test_only_verified_uploads_become_images(tmp_path: Path) -> None:
    stored = _stored_image(tmp_path)
    outside = tmp_path / "secret.png"
    outside.write_bytes(PNG)
    renamed = stored.with_name("0" * 64 + ".png")
    renamed.write_bytes(PNG)  # in uploads/, but its bytes do not hash to its name
    text = f"[IMAGE:{outside}] [IMAGE:/etc/passwd] [IMAGE:{renamed}]"
    assert split_images(text) is None
    assert anthropic_blocks(text) == [{"type": "text", "text": text}]
    stored.write_bytes(PNG + b"changed")
    assert split_images(f"[IMAGE:{stored}]") is None
