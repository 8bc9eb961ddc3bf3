"""deliver_file: content-addressed copy, uri, title, limits, and the uploads/ safeguards."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from acp_server.agent.io.uploads import UploadError, read_verified, store_upload
from acp_server.agent.tools.base import ToolError
from acp_server.agent.tools.deliver import DeliverFileTool
from tests.server.tool_context import make_context

REPORT = b"%PDF-1.7 quarterly numbers\n"
REPORT_SHA = hashlib.sha256(REPORT).hexdigest()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "out").mkdir(parents=True)
    (root / "out" / "Report.PDF").write_bytes(REPORT)
    (tmp_path / "outside.txt").write_text("secret\n")
    return root.resolve()


async def test_delivers_a_content_addressed_copy(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    result = await DeliverFileTool().run({"path": "out/Report.PDF"}, ctx)
    uri = f"attachment://deliver/{REPORT_SHA}.pdf"
    assert result.ok
    # The model gets the uri structurally; the card one human line without it.
    assert json.loads(result.text) == {
        "delivered": "Report.PDF",
        "title": "Report.PDF",
        "mimeType": "application/pdf",
        "size": len(REPORT),
        "uri": uri,
    }
    assert result.summary == f"Delivered Report.PDF ({len(REPORT)} bytes)"
    delivered = result.delivered
    assert delivered is not None
    assert delivered.uri == uri
    assert delivered.sha256 == REPORT_SHA
    assert delivered.size == len(REPORT)
    assert delivered.filename == "Report.PDF"
    assert delivered.title == "Report.PDF"  # default title: the filename
    assert delivered.mime_type == "application/pdf"
    assert delivered.path == workspace / "uploads" / f"{REPORT_SHA}.pdf"
    assert delivered.path.read_bytes() == REPORT
    assert read_verified(delivered.path, delivered.sha256) == REPORT
    # Delivering again reuses the identical copy; no temp files are left behind.
    await DeliverFileTool().run({"path": "out/Report.PDF"}, ctx)
    assert sorted(os.listdir(workspace / "uploads")) == [f"{REPORT_SHA}.pdf"]


async def test_title_and_mime_type_from_the_caller(workspace: Path) -> None:
    ctx, _ = make_context(workspace)
    args = {"path": "out/Report.PDF", "title": "Quarterly\x1b[31m report\n", "mimeType": "x/y"}
    result = await DeliverFileTool().run(args, ctx)
    assert result.delivered is not None
    assert result.delivered.title == "Quarterly[31m report"
    assert result.delivered.mime_type == "x/y"
    bad_mime = {"path": "out/Report.PDF", "mimeType": "text/plain\r\nX-Injected: 1"}
    guessed = await DeliverFileTool().run(bad_mime, ctx)
    assert guessed.delivered is not None
    assert guessed.delivered.mime_type == "application/pdf"


async def test_file_without_extension_gets_bare_digest(workspace: Path) -> None:
    (workspace / "Makefile").write_bytes(b"all:\n")
    ctx, _ = make_context(workspace)
    result = await DeliverFileTool().run({"path": "Makefile"}, ctx)
    digest = hashlib.sha256(b"all:\n").hexdigest()
    assert result.delivered is not None
    assert result.delivered.uri == f"attachment://deliver/{digest}"
    assert result.delivered.mime_type == "application/octet-stream"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../outside.txt", "Path not allowed by security policy: ../outside.txt"),
        ("out/../out/Report.PDF", "Path not allowed by security policy"),
        ("OUTSIDE_ABSOLUTE", "Path escapes workspace directory"),
        ("link.txt", "Path escapes workspace directory: link.txt"),
        ("out", "Not a regular file: out is a directory"),
        ("missing.pdf", "File not found: missing.pdf"),
    ],
)
async def test_refusals(workspace: Path, path: str, message: str) -> None:
    (workspace / "link.txt").symlink_to(workspace.parent / "outside.txt")
    if path == "OUTSIDE_ABSOLUTE":
        path = str(workspace.parent / "outside.txt")
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match=message):
        await DeliverFileTool().run({"path": path}, ctx)
    assert not (workspace / "uploads").exists()


def _sparse(path: Path, size: int) -> None:
    """A file of ``size`` zero bytes that costs no disk (and no time) to create."""
    path.touch()
    os.truncate(path, size)


async def test_size_limit_is_10_mib(workspace: Path) -> None:
    limit = 10 * 1024 * 1024
    _sparse(workspace / "big.bin", limit + 1)
    ctx, _ = make_context(workspace)
    with pytest.raises(
        ToolError, match=f"File too large: {limit + 1} bytes \\(limit: {limit} bytes\\)"
    ):
        await DeliverFileTool().run({"path": "big.bin"}, ctx)
    _sparse(workspace / "big.bin", limit)
    result = await DeliverFileTool().run({"path": "big.bin"}, ctx)
    assert result.delivered is not None
    assert result.delivered.size == limit


async def test_symlinked_uploads_directory_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "uploads").symlink_to(elsewhere)
    ctx, _ = make_context(workspace)
    with pytest.raises(ToolError, match="uploads is a symbolic link"):
        await DeliverFileTool().run({"path": "out/Report.PDF"}, ctx)
    assert os.listdir(elsewhere) == []


def test_symlink_planted_at_destination_is_replaced(workspace: Path, tmp_path: Path) -> None:
    uploads = workspace / "uploads"
    uploads.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    name = f"{REPORT_SHA}.pdf"
    (uploads / name).symlink_to(victim)
    stored = store_upload(uploads, name, REPORT)
    assert not stored.is_symlink()
    assert stored.read_bytes() == REPORT
    assert victim.read_text() == "untouched"


def test_uploads_that_is_a_file_is_refused(workspace: Path) -> None:
    (workspace / "uploads").write_text("not a dir")
    with pytest.raises(UploadError, match="not a directory"):
        store_upload(workspace / "uploads", "x.txt", b"x")


def test_read_verified_detects_a_swapped_file(workspace: Path) -> None:
    stored = store_upload(workspace / "uploads", f"{REPORT_SHA}.pdf", REPORT)
    assert read_verified(stored, REPORT_SHA) == REPORT
    stored.write_bytes(b"tampered")
    assert read_verified(stored, REPORT_SHA) is None
    stored.unlink()
    stored.symlink_to(workspace / "out" / "Report.PDF")  # same bytes, but a symlink
    assert read_verified(stored, REPORT_SHA) is None
    assert read_verified(stored.parent / "missing", REPORT_SHA) is None
