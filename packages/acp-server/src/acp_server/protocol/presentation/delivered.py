"""A delivered file as the client sees it: the ``deliver_file`` tool's uploads copy,
embedded as an ACP resource only while it still hashes to the digest its uri names (the
ZeroClaw ACP docs: "a swap between the tool's validation and delivery is detected")."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

from acp_core import schema
from acp_core.blobs import DEFAULT_MAX_BLOB_BYTES, DELIVER_URI_PREFIX, deliver_uri, file_extension
from acp_server.agent.io.uploads import read_verified
from acp_server.agent.tools.base import DeliveredFile

logger = logging.getLogger(__name__)


def embed_delivered(delivered: DeliveredFile) -> schema.EmbeddedResource | None:
    """Re-read the uploads copy and re-hash it; embed only if it is still what the tool
    validated (the ZeroClaw ACP documentation: "a swap between the tool's validation and delivery is detected")."""
    expected = deliver_uri(delivered.sha256, file_extension(delivered.path.name))
    resource = None
    if expected == delivered.uri:
        resource = embed_delivered_file(delivered.path.parent, delivered.uri, delivered.mime_type)
    if resource is None:
        logger.warning(
            "deliver_file: %s changed after validation; not embedding it", delivered.path
        )
    return resource


def embed_delivered_file(
    uploads_dir: Path, uri: str, mime_type: str
) -> schema.EmbeddedResource | None:
    """The embedded resource for ``attachment://deliver/<sha256>.<ext>``: its uploads copy,
    read without following symlinks and re-hashed; None when it is gone or no longer
    hashes to the digest its uri names. Blocking I/O: run it in a thread."""
    name = uri.removeprefix(DELIVER_URI_PREFIX)
    digest = name.partition(".")[0]
    if name == uri or "/" in name or len(digest) != 64:
        return None
    data = read_verified(uploads_dir / name, digest, limit=DEFAULT_MAX_BLOB_BYTES)
    if data is None:
        return None
    return schema.EmbeddedResource(
        resource=schema.BlobResource(
            uri=uri, mime_type=mime_type, blob=base64.b64encode(data).decode("ascii")
        )
    )
