"""The tool contract: what the agent runtime calls and what tools may call back.

A tool validates its arguments, enforces the session's ``SecurityPolicy`` for every path
and command, and returns a ``ToolOutput``. Approval is decided by the runtime *before*
``run`` (via ``SecurityPolicy.decide``); tools never ask by themselves, except the
interactive ones (ask_user) which use ``ToolContext.ask_choice``.

Each built-in tool declares everything the rest of the server needs to know about it in
one ``ToolDefinition`` (its class's ``definition``): its ACP ``kind``, the rules
``decide`` applies (which argument is a path or a command, whether it approves itself),
how its calls look on the wire (``ToolPresentation``), and how a result stored before
results carried their ``ToolRecord`` is replayed (``legacy_record``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeAlias

import msgspec

from acp_core import schema
from acp_core.tools import ApprovalKind, ToolKindName, tool_kind
from acp_server.agent.tools._text import encodable, shown_name
from acp_server.agent.tools._titles import TitleOf, command_title
from acp_server.errors import ZeroclawError
from acp_server.model import CallView, FileLocation, PlanStep, ToolRecord
from acp_server.security import NO_RULES, PolicyViolation, SecurityPolicy, ToolRules
from acp_server.security.sandbox.spawn import ResourceLimits

DEFAULT_MAX_TOOL_OUTPUT_BYTES: Final = 64 * 1024


class DeliveredFile(msgspec.Struct, frozen=True):
    """A file handed back to the client by deliver_file (the ZeroClaw ACP documentation, "Delivering files")."""

    uri: str  # attachment://deliver/<sha256>.<ext>
    path: Path  # the uploads/<sha256>.<ext> copy
    filename: str
    title: str
    mime_type: str
    size: int
    sha256: str


class ToolOutput(msgspec.Struct, frozen=True):
    """A tool's result. ``text`` is model-facing; ``ok`` alone says whether it failed.
    ``summary``, when given, is what the client's card shows instead of ``text`` (a
    delivery's short human line); ``locations`` are the files the result points at (a
    search's matches, absolute, at most ``MAX_CARD_LOCATIONS``)."""

    text: str
    ok: bool = True
    delivered: DeliveredFile | None = None
    summary: str | None = None
    locations: tuple[FileLocation, ...] = ()
    card: tuple[schema.ToolCallContent, ...] = ()
    """Content the call's card keeps ahead of the result text (a client terminal)."""
    ran: bool = True
    """False when the tool refused the call before doing anything (``RefusedCall``)."""


MAX_CARD_LOCATIONS: Final = 20
"""Locations one tool card carries at most (a search's first matches)."""


class ElicitationAnswer(msgspec.Struct, frozen=True):
    """The client's answer to an ACP ``elicitation/create``: ``accept`` (with the form's
    ``content``), ``decline``, ``cancel``, or ``error`` (the client failed or never answered;
    ``detail`` says why)."""

    action: Literal["accept", "decline", "cancel", "error"]
    content: Mapping[str, Any] = msgspec.field(default_factory=dict)
    detail: str = ""


ChoiceQuestions: TypeAlias = Literal["names", "one_per_kind", "unasked"]
"""How ask_user's choices can go out as permission options: ``names`` (the client shows
each option by name: any number of choices), ``one_per_kind`` (no two options may share a
kind), ``unasked`` (the client cannot send back one of several picks; the question is not
asked). acp_server/protocol/client_profile.py says which client gets which."""


class ClientSide(Protocol):
    """What the ACP client offers this session beyond permission requests (its
    ``clientCapabilities`` from ``initialize``, as allowed by ``[acp]``); each call only when
    its flag says the client offers it (acp_server/protocol/presentation/client_calls.py). And how it
    shows permission requests (acp_server/protocol/client_profile.py)."""

    @property
    def client_name(self) -> str | None:
        """``clientInfo.name`` from ``initialize`` (None when it sent none)."""
        ...

    @property
    def choice_questions(self) -> ChoiceQuestions:
        """How ask_user's choices may be asked without ``elicitation/create``."""
        ...

    @property
    def option_ids(self) -> schema.OptionIds:
        """The optionIds its approval options carry."""
        ...

    @property
    def reject_with_edit(self) -> bool:
        """Edit approvals may offer ``reject-with-edit`` (it can send the text)."""
        ...

    @property
    def can_elicit(self) -> bool:
        """``elicitation.form``: ``elicit`` shows a form."""
        ...

    async def elicit(
        self, message: str, requested_schema: Mapping[str, Any], tool_call_id: str
    ) -> ElicitationAnswer:
        """Send ``elicitation/create`` (form mode) and wait for the answer."""
        ...

    @property
    def reads_files(self) -> bool:
        """``fs.readTextFile`` (and ``[acp] client_fs`` allows it)."""
        ...

    @property
    def writes_files(self) -> bool:
        """``fs.writeTextFile`` (and ``[acp] client_fs`` allows it)."""
        ...

    async def read_text_file(self, path: Path) -> str:
        """``fs/read_text_file``: the client's text of ``path`` (raises ``ToolError``)."""
        ...

    async def write_text_file(self, path: Path, content: str) -> None:
        """``fs/write_text_file``: the client writes ``path`` (raises ``ToolError``)."""
        ...

    @property
    def runs_terminals(self) -> bool:
        """``terminal`` (and ``[acp] client_terminal`` allows it)."""
        ...

    async def run_in_terminal(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_secs: float,
        output_limit: int,
        on_created: Callable[[str], Awaitable[None]],
    ) -> TerminalRun:
        """``terminal/create`` … ``wait_for_exit`` (``kill`` after the timeout) …
        ``output`` … ``release``; ``on_created`` gets the terminal id (raises ``ToolError``)."""
        ...


class TerminalRun(msgspec.Struct, frozen=True):
    """How a command run in the client's terminal ended."""

    terminal_id: str
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None
    timed_out: bool


class ToolContext(msgspec.Struct):
    session_id: str
    workspace: Path
    policy: SecurityPolicy
    shell_timeout_secs: float
    # Ask the client to pick one of ``choices`` (ask_user); None when dismissed/denied.
    ask_choice: Callable[[str, Sequence[str]], Awaitable[int | None]]
    # Stream text to the client as an agent_message_chunk (escalate_to_human).
    send_text: Callable[[str], Awaitable[None]]
    # Replace the session plan (todo tool): emits a `plan` update.
    set_plan: Callable[[Sequence[PlanStep]], Awaitable[None]]
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    # setrlimit of the shell tool's child (the runtime profile's shell_*_limit_* keys).
    shell_limits: ResourceLimits = msgspec.field(default_factory=ResourceLimits)
    # The ACP client's own offers (elicitation, files, terminals); None when it has none.
    client: ClientSide | None = None
    # The running call's toolCallId (what client requests about the call refer to).
    tool_call_id: str = ""
    # Replace the running call's card content (a tool_call_update): live shell output.
    update_card: Callable[[Sequence[schema.ToolCallContent]], Awaitable[None]] | None = None

    @property
    def uploads_dir(self) -> Path:
        return self.workspace / "uploads"


class Tool(Protocol):
    name: str
    description: str

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the arguments object (built-ins: their Struct's, shared)."""
        ...

    side_effects: bool  # readonly risk profiles refuse tools with side effects

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...


class ToolError(ZeroclawError):
    """A tool failed in an expected way; ``str()`` becomes ``Error: <reason>`` for the model."""


class RefusedCall(ToolError):
    """The tool refused the call before doing anything: its arguments are unusable (the
    ``_args`` helpers raise it) or the policy's re-check refused them. The call did not
    run, so it uses none of the action budget (acp_server/agent/limits/actions.py)."""


class ToolPresentation:
    """How a tool's calls look to the client: the live and replayed ``tool_call`` and the
    ``session/request_permission`` prompt. This default shows the arguments as given and
    asks with ``kind`` ``execute`` and an arguments summary.

    Args:
        line_argument: the argument holding the 1-based line the call starts at
            (file_read's ``offset``), given with its path in ``locations``.
    """

    approval_kind: ApprovalKind = "execute"
    """``edit`` prompts carry a diff and offer ``reject-with-edit``."""
    reads_files: bool = False
    """Whether ``view`` reads file contents (then the runtime calls it in a worker thread)."""

    def __init__(self, *, line_argument: str | None = None) -> None:
        self.line_argument = line_argument

    def view(
        self, arguments: Mapping[str, Any], policy: SecurityPolicy, rules: ToolRules
    ) -> CallView:
        """The card's locations: the file the rules' path argument names, resolved in the
        jail to an absolute path (none when it is refused: the policy refuses the call)."""
        location = located_argument(arguments, policy, rules)
        if location is None:
            return CallView()
        line = arguments.get(self.line_argument) if self.line_argument else None
        if isinstance(line, int) and not isinstance(line, bool) and line >= 1:
            location = FileLocation(location.path, line)
        return CallView(locations=(location,))

    async def view_through_client(
        self,
        arguments: Mapping[str, Any],
        policy: SecurityPolicy,
        rules: ToolRules,
        client: ClientSide,
    ) -> CallView | None:
        """The view read through the client's files (``fs/read_text_file``), for a tool
        that will itself read them there; None (this default): ``view`` applies."""
        return None

    def raw_input(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``rawInput`` of the call's ``tool_call``: the arguments as given, an unpaired
        surrogate shown as its ``\\udXXX`` escape."""
        shown: dict[str, Any] = encodable(arguments)
        return shown

    def diff(self, arguments: Mapping[str, Any]) -> list[schema.ToolCallContent] | None:
        """The diff the arguments alone give: what a call replayed from a record stored
        before records kept the call's ``view`` shows (live calls show their view's)."""
        return None

    def proposed_edit(self, arguments: Mapping[str, Any]) -> str | None:
        """The text an ``edit`` approval prompt offers to replace."""
        return None


ARGUMENTS_AS_GIVEN: Final = ToolPresentation()


def located_argument(
    arguments: Mapping[str, Any], policy: SecurityPolicy, rules: ToolRules
) -> FileLocation | None:
    """The absolute, jailed path of the call's path argument; None without one or when the
    jail refuses it."""
    argument = rules.path_argument
    raw = arguments.get(argument.name) if argument is not None else None
    if argument is None or not isinstance(raw, str):
        return None
    try:
        path = policy.resolve_path(raw, for_write=argument.for_write)
    except PolicyViolation:
        return None
    return FileLocation(absolute_name(path))


def absolute_name(path: Path) -> str:
    """An absolute path as text a client can be sent (non-UTF-8 bytes escaped)."""
    return shown_name(str(path))


LegacyRecord: TypeAlias = Callable[[Mapping[str, Any], str], "ToolRecord | None"]
"""``(call arguments, result text)`` → the record of a result stored without one."""


class ToolDefinition(msgspec.Struct, frozen=True):
    """Everything the runtime, the policy and replay need to know about one tool."""

    name: str
    kind: ToolKindName
    """ACP ``kind`` of its ``tool_call`` / ``tool_call_update`` (as ZeroClaw's implementation does)."""
    rules: ToolRules = NO_RULES
    presentation: ToolPresentation = ARGUMENTS_AS_GIVEN
    legacy_record: LegacyRecord | None = None
    """Rebuilds the ``ToolRecord`` of a result stored before records were (schema < 3)
    from its text; None when the tool never streamed or delivered anything."""
    arguments: type[msgspec.Struct] | None = None
    """The Struct its calls' arguments are read through; the JSON Schema derived from it is
    the tool's ``parameters`` (agent/tools/arguments.py). None: a tool whose schema comes
    from elsewhere (an MCP server's)."""
    title: TitleOf | None = None
    """The card title its arguments give (``Read `notes.txt```, agent/tools/_titles.py);
    a tool whose rules name a command is titled by the command."""

    def title_of(self, arguments: Mapping[str, Any]) -> str:
        """The title of a call's card, live, in its permission request and on replay:
        the command of a shell-like tool (its rules' ``command_argument`` or
        ``command_of``), else what ``title`` makes of the arguments, else the tool's name."""
        rules = self.rules
        command: object = None
        if rules.command_argument is not None:
            command = arguments.get(rules.command_argument)
        elif rules.command_of is not None:
            command = rules.command_of(arguments)
        if isinstance(command, str) and command.strip():
            return command_title(command)
        titled = self.title(arguments) if self.title is not None else None
        return titled or self.name

    @classmethod
    def fallback(cls, name: str) -> ToolDefinition:
        """A tool without a definition (MCP, unknown): ZeroClaw's kind for its name."""
        return cls(name=name, kind=tool_kind(name))
