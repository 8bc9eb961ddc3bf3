"""Params a client sends, read leniently where the ZeroClaw ACP documentation says so (aliases, a plain-string
prompt, untyped text parts), each problem an ``InvalidParamsError`` naming its parameter."""

from __future__ import annotations

from typing import ClassVar, Final, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonObject, JsonValue, decode_typed
from acp_core.schema.generated import (
    AudioContent,
    BlobResource,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResource,
)
from acp_core.schema.wire import Json, WireStruct

# --------------------------------------------------------------------------- inbound params

P = TypeVar("P", bound="InboundParams")
T = TypeVar("T")


class InboundParams(WireStruct, kw_only=True):
    """Params a client sends us. Build them with ``decode_inbound`` (raw JSON) or
    ``decode_params`` (builtins), never with plain msgspec.

    ``strict_fast_path``: the type's own strict msgspec shape accepts only input that the
    lenient reader reads the same way, so a well-formed message can be decoded straight
    from its bytes (tests/core/test_properties.py checks the equivalence).
    """

    strict_fast_path: ClassVar[bool] = False

    @classmethod
    def from_object(cls: type[P], params: JsonObject) -> P:
        raise NotImplementedError


def decode_params(params_type: type[P], params: JsonValue) -> P:
    """Validate a request's ``params`` leniently into ``params_type``.

    ``null`` / absent params count as ``{}`` (so the missing-parameter message names the
    parameter). Raises ``InvalidParamsError`` with a message naming the bad parameter.
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParamsError("Invalid params: expected a JSON object")
    return params_type.from_object(params)


_builtins_decoder: Final = msgspec.json.Decoder()


def decode_inbound(params_type: type[P], raw: bytes | msgspec.Raw) -> P:
    """Decode a request's raw ``params`` (already checked to be JSON by the envelope
    parser) into ``params_type``, reading the bytes once.

    The well-formed common case goes straight from bytes to the typed params in msgspec's
    C decoder; anything that shape refuses (an alias, a plain-string prompt, a bad value)
    is read by the lenient rules of ``decode_params``, which accept it or name the problem.

    Raises:
        InvalidParamsError: the params are not acceptable; the message names the parameter.
    """
    if raw and params_type.strict_fast_path:
        try:
            return decode_typed(params_type, raw)
        except msgspec.ValidationError:
            pass  # not the common shape: the lenient reader decides
    try:
        value: JsonValue = _builtins_decoder.decode(raw) if raw else None
    except msgspec.DecodeError as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None
    except RecursionError:
        raise InvalidParamsError("Invalid params: JSON nested too deeply") from None
    return decode_params(params_type, value)


def _missing(name: str) -> InvalidParamsError:
    return InvalidParamsError(f"Missing required parameter: {name}")


def _wrong_type(name: str, expected: str) -> InvalidParamsError:
    return InvalidParamsError(f"Invalid parameter: {name} must be {expected}")


def _session_id(params: JsonObject) -> str:
    value = params.get("sessionId")
    if value is None:
        value = params.get("session_id")
    if not isinstance(value, str):
        # ZeroClaw's implementation answers a missing and a non-string id the same way.
        raise _missing("sessionId")
    return value


def _first_present(params: JsonObject, *names: str) -> tuple[str, JsonValue] | None:
    for name in names:
        if name in params and params[name] is not None:
            return name, params[name]
    return None


class ElicitationCapabilities(WireStruct, kw_only=True):
    form: Json | UnsetType = UNSET
    url: Json | UnsetType = UNSET

    @property
    def supports_form(self) -> bool:
        """An empty ``{}`` means form support, as in ZeroClaw's implementation."""
        return self.form is not UNSET or self.url is UNSET

    @property
    def supports_url(self) -> bool:
        return self.url is not UNSET


class FileSystemCapabilities(WireStruct, kw_only=True):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientCapabilities(WireStruct, kw_only=True):
    fs: FileSystemCapabilities | None = None
    terminal: bool | None = None
    elicitation: ElicitationCapabilities | None = None


def _client_capabilities(raw: JsonObject) -> ClientCapabilities:
    fs: FileSystemCapabilities | None = None
    try:
        fs = msgspec.convert(raw.get("fs"), FileSystemCapabilities | None)
    except msgspec.ValidationError:
        fs = None
    terminal = raw.get("terminal")
    elicitation = raw.get("elicitation")
    return ClientCapabilities(
        fs=fs,
        terminal=terminal if isinstance(terminal, bool) else None,
        elicitation=(
            ElicitationCapabilities(
                form=elicitation.get("form", UNSET), url=elicitation.get("url", UNSET)
            )
            if isinstance(elicitation, dict)
            else None
        ),
    )


def _offers_terminal_auth(capabilities: JsonObject) -> bool:
    auth, meta = capabilities.get("auth"), capabilities.get("_meta")
    return (isinstance(auth, dict) and auth.get("terminal") is True) or (
        isinstance(meta, dict) and meta.get("terminal-auth") is True
    )


class InitializeParams(InboundParams, kw_only=True):
    """``initialize``: only the client capabilities matter; ``protocolVersion`` is ignored
    (the server always answers 1)."""

    protocol_version: Json | UnsetType = UNSET
    client_capabilities: ClientCapabilities | None = None
    client_info: Json | UnsetType = UNSET
    shared_filesystem: bool = False
    """``_meta.zeroclaw.sharedFilesystem: true``: the client's files are the server's (a
    gateway client on the gateway's machine), so the client's ``fs/*`` may serve them."""
    reject_with_edit: bool = False
    """``_meta.zeroclaw.rejectWithEdit: true``: the client can send the replacement text of
    a ``reject-with-edit`` answer (``replacementContent``), so edit approvals offer it."""
    cancel_marker_tool_call: bool = False
    """``_meta.zeroclaw.cancelMarkerToolCall: true``: the client draws the styled
    ``turn-cancelled`` tool call of the ZeroClaw ACP docs; without it a cancel sends no such call."""
    terminal_auth: bool = False
    """ACP ``clientCapabilities.auth.terminal`` (or its older ``_meta["terminal-auth"]``):
    the client can run a ``terminal`` auth method, so one may be offered."""

    @property
    def client_name(self) -> str | None:
        """``clientInfo.name`` as the client sent it (None when it sent none)."""
        info = self.client_info
        name = info.get("name") if isinstance(info, dict) else None
        return name if isinstance(name, str) else None

    @classmethod
    def from_object(cls, params: JsonObject) -> InitializeParams:
        raw = params.get("clientCapabilities", params.get("client_capabilities"))
        # Odd capabilities never fail the handshake: each one is read on its own and
        # anything malformed counts as not offered.
        capabilities = _client_capabilities(raw) if isinstance(raw, dict) else None
        meta = params.get("_meta")
        zeroclaw = meta.get("zeroclaw") if isinstance(meta, dict) else None
        flags = zeroclaw if isinstance(zeroclaw, dict) else {}
        return cls(
            protocol_version=params.get("protocolVersion", UNSET),
            client_capabilities=capabilities,
            client_info=params.get("clientInfo", UNSET),
            shared_filesystem=flags.get("sharedFilesystem") is True,
            reject_with_edit=flags.get("rejectWithEdit") is True,
            cancel_marker_tool_call=flags.get("cancelMarkerToolCall") is True,
            terminal_auth=isinstance(raw, dict) and _offers_terminal_auth(raw),
        )

    @property
    def elicitation_form(self) -> bool:
        caps = self.client_capabilities
        return bool(caps and caps.elicitation and caps.elicitation.supports_form)

    @property
    def elicitation_url(self) -> bool:
        caps = self.client_capabilities
        return bool(caps and caps.elicitation and caps.elicitation.supports_url)


class EnvVariable(WireStruct, kw_only=True):
    name: str
    value: str


class HttpHeader(WireStruct, kw_only=True):
    name: str
    value: str


class McpServerStdio(WireStruct, kw_only=True, omit_defaults=False):
    """A stdio MCP server the client wants connected (base ACP shape)."""

    name: str
    command: str
    args: list[str] = msgspec.field(default_factory=list)
    env: list[EnvVariable] = msgspec.field(default_factory=list)


class McpServerHttp(WireStruct, kw_only=True, omit_defaults=False):
    """An MCP server reached over HTTP: ACP's ``McpServerHttp`` (``type: "http"``, MCP's
    streamable HTTP) or ``McpServerSse`` (``type: "sse"``, the older HTTP+SSE transport)."""

    type: Literal["http", "sse"]
    name: str
    url: str
    headers: list[HttpHeader] = msgspec.field(default_factory=list)


McpServer: TypeAlias = McpServerStdio | McpServerHttp


def _name_values(raw: JsonValue, where: str) -> list[tuple[str, str]]:
    """``[{name, value}]`` or a ``{name: value}`` mapping, as lenient input."""
    if raw is None:
        return []
    items: list[tuple[JsonValue, JsonValue]]
    if isinstance(raw, dict):
        items = list(raw.items())
    elif isinstance(raw, list):
        items = []
        for index, entry in enumerate(raw):
            if not isinstance(entry, dict):
                raise _wrong_type(f"{where}[{index}]", "an object with name and value")
            items.append((entry.get("name"), entry.get("value")))
    else:
        raise _wrong_type(where, "an array of {name, value} objects or an object")
    out: list[tuple[str, str]] = []
    for index, (name, value) in enumerate(items):
        if not isinstance(name, str) or not isinstance(value, str):
            raise _wrong_type(f"{where}[{index}]", "a string name and a string value")
        out.append((name, value))
    return out


def _mcp_server(raw: JsonValue, index: int) -> McpServer:
    where = f"mcpServers[{index}]"
    if not isinstance(raw, dict):
        raise _wrong_type(where, "an object")
    name = raw.get("name")
    if not isinstance(name, str):
        raise _missing(f"{where}.name")
    kind = raw.get("type")
    if kind in ("http", "sse"):
        url = raw.get("url")
        if not isinstance(url, str):
            raise _missing(f"{where}.url")
        headers = _name_values(raw.get("headers"), f"{where}.headers")
        return McpServerHttp(
            type="http" if kind == "http" else "sse",
            name=name,
            url=url,
            headers=[HttpHeader(name=n, value=v) for n, v in headers],
        )
    if kind not in (None, "stdio"):
        raise _wrong_type(f"{where}.type", '"stdio", "http" or "sse"')
    command = raw.get("command")
    if not isinstance(command, str):
        raise _missing(f"{where}.command")
    args = raw.get("args")
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise _wrong_type(f"{where}.args", "an array of strings")
    env = _name_values(raw.get("env"), f"{where}.env")
    return McpServerStdio(
        name=name,
        command=command,
        args=[arg for arg in args if isinstance(arg, str)],
        env=[EnvVariable(name=n, value=v) for n, v in env],
    )


def _mcp_servers(params: JsonObject) -> list[McpServer]:
    """ACP ``mcpServers`` (``session/new``, ``session/load``, ``session/resume``); absent
    or null: none."""
    raw_servers = params.get("mcpServers", params.get("mcp_servers"))
    if raw_servers is None:
        return []
    if not isinstance(raw_servers, list):
        raise _wrong_type("mcpServers", "an array")
    return [_mcp_server(raw, index) for index, raw in enumerate(raw_servers)]


def _blank_to_none(value: JsonValue, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _wrong_type(name, "a string")
    value = value.strip()
    return value or None


def _additional_directories(params: JsonObject) -> list[str] | None:
    """ACP ``additionalDirectories``: a list of path strings; absent or null → None."""
    raw = params.get("additionalDirectories")
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(entry, str) for entry in raw):
        raise _wrong_type("additionalDirectories", "an array of path strings")
    return [entry for entry in raw if isinstance(entry, str)]


class NewSessionParams(InboundParams, kw_only=True):
    """``session/new``. ``agent_alias`` is trimmed; blank means absent (the ZeroClaw ACP documentation, "session/new")."""

    agent_alias: str | None = None
    cwd: str | None = None
    mcp_servers: list[McpServer] = msgspec.field(default_factory=list)
    additional_directories: list[str] | None = None

    @classmethod
    def from_object(cls, params: JsonObject) -> NewSessionParams:
        alias: str | None = None
        for name in ("agentAlias", "agent_alias", "agent"):
            alias = _blank_to_none(params.get(name), name)
            if alias is not None:
                break
        if alias is None:
            # Base-spec clients put extension data in _meta (ACP spec: extensibility, `_meta`).
            meta = params.get("_meta")
            zeroclaw = meta.get("zeroclaw") if isinstance(meta, dict) else None
            if isinstance(zeroclaw, dict):
                alias = _blank_to_none(zeroclaw.get("agentAlias"), "_meta.zeroclaw.agentAlias")
        cwd: str | None = None
        found = _first_present(params, "cwd", "workspaceDir", "workspace_dir")
        if found is not None:
            name, value = found
            if not isinstance(value, str):
                raise _wrong_type(name, "a string path")
            cwd = value
        return cls(
            agent_alias=alias,
            cwd=cwd,
            mcp_servers=_mcp_servers(params),
            additional_directories=_additional_directories(params),
        )


PROMPT_REQUIRED_MESSAGE: Final = (
    "Missing required parameter: prompt (must be string or array of parts)"
)


def _optional_str(raw: JsonObject, key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None


def _convert_part(raw: JsonObject, type_: type[T], where: str) -> T:
    try:
        return msgspec.convert(raw, type_)
    except msgspec.ValidationError as exc:
        raise InvalidParamsError(f"Invalid parameter: {where}: {exc}") from None


ContentPart: TypeAlias = ContentBlock
"""One element of a ``session/prompt`` prompt."""

_ACP_PARTS: Final[dict[str, type[ContentPart]]] = {
    "text": TextContent,
    "resource": EmbeddedResource,
    "resource_link": ResourceLink,
}


def _prompt_part(raw: JsonValue, index: int) -> ContentPart | None:
    """One prompt element, or None for parts we ignore (not objects, unknown types).

    A part in ACP's own shape is read as the typed fast path reads it (with its
    ``annotations`` and ``_meta``); only one it refuses goes by the lenient rules below.
    """
    if not isinstance(raw, dict):
        return None
    where = f"prompt[{index}]"
    kind = raw.get("type")
    acp_type = _ACP_PARTS.get(kind) if isinstance(kind, str) else None
    if acp_type is not None:
        try:
            return msgspec.convert(raw, acp_type)
        except msgspec.ValidationError:
            pass
    if kind == "resource":
        resource = raw.get("resource")
        if not isinstance(resource, dict):
            raise _wrong_type(f"{where}.resource", "an object")
        uri = _optional_str(resource, "uri") or ""
        mime_type = _optional_str(resource, "mimeType")
        blob = resource.get("blob")
        if isinstance(blob, str):
            return EmbeddedResource(resource=BlobResource(uri=uri, mime_type=mime_type, blob=blob))
        text = resource.get("text")
        if isinstance(text, str):
            return EmbeddedResource(resource=TextResource(uri=uri, mime_type=mime_type, text=text))
        raise _wrong_type(f"{where}.resource", "an object with a string text or base64 blob")
    if kind == "resource_link":
        link_uri = raw.get("uri")
        if not isinstance(link_uri, str):
            raise _missing(f"{where}.uri")
        name = _optional_str(raw, "name") or link_uri
        size = raw.get("size")
        return ResourceLink(
            uri=link_uri,
            name=name,
            title=_optional_str(raw, "title"),
            description=_optional_str(raw, "description"),
            mime_type=_optional_str(raw, "mimeType"),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )
    if kind == "image":
        return _convert_part(raw, ImageContent, where)
    if kind == "audio":
        return _convert_part(raw, AudioContent, where)
    text = raw.get("text")
    if isinstance(text, str):
        # The ZeroClaw ACP documentation's untyped {"text": …} and base ACP {"type": "text", …} alike.
        return TextContent(text=text)
    return None


class PromptParams(InboundParams, kw_only=True):
    """``session/prompt``: the prompt is normalised to a list of content blocks."""

    strict_fast_path: ClassVar[bool] = True

    session_id: str
    prompt: list[ContentPart]

    @classmethod
    def from_object(cls, params: JsonObject) -> PromptParams:
        session_id = _session_id(params)
        raw = params.get("prompt")
        if isinstance(raw, str):
            parts: list[ContentPart] = [TextContent(text=raw)]
        elif isinstance(raw, list):
            parts = [
                part
                for index, element in enumerate(raw)
                if (part := _prompt_part(element, index)) is not None
            ]
        else:
            raise InvalidParamsError(PROMPT_REQUIRED_MESSAGE)
        return cls(session_id=session_id, prompt=parts)


class SessionIdParams(InboundParams, kw_only=True):
    """``session/cancel``, ``session/stop``, ``session/load``, ``session/resume``,
    ``session/close``: only the session id is read."""

    strict_fast_path: ClassVar[bool] = True

    session_id: str

    @classmethod
    def from_object(cls, params: JsonObject) -> SessionIdParams:
        return cls(session_id=_session_id(params))


class RestoreParams(SessionIdParams, kw_only=True):
    """``session/load`` and ``session/resume``: the session id and, when the client sends
    them, ACP ``additionalDirectories`` (the full list: it replaces the stored one) and
    ``mcpServers`` (the client's MCP servers for the restored session, as at
    ``session/new``)."""

    # msgspec cannot decode ``McpServer`` (a union of untagged shapes) straight from bytes,
    # and a restore is rare: the lenient reader reads every one.
    strict_fast_path: ClassVar[bool] = False

    additional_directories: list[str] | None = None
    mcp_servers: list[McpServer] = msgspec.field(default_factory=list)

    @classmethod
    def from_object(cls, params: JsonObject) -> RestoreParams:
        return cls(
            session_id=_session_id(params),
            additional_directories=_additional_directories(params),
            mcp_servers=_mcp_servers(params),
        )


class ListSessionsParams(InboundParams, kw_only=True):
    """``session/list`` (ACP): an optional ``cwd`` filter and the opaque ``cursor`` of the
    previous page's ``nextCursor``."""

    strict_fast_path: ClassVar[bool] = True

    cwd: str | None = None
    cursor: str | None = None

    @classmethod
    def from_object(cls, params: JsonObject) -> ListSessionsParams:
        return cls(cwd=_optional_text(params, "cwd"), cursor=_optional_text(params, "cursor"))


def _optional_text(params: JsonObject, name: str) -> str | None:
    value = params.get(name)
    if value is not None and not isinstance(value, str):
        raise _wrong_type(name, "a string")
    return value


class InboundUpdateParams(InboundParams, kw_only=True):
    """Inbound ``session/update`` / ``session/event`` (ZeroClaw extension, event injection).

    The event type is ``params.type``, else ``params.update.sessionUpdate``, else
    ``"unknown"`` (as ZeroClaw's implementation reads it). ``payload`` keeps the params as sent.
    """

    session_id: str
    event_type: str
    payload: Json | UnsetType = UNSET

    @classmethod
    def from_object(cls, params: JsonObject) -> InboundUpdateParams:
        session_id = _session_id(params)
        event_type = params.get("type")
        if not isinstance(event_type, str):
            update = params.get("update")
            event_type = update.get("sessionUpdate") if isinstance(update, dict) else None
        if not isinstance(event_type, str):
            event_type = "unknown"
        return cls(session_id=session_id, event_type=event_type, payload=params)


class CancelRequestParams(InboundParams, kw_only=True):
    """``$/cancel_request`` (ACP protocol level): the id of the request the peer gave up on.

    Never refused: an odd id simply matches no request (``$/`` notifications are optional,
    so a peer that sends a malformed one gets nothing worse than no effect).
    """

    request_id: Json | UnsetType = UNSET

    @classmethod
    def from_object(cls, params: JsonObject) -> CancelRequestParams:
        return cls(request_id=params.get("requestId", UNSET))

    @property
    def request_key(self) -> str:
        """The id as the connection keys its requests (``str(id)``)."""
        return str(self.request_id) if self.request_id is not UNSET else ""
