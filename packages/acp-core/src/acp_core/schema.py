"""Typed ACP messages: every method and notification of the ZeroClaw seed, both directions.

Two rules shape this module (issue 2 §2.4):

* **What we emit has exactly the documented shape.** Outbound types are msgspec Structs
  with camelCase wire names (``rename="camel"``), snake_case attributes, and absent
  optionals omitted (``omit_defaults``; JSON-valued fields such as ``rawInput`` use
  ``UNSET`` so an explicit ``null`` stays expressible). Field order is the seed's key order.
* **What we accept is lenient where the seed says so.** Inbound params go through
  ``decode_params(ParamsType, params)``, which accepts the seed's aliases (``sessionId`` /
  ``session_id``; ``agentAlias`` / ``agent_alias`` / ``agent``; ``cwd`` / ``workspaceDir`` /
  ``workspace_dir``), a plain-string prompt, untyped ``{"text": …}`` parts, and raises
  ``InvalidParamsError`` naming the offending parameter.

Everything else (tagged unions, validation) is msgspec's C decoder: ``decode`` /
``convert`` turn bytes or builtins into these types, ``encode`` / ``to_builtins`` go back.
See docs/decisions.md for why msgspec.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonObject, JsonValue, decode_typed

if TYPE_CHECKING:
    Json: TypeAlias = JsonValue
else:
    # msgspec cannot evaluate the recursive JsonValue alias; Any decodes the same values.
    Json = Any

PROTOCOL_VERSION: Final = 1
AGENT_NAME: Final = "zeroclaw-acp"
AGENT_TITLE: Final = "ZeroClaw ACP"

ToolKind: TypeAlias = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
ToolCallStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]
StopReason: TypeAlias = Literal[
    "end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"
]
PlanEntryStatus: TypeAlias = Literal["pending", "in_progress", "completed"]
PlanEntryPriority: TypeAlias = Literal["high", "medium", "low"]
PermissionOptionKind: TypeAlias = Literal[
    # reject_with_edit is the reference's extension kind; accepted on input, never emitted.
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
    "reject_with_edit",
]


class WireStruct(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """Base of every ACP payload: camelCase on the wire, absent optionals omitted."""


class EmptyObject(WireStruct, kw_only=True):
    """``{}``: capability markers such as ``sessionCapabilities.resume``."""


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


class ToolCallDiff(WireStruct, tag_field="type", tag="diff", kw_only=True):
    """A file change: file_write has no ``oldText``, file_edit has both."""

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


# --------------------------------------------------------------------------- session/update


class AgentMessageChunk(
    WireStruct, tag_field="sessionUpdate", tag="agent_message_chunk", kw_only=True
):
    content: ContentBlock


class AgentThoughtChunk(
    WireStruct, tag_field="sessionUpdate", tag="agent_thought_chunk", kw_only=True
):
    content: ContentBlock


class UserMessageChunk(
    WireStruct, tag_field="sessionUpdate", tag="user_message_chunk", kw_only=True
):
    """Only sent while ``session/load`` replays stored history."""

    content: ContentBlock


class ToolCallStart(WireStruct, tag_field="sessionUpdate", tag="tool_call", kw_only=True):
    """A tool is about to run (also the styled ``turn-cancelled`` marker, kind ``think``)."""

    tool_call_id: str
    title: str
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Json | UnsetType = UNSET
    name: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_output: Json | UnsetType = UNSET


class ToolCallUpdate(WireStruct, tag_field="sessionUpdate", tag="tool_call_update", kw_only=True):
    """A tool finished (or changed). ``name`` and ``body`` are ZeroClaw extensions."""

    tool_call_id: str
    status: ToolCallStatus | None = None
    raw_output: Json | UnsetType = UNSET
    name: str | None = None
    title: str | None = None
    kind: ToolKind | None = None
    body: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Json | UnsetType = UNSET


class PlanEntry(WireStruct, kw_only=True):
    content: str
    status: PlanEntryStatus
    priority: PlanEntryPriority
    active_form: str | None = None


class PlanUpdate(WireStruct, tag_field="sessionUpdate", tag="plan", kw_only=True):
    """The whole plan; clients replace what they had."""

    entries: list[PlanEntry]


SessionUpdate: TypeAlias = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallUpdate
    | PlanUpdate
)


class SessionNotification(WireStruct, kw_only=True):
    """Params of outbound ``session/update``."""

    session_id: str
    update: SessionUpdate


class HistoryTrimmedParams(WireStruct, kw_only=True):
    """Params of ``_zeroclaw/history_trimmed`` (restore had to drop old turns)."""

    session_id: str
    dropped_messages: int
    kept_turns: int
    reason: str


def turn_cancelled_update(session_id: str, marker: str) -> ToolCallStart:
    """The reference's styled notice that a turn was cancelled (zeroclaw.md §2.6)."""
    return ToolCallStart(
        tool_call_id=f"turn-cancelled-{session_id}",
        title="turn-cancelled",
        kind="think",
        status="completed",
        name="turn-cancelled",
        content=[text_tool_content(marker)],
    )


# --------------------------------------------------------------------------- permission


class PermissionOption(WireStruct, kw_only=True):
    option_id: str
    name: str
    kind: PermissionOptionKind


class PermissionToolCall(WireStruct, kw_only=True):
    """The ``toolCall`` of a permission request. ``proposedEdit`` is a ZeroClaw extension."""

    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolCallStatus
    raw_input: Json | UnsetType = UNSET
    content: list[ToolCallContent] | None = None
    proposed_edit: str | None = None


class RequestPermissionParams(WireStruct, kw_only=True):
    session_id: str
    options: list[PermissionOption]
    tool_call: PermissionToolCall


class SelectedOutcome(WireStruct, tag_field="outcome", tag="selected", kw_only=True):
    option_id: str
    # reject-with-edit carries the text to use as the tool result (reference extension).
    replacement_content: str | None = None


class CancelledOutcome(WireStruct, tag_field="outcome", tag="cancelled", kw_only=True):
    pass


PermissionOutcome: TypeAlias = SelectedOutcome | CancelledOutcome


class RequestPermissionResult(WireStruct, kw_only=True):
    outcome: PermissionOutcome


ALLOW_ONCE: Final = PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once")
ALLOW_ALWAYS: Final = PermissionOption(
    option_id="allow-always", name="Always allow", kind="allow_always"
)
# The reference sends kind "reject_with_edit", which base ACP does not define: strict clients
# (the official SDKs) then reject the whole permission request, so edit tools could never be
# approved. The optionId alone identifies the choice; the kind says what it means to a UI.
REJECT_WITH_EDIT: Final = PermissionOption(
    option_id="reject-with-edit", name="Reject with edit", kind="reject_once"
)
REJECT_ONCE: Final = PermissionOption(option_id="reject-once", name="Reject", kind="reject_once")


def permission_options(*, edit: bool) -> list[PermissionOption]:
    """The approval choices, in the seed's order; file edits also offer ``reject-with-edit``."""
    if edit:
        return [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_WITH_EDIT, REJECT_ONCE]
    return [ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE]


CHOICE_OPTION_PREFIX: Final = "choice-"


def choice_options(choices: Sequence[str]) -> list[PermissionOption]:
    """ask_user's choices as permission options ``choice-0`` … ``choice-<n-1>``.

    As in the reference, every choice is ``allow_once`` except that the last of two or more
    is ``reject_once``, so clients that colour options by kind show a "no" button.
    """
    last = len(choices) - 1
    return [
        PermissionOption(
            option_id=f"{CHOICE_OPTION_PREFIX}{index}",
            name=text,
            kind="reject_once" if index == last and last >= 1 else "allow_once",
        )
        for index, text in enumerate(choices)
    ]


def chosen_index(outcome: PermissionOutcome, choice_count: int) -> int | None:
    """Which ask_user choice an outcome picked, or None (cancelled, unknown option id)."""
    if not isinstance(outcome, SelectedOutcome):
        return None
    prefix, _, digits = outcome.option_id.partition(CHOICE_OPTION_PREFIX)
    if prefix or not digits.isascii() or not digits.isdigit():
        return None
    index = int(digits)
    return index if index < choice_count and digits == str(index) else None


def parse_permission_outcome(result: JsonValue) -> PermissionOutcome:
    """Read a ``session/request_permission`` result.

    Anything malformed counts as ``CancelledOutcome``: an approval the client did not
    clearly give is a denial (the reference treats unknown outcomes as "no decision").
    """
    try:
        return msgspec.convert(result, RequestPermissionResult).outcome
    except msgspec.ValidationError:
        return CancelledOutcome()


# --------------------------------------------------------------------------- results


class PromptCapabilities(WireStruct, kw_only=True):
    image: bool
    audio: bool
    embedded_context: bool


class McpCapabilities(WireStruct, kw_only=True):
    http: bool
    sse: bool


class SessionCapabilities(WireStruct, kw_only=True):
    resume: EmptyObject | None = None
    close: EmptyObject | None = None


class AgentCapabilities(WireStruct, kw_only=True):
    load_session: bool
    prompt_capabilities: PromptCapabilities
    mcp_capabilities: McpCapabilities
    session_capabilities: SessionCapabilities | None = None


class Implementation(WireStruct, kw_only=True):
    name: str
    title: str | None = None
    version: str


class ZeroclawMeta(WireStruct, kw_only=True):
    default_model: str | None = None
    max_sessions: int
    session_timeout_secs: int


class InitializeMeta(WireStruct, kw_only=True):
    zeroclaw: ZeroclawMeta


class InitializeResult(WireStruct, kw_only=True):
    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation
    auth_methods: list[Json]
    meta: InitializeMeta | None = msgspec.field(default=None, name="_meta")


def initialize_result(
    *,
    store_available: bool,
    version: str,
    default_model: str | None,
    max_sessions: int,
    session_timeout_secs: int,
) -> InitializeResult:
    """The ``initialize`` result exactly as the seed shows it.

    With a session store: ``loadSession: true`` and ``sessionCapabilities {resume, close}``.
    Without one the seed says "all three are absent or false": ``loadSession: false`` and no
    ``sessionCapabilities``. ``defaultModel`` is omitted when no model is configured.
    """
    return InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        agent_capabilities=AgentCapabilities(
            load_session=store_available,
            prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
            mcp_capabilities=McpCapabilities(http=False, sse=False),
            session_capabilities=(
                SessionCapabilities(resume=EmptyObject(), close=EmptyObject())
                if store_available
                else None
            ),
        ),
        agent_info=Implementation(name=AGENT_NAME, title=AGENT_TITLE, version=version),
        auth_methods=[],
        meta=InitializeMeta(
            zeroclaw=ZeroclawMeta(
                default_model=default_model,
                max_sessions=max_sessions,
                session_timeout_secs=session_timeout_secs,
            )
        ),
    )


class NewSessionResult(WireStruct, kw_only=True):
    session_id: str
    workspace_dir: str


class PromptResult(WireStruct, kw_only=True):
    session_id: str
    stop_reason: StopReason
    content: str


class StopResult(WireStruct, omit_defaults=False, kw_only=True):
    session_id: str
    stopped: bool = True


class EmptyResult(WireStruct, kw_only=True):
    """``{}``: load, resume, close, cancel."""


class InboundUpdateResult(WireStruct, omit_defaults=False, kw_only=True):
    """Answer to an inbound ``session/update`` / ``session/event`` request."""

    session_id: str
    type: str
    status: str = "processed"


# --------------------------------------------------------------------------- inbound params

P = TypeVar("P", bound="InboundParams")
T = TypeVar("T")


class InboundParams(WireStruct, kw_only=True):
    """Params a client sends us. Build them with ``decode_params`` (lenient), not msgspec."""

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


def _missing(name: str) -> InvalidParamsError:
    return InvalidParamsError(f"Missing required parameter: {name}")


def _wrong_type(name: str, expected: str) -> InvalidParamsError:
    return InvalidParamsError(f"Invalid parameter: {name} must be {expected}")


def _session_id(params: JsonObject) -> str:
    value = params.get("sessionId")
    if value is None:
        value = params.get("session_id")
    if not isinstance(value, str):
        # The reference answers a missing and a non-string id the same way.
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
        """An empty ``{}`` means form support, as in the reference."""
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


class InitializeParams(InboundParams, kw_only=True):
    """``initialize``: only the client capabilities matter; ``protocolVersion`` is ignored
    (the server always answers 1)."""

    protocol_version: Json | UnsetType = UNSET
    client_capabilities: ClientCapabilities | None = None
    client_info: Json | UnsetType = UNSET

    @classmethod
    def from_object(cls, params: JsonObject) -> InitializeParams:
        raw = params.get("clientCapabilities", params.get("client_capabilities"))
        # Odd capabilities never fail the handshake: each one is read on its own and
        # anything malformed counts as not offered.
        capabilities = _client_capabilities(raw) if isinstance(raw, dict) else None
        return cls(
            protocol_version=params.get("protocolVersion", UNSET),
            client_capabilities=capabilities,
            client_info=params.get("clientInfo", UNSET),
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
    """An http / sse MCP server (we advertise no support; parsed so it can be refused clearly)."""

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


def _blank_to_none(value: JsonValue, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _wrong_type(name, "a string")
    value = value.strip()
    return value or None


class NewSessionParams(InboundParams, kw_only=True):
    """``session/new``. ``agent_alias`` is trimmed; blank means absent (seed §session/new)."""

    agent_alias: str | None = None
    cwd: str | None = None
    mcp_servers: list[McpServer] = msgspec.field(default_factory=list)

    @classmethod
    def from_object(cls, params: JsonObject) -> NewSessionParams:
        alias: str | None = None
        for name in ("agentAlias", "agent_alias", "agent"):
            alias = _blank_to_none(params.get(name), name)
            if alias is not None:
                break
        if alias is None:
            # Base-spec clients put extension data in _meta (acp-spec.md §10 #14).
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
        raw_servers = params.get("mcpServers", params.get("mcp_servers"))
        if raw_servers is None:
            raw_servers = []
        if not isinstance(raw_servers, list):
            raise _wrong_type("mcpServers", "an array")
        servers = [_mcp_server(raw, index) for index, raw in enumerate(raw_servers)]
        return cls(agent_alias=alias, cwd=cwd, mcp_servers=servers)


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


def _prompt_part(raw: JsonValue, index: int) -> ContentPart | None:
    """One prompt element, or None for parts we ignore (not objects, unknown types)."""
    if not isinstance(raw, dict):
        return None
    where = f"prompt[{index}]"
    kind = raw.get("type")
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
        # The seed's untyped {"text": …} and base ACP {"type": "text", …} alike.
        return TextContent(text=text)
    return None


class PromptParams(InboundParams, kw_only=True):
    """``session/prompt``: the prompt is normalised to a list of content blocks."""

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

    session_id: str

    @classmethod
    def from_object(cls, params: JsonObject) -> SessionIdParams:
        return cls(session_id=_session_id(params))


class InboundUpdateParams(InboundParams, kw_only=True):
    """Inbound ``session/update`` / ``session/event`` (ZeroClaw extension, event injection).

    The event type is ``params.type``, else ``params.update.sessionUpdate``, else
    ``"unknown"`` (zeroclaw.md §1.11). ``payload`` keeps the params as sent.
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


# --------------------------------------------------------------------------- codec helpers

_encoder: Final = msgspec.json.Encoder()


def encode(value: object) -> bytes:
    """Compact JSON for a Struct (or any builtin value)."""
    return _encoder.encode(value)


def decode(type_: type[T], data: bytes | str) -> T:
    """Strictly decode JSON text into ``type_`` (msgspec's C decoder, cached per type).

    Raises:
        msgspec.DecodeError / msgspec.ValidationError (both ``msgspec.DecodeError``).
    """
    return decode_typed(type_, data)


def convert(type_: type[T], value: JsonValue) -> T:
    """Strictly validate already-decoded JSON into ``type_``.

    Raises:
        InvalidParamsError: the value does not have the shape of ``type_``; the message
            includes msgspec's path (e.g. ``at `$.update.content```).
    """
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise InvalidParamsError(f"Invalid params: {exc}") from None


def to_builtins(value: object) -> JsonValue:
    """A Struct as plain dicts/lists with wire names (what ``encode`` would write)."""
    result: JsonValue = msgspec.to_builtins(value)
    return result
