from __future__ import annotations

import base64
import hashlib

import pytest

from acp_core.blobs import (
    DEFAULT_MAX_BLOB_BYTES,
    decode_blob,
    deliver_uri,
    display_name,
    file_extension,
    guess_mime,
    plan_prompt,
    storage_name,
)
from acp_core.errors import InvalidParamsError
from acp_core.schema import (
    BlobResource,
    ContentPart,
    EmbeddedResource,
    ImageContent,
    PromptParams,
    ResourceLink,
    TextContent,
    TextResource,
    decode_params,
)

UPLOADS = "/work/space/uploads"


def blob_part(
    data: bytes, uri: str = "file:///tmp/report.pdf", mime: str | None = None
) -> ContentPart:
    return EmbeddedResource(
        resource=BlobResource(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode())
    )


def test_text_parts_and_text_resources_join_with_blank_lines_in_order() -> None:
    plan = plan_prompt(
        [
            TextContent(text="first"),
            EmbeddedResource(resource=TextResource(uri="file:///a.rs", text="fn main() {}")),
            TextContent(text="last"),
        ],
        uploads_dir=None,
    )
    assert plan.text == "first\n\nfn main() {}\n\nlast"
    assert plan.writes == []


def test_pdf_blob_becomes_document_marker_and_a_content_addressed_write() -> None:
    data = b"%PDF-1.7 fake"
    digest = hashlib.sha256(data).hexdigest()
    plan = plan_prompt(
        [TextContent(text="Summarise"), blob_part(data, mime="application/pdf")],
        uploads_dir=UPLOADS,
    )
    path = f"{UPLOADS}/{digest}.pdf"
    assert plan.text == f"Summarise\n\n[Document: report.pdf] {path}"
    [write] = plan.writes
    assert (write.storage_name, write.path, write.data) == (f"{digest}.pdf", path, data)
    assert (write.mime_type, write.display_name, write.sha256) == (
        "application/pdf",
        "report.pdf",
        digest,
    )


def test_image_mime_guessed_from_extension_gives_image_marker() -> None:
    data = b"\x89PNG..."
    plan = plan_prompt([blob_part(data, uri="file:///x/Shot.PNG")], uploads_dir=UPLOADS)
    digest = hashlib.sha256(data).hexdigest()
    assert plan.text == f"[IMAGE:{UPLOADS}/{digest}.png]"
    assert plan.writes[0].mime_type == "image/png"


def test_declared_mime_wins_over_extension() -> None:
    plan = plan_prompt(
        [blob_part(b"x", uri="file:///x/a.txt", mime=" image/gif ")], uploads_dir=UPLOADS
    )
    assert plan.text.startswith("[IMAGE:")
    assert plan.writes[0].mime_type == "image/gif"


def test_identical_blobs_are_written_once_but_marked_twice() -> None:
    plan = plan_prompt([blob_part(b"same"), blob_part(b"same")], uploads_dir=UPLOADS)
    assert len(plan.writes) == 1
    assert plan.text.count("[Document: report.pdf]") == 2


def test_a_bad_later_part_means_no_plan_at_all() -> None:
    parts = [
        blob_part(b"good"),
        EmbeddedResource(resource=BlobResource(uri="file:///b.bin", blob="!!not base64!!")),
    ]
    with pytest.raises(InvalidParamsError, match=r"^Invalid base64: "):
        plan_prompt(parts, uploads_dir=UPLOADS)


def test_oversize_blob_reports_its_decoded_size() -> None:
    data = b"\0" * (DEFAULT_MAX_BLOB_BYTES + 1)
    with pytest.raises(InvalidParamsError) as info:
        plan_prompt([blob_part(data)], uploads_dir=UPLOADS)
    assert info.value.message == (
        f"Embedded resource exceeds 10 MB limit ({DEFAULT_MAX_BLOB_BYTES + 1} bytes)"
    )


def test_blob_at_exactly_the_limit_is_accepted() -> None:
    assert len(decode_blob(base64.b64encode(b"a" * 1000).decode(), max_blob_bytes=1000)) == 1000


def test_blob_without_workspace_is_rejected() -> None:
    with pytest.raises(
        InvalidParamsError, match=r"resource\.blob requires an active session workspace"
    ):
        plan_prompt([blob_part(b"x")], uploads_dir=None)


def test_prompt_without_any_text_is_rejected() -> None:
    for parts in ([], [ImageContent(data="AAAA", mime_type="image/png")]):
        with pytest.raises(
            InvalidParamsError, match="Parameter 'prompt' array must contain at least one text part"
        ):
            plan_prompt(parts, uploads_dir=UPLOADS)


def test_resource_link_becomes_a_reference_line() -> None:
    plan = plan_prompt(
        [ResourceLink(uri="file:///repo/README.md", name="README.md")], uploads_dir=None
    )
    assert plan.text == "[Resource: README.md] file:///repo/README.md"


def test_whitespace_around_base64_is_trimmed() -> None:
    assert decode_blob("  aGk=\n") == b"hi"


@pytest.mark.parametrize("bad", ["aGk", "a$Gk=", "aGk=aGk=x"])
def test_base64_is_strict(bad: str) -> None:
    with pytest.raises(InvalidParamsError, match="Invalid base64"):
        decode_blob(bad)


@pytest.mark.parametrize(
    ("uri", "name"),
    [
        ("file:///path/to/report.pdf", "report.pdf"),
        ("attachment://deliver/abc.png", "abc.png"),
        ("report.pdf", "report.pdf"),
        (None, "upload.bin"),
        ("", "upload.bin"),
        ("file:///path/to/", "upload.bin"),
        ("file:///path/..", "upload.bin"),
        ("file:///path/.", "upload.bin"),
        ("file:///x/a\\b.txt", "a_b.txt"),
        ("file:///x/a\x00b\x1f.txt", "a_b_.txt"),
        ("file:///x/evil..name", "evil_name"),
    ],
)
def test_display_name_is_sanitised(uri: str | None, name: str) -> None:
    assert display_name(uri) == name


@pytest.mark.parametrize(
    ("filename", "ext"),
    [
        ("a.PDF", "pdf"),
        ("archive.tar.gz", "gz"),
        ("noext", ""),
        (".bashrc", ""),
        ("a.", ""),
        ("a.toolongextension12", ""),
        ("a.sixteenchars123", "sixteenchars123"),
        ("a.we-ird", ""),
        ("a.é", ""),
    ],
)
def test_file_extension(filename: str, ext: str) -> None:
    assert file_extension(filename) == ext


@pytest.mark.parametrize(
    ("filename", "mime"),
    [
        ("a.jpg", "image/jpeg"),
        ("a.JPEG", "image/jpeg"),
        ("a.webp", "image/webp"),
        ("a.md", "text/markdown"),
        ("a.json", "application/json"),
        ("a.doc", "application/msword"),
        ("a.bin", "application/octet-stream"),
        ("a", "application/octet-stream"),
    ],
)
def test_guess_mime(filename: str, mime: str) -> None:
    assert guess_mime(filename) == mime


def test_storage_name_and_deliver_uri_use_the_full_digest() -> None:
    digest = hashlib.sha256(b"data").hexdigest()
    assert storage_name(b"data", "x.PDF") == f"{digest}.pdf"
    assert storage_name(b"data", "noext") == digest
    assert deliver_uri(digest, "pdf") == f"attachment://deliver/{digest}.pdf"
    assert deliver_uri(digest, "") == f"attachment://deliver/{digest}"


def test_plan_from_decoded_documented_prompt() -> None:
    params = decode_params(
        PromptParams,
        {
            "sessionId": "s",
            "prompt": [
                {"text": "look"},
                {
                    "type": "resource",
                    "resource": {"uri": "file:///r.txt", "mimeType": "text/plain", "blob": "aGk="},
                },
            ],
        },
    )
    plan = plan_prompt(params.prompt, uploads_dir=UPLOADS)
    assert plan.text.startswith("look\n\n[Document: r.txt] /work/space/uploads/")
    assert plan.writes[0].data == b"hi"
