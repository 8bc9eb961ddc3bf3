"""Content blocks (prompt parts, message chunks) and tool-call content."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from acp_core.jsonrpc import JsonValue
from acp_core.schema.wire import (
    WireStruct,
)

if TYPE_CHECKING:
    Json: TypeAlias = JsonValue
else:
    # msgspec cannot evaluate the recursive JsonValue alias; Any decodes the same values.
    Json = Any


# --------------------------------------------------------------------------- content


class TextContent(WireStruct, tag_field="type", tag="text", kw_only=True):
    text: str


class ImageContent(WireStruct, tag_field="type", tag="image", kw_only=True):
    data: str
    mime_type: str
    uri: str | None = None


class AudioContent(WireStruct, tag_field="type", tag="audio", kw_only=True):
    data: str
    mime_type: str


class ResourceLink(WireStruct, tag_field="type", tag="resource_link", kw_only=True):
    """A reference the client did not inline (base ACP: agents must accept these)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        # A link without a usable name is shown by its URI (the lenient prompt reader
        # does the same, so both decoders agree).
        if not self.name:
            self.name = self.uri


class ResourceContents(WireStruct, kw_only=True):
    """``resource`` of an embedded resource: ``text`` or base64 ``blob``.

    Decoding narrows it to ``TextResource`` or ``BlobResource`` (see ``EmbeddedResource``);
    msgspec cannot discriminate two untagged object shapes, so the base type carries both.
    """

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


class TextResource(ResourceContents, kw_only=True):
    """An editor @-attachment with inline text."""

    text: str


class BlobResource(ResourceContents, kw_only=True):
    """A binary attachment, base64 in ``blob`` (decoded and size-checked by ``blobs``)."""

    blob: str


class EmbeddedResource(WireStruct, tag_field="type", tag="resource", kw_only=True):
    resource: ResourceContents

    def __post_init__(self) -> None:
        resource = self.resource
        if type(resource) is not ResourceContents:
            return
        if resource.blob is not None:
            self.resource = BlobResource(
                uri=resource.uri, mime_type=resource.mime_type, blob=resource.blob
            )
        elif resource.text is not None:
            self.resource = TextResource(
                uri=resource.uri, mime_type=resource.mime_type, text=resource.text
            )
        else:
            raise ValueError("resource must carry a string `text` or a base64 `blob`")


ContentBlock: TypeAlias = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource
)
ContentPart: TypeAlias = ContentBlock
"""One element of a ``session/prompt`` prompt."""


def text_block(text: str) -> TextContent:
    return TextContent(text=text)


# --------------------------------------------------------------------------- tool calls


class ToolCallContentBlock(WireStruct, tag_field="type", tag="content", kw_only=True):
    """``{"type": "content", "content": <ContentBlock>}`` inside a tool call's ``content``."""

    content: ContentBlock


class ToolCallDiff(WireStruct, tag_field="type", tag="diff", kw_only=True, omit_defaults=False):
    """A file change. ``path`` is absolute (ACP: all paths are absolute); ``oldText`` is
    always sent, ``null`` for a new file (clients such as Toad need the key to preview it)."""

    path: str
    old_text: str | None = None
    new_text: str


class ToolCallTerminal(WireStruct, tag_field="type", tag="terminal", kw_only=True):
    terminal_id: str


ToolCallContent: TypeAlias = ToolCallContentBlock | ToolCallDiff | ToolCallTerminal


def text_tool_content(text: str) -> ToolCallContentBlock:
    """``{"type":"content","content":{"type":"text","text":…}}``."""
    return ToolCallContentBlock(content=TextContent(text=text))


class ToolCallLocation(WireStruct, kw_only=True):
    path: str
    line: int | None = None
