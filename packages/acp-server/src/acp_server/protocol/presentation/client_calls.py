"""What a turn's tools ask of the ACP client besides permission: ``elicitation/create`` (a
form for ask_user), ``fs/read_text_file`` / ``fs/write_text_file`` (the editor's buffers),
``terminal/*`` (a terminal the editor shows).

``ClientCalls`` implements ``acp_server.agent.tools.base.ClientSide`` for one session over the
peer's outbound requests (``Outbound.call``, protocol/outbound.py). Each offer is used only when the
client advertised it in ``initialize`` and ``[acp]`` allows it:

* elicitation: ``clientCapabilities.elicitation.form``;
* files: ``fs.readTextFile`` / ``fs.writeTextFile`` and ``[acp] client_fs = "auto"``; over
  the gateway only when the client says in ``initialize`` that its files are the gateway's
  (``_meta.zeroclaw.sharedFilesystem: true``), since a remote editor's paths name other
  files than the server's;
* terminals: ``clientCapabilities.terminal`` and ``[acp] client_terminal = true``.

The jail, forbidden paths and approval are the tools' business and come first: a request
here only ever names a path the session's policy already resolved.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from acp_core import schema
from acp_core.jsonrpc import ErrorResponse
from acp_server.agent.tools.base import ChoiceQuestions, ElicitationAnswer, TerminalRun, ToolError
from acp_server.protocol.client_profile import BEFORE_INITIALIZE, ClientProfile

if TYPE_CHECKING:
    from acp_server.config import AcpConfig
    from acp_server.protocol.outbound import Outbound

logger = logging.getLogger(__name__)

ELICITATION_CREATE: Final = "elicitation/create"
FS_READ_TEXT_FILE: Final = "fs/read_text_file"
FS_WRITE_TEXT_FILE: Final = "fs/write_text_file"
TERMINAL_CREATE: Final = "terminal/create"
TERMINAL_WAIT_FOR_EXIT: Final = "terminal/wait_for_exit"
TERMINAL_KILL: Final = "terminal/kill"
TERMINAL_OUTPUT: Final = "terminal/output"
TERMINAL_RELEASE: Final = "terminal/release"
DEFAULT_CLIENT_FS_TIMEOUT_SECS: Final = 30.0
"""How long one ``fs/*`` request may take before the tool fails (the editor reads a buffer
or the disk; no person is involved)."""
MAX_SHOWN_ERROR_CHARS: Final = 300


class ClientFileError(ToolError):
    """The client could not read or write a file or run a terminal (its error, or no
    answer in time)."""


class ClientCalls:
    """One session's view of what its client offers (``ClientSide``)."""

    def __init__(
        self,
        outbound: Outbound,
        session_id: str,
        *,
        capabilities: schema.ClientCapabilities | None,
        use_files: bool,
        use_terminal: bool,
        answer_timeout: float,
        profile: ClientProfile = BEFORE_INITIALIZE,
    ) -> None:
        self._outbound = outbound
        self._profile = profile
        self._session_id = session_id
        self._answer_timeout = answer_timeout
        caps = capabilities or schema.ClientCapabilities()
        fs = caps.fs or schema.FileSystemCapabilities()
        self._elicit_form = bool(caps.elicitation and caps.elicitation.supports_form)
        self._reads = use_files and fs.read_text_file
        self._writes = use_files and fs.write_text_file
        self._terminal = use_terminal and bool(caps.terminal)

    @property
    def client_name(self) -> str | None:
        return self._profile.name

    @property
    def choice_questions(self) -> ChoiceQuestions:
        return self._profile.choice_questions

    @property
    def option_ids(self) -> schema.OptionIds:
        return self._profile.option_ids

    @property
    def reject_with_edit(self) -> bool:
        return self._profile.reject_with_edit

    @property
    def can_elicit(self) -> bool:
        return self._elicit_form

    @property
    def reads_files(self) -> bool:
        return self._reads

    @property
    def writes_files(self) -> bool:
        return self._writes

    @property
    def runs_terminals(self) -> bool:
        return self._terminal

    async def elicit(
        self, message: str, requested_schema: Mapping[str, Any], tool_call_id: str
    ) -> ElicitationAnswer:
        params: dict[str, Any] = {
            "sessionId": self._session_id,
            "mode": "form",
            "message": message,
            "requestedSchema": dict(requested_schema),
        }
        if tool_call_id:
            params["toolCallId"] = tool_call_id
        with trio.move_on_after(self._answer_timeout):
            response = await self._outbound.call(ELICITATION_CREATE, params)
            if isinstance(response, ErrorResponse):
                detail = response.error.message[:MAX_SHOWN_ERROR_CHARS]
                logger.info("elicitation answered with an error: %s", detail)
                return ElicitationAnswer("error", detail=f"the client answered: {detail}")
            return _elicitation_answer(response.result)
        logger.warning(
            "session %s: no answer to a question within %ss", self._session_id, self._answer_timeout
        )
        return ElicitationAnswer("cancel", detail="no answer in time")

    async def read_text_file(self, path: Path) -> str:
        """The client's view of ``path`` (an unsaved buffer included).

        Raises:
            ClientFileError: the client failed or did not answer in time.
        """
        params = {"sessionId": self._session_id, "path": str(path)}
        result = await self._fs_call(FS_READ_TEXT_FILE, params, path)
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ClientFileError(f"The client sent no text for {path}")
        return content

    async def write_text_file(self, path: Path, content: str) -> None:
        """Have the client write ``content`` to ``path`` (through its buffers).

        Raises:
            ClientFileError: the client failed or did not answer in time.
        """
        params = {"sessionId": self._session_id, "path": str(path), "content": content}
        await self._fs_call(FS_WRITE_TEXT_FILE, params, path)

    async def _fs_call(self, method: str, params: dict[str, Any], path: Path) -> Any:
        with trio.move_on_after(DEFAULT_CLIENT_FS_TIMEOUT_SECS):
            response = await self._outbound.call(method, params)
            if isinstance(response, ErrorResponse):
                detail = response.error.message[:MAX_SHOWN_ERROR_CHARS]
                raise ClientFileError(f"The client could not {_verb(method)} {path}: {detail}")
            return response.result
        raise ClientFileError(
            f"The client did not {_verb(method)} {path} within {DEFAULT_CLIENT_FS_TIMEOUT_SECS:g}s"
        )

    async def run_in_terminal(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_secs: float,
        output_limit: int,
        on_created: Callable[[str], Awaitable[None]],
    ) -> TerminalRun:
        """Run ``argv`` in a terminal the client shows: create it, hand its id to
        ``on_created`` (the card embeds it), wait for the exit (killing the command after
        ``timeout_secs``), read its output, and always release it.

        Raises:
            ClientFileError: the client refused to create the terminal or to answer.
        """
        created = await self._terminal_call(
            TERMINAL_CREATE,
            {
                "command": argv[0],
                "args": list(argv[1:]),
                "cwd": str(cwd),
                "outputByteLimit": output_limit,
            },
        )
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str) or not terminal_id:
            raise ClientFileError("The client created no terminal (no terminalId)")
        try:
            await on_created(terminal_id)
            timed_out = False
            with trio.move_on_after(timeout_secs) as waited:
                await self._terminal_call(TERMINAL_WAIT_FOR_EXIT, {"terminalId": terminal_id})
            if waited.cancelled_caught:
                timed_out = True
                await self._terminal_call(TERMINAL_KILL, {"terminalId": terminal_id})
            result = await self._terminal_call(TERMINAL_OUTPUT, {"terminalId": terminal_id})
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(DEFAULT_CLIENT_FS_TIMEOUT_SECS):
                await self._outbound.call(
                    TERMINAL_RELEASE, {"sessionId": self._session_id, "terminalId": terminal_id}
                )
        output = result.get("output") if isinstance(result, dict) else None
        status = result.get("exitStatus") if isinstance(result, dict) else None
        status = status if isinstance(status, dict) else {}
        exit_code, signal = status.get("exitCode"), status.get("signal")
        return TerminalRun(
            terminal_id=terminal_id,
            output=output if isinstance(output, str) else "",
            truncated=isinstance(result, dict) and result.get("truncated") is True,
            exit_code=exit_code if isinstance(exit_code, int) else None,
            signal=signal if isinstance(signal, str) else None,
            timed_out=timed_out,
        )

    async def _terminal_call(self, method: str, params: dict[str, Any]) -> Any:
        response = await self._outbound.call(method, {"sessionId": self._session_id, **params})
        if isinstance(response, ErrorResponse):
            detail = response.error.message[:MAX_SHOWN_ERROR_CHARS]
            raise ClientFileError(f"The client's terminal failed ({method}): {detail}")
        return response.result


def _verb(method: str) -> str:
    return "write" if method == FS_WRITE_TEXT_FILE else "read"


def _elicitation_answer(result: Any) -> ElicitationAnswer:
    """An ``elicitation/create`` result; anything unreadable counts as an error."""
    action = result.get("action") if isinstance(result, dict) else None
    if action == "accept":
        content = result.get("content")
        return ElicitationAnswer("accept", content=content if isinstance(content, dict) else {})
    if action in ("decline", "cancel"):
        return ElicitationAnswer("decline" if action == "decline" else "cancel")
    return ElicitationAnswer("error", detail=f"the client answered with action {action!r}")


def client_calls_for(outbound: Outbound, session_id: str, acp: AcpConfig) -> ClientCalls:
    """The ``ClientCalls`` of one session of ``outbound``'s peer, from its ``initialize``
    and the server's ``[acp]`` table."""
    local_files = not outbound.remote or outbound.shares_filesystem
    return ClientCalls(
        outbound,
        session_id,
        capabilities=outbound.client_capabilities,
        use_files=acp.client_fs == "auto" and local_files,
        use_terminal=acp.client_terminal,
        answer_timeout=acp.permission_timeout,
        profile=outbound.client_profile,
    )
