"""Writing prompt blobs under ``<workspaceDir>/uploads/`` (seed, "session/prompt").

``acp_core.blobs.plan_prompt`` validates and names every blob; ``write_blobs`` performs
the planned writes with the same content-addressed writer deliver_file uses
(``acp_server.tools.uploads``: atomic, symlink-safe), reporting problems as -32602 with
the reference's wording. Blocking: run it on a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from acp_core.blobs import BlobWrite
from acp_core.errors import InvalidParamsError
from acp_server.tools.uploads import UPLOADS_DIR_NAME, UploadError, store_upload


def uploads_dir(workspace: Path) -> Path:
    return workspace / UPLOADS_DIR_NAME


def write_blobs(workspace: Path, writes: Sequence[BlobWrite]) -> None:
    """Perform every planned write (all blobs were validated before the first one)."""
    directory = uploads_dir(workspace)
    for write in writes:
        try:
            store_upload(directory, write.storage_name, write.data)
        except UploadError as exc:
            raise InvalidParamsError(str(exc)) from None
