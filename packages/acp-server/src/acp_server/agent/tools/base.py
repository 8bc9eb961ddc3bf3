"""The tool contract: what the agent runtime calls and what tools may call back.

A tool validates its arguments, enforces the session's ``SecurityPolicy`` for every path
and command, and returns a ``ToolOutput``. Approval is decided by the runtime *before*
``run`` (via ``SecurityPolicy.decide``); tools never ask by themselves, except the
interactive ones (ask_user) which use ``ToolContext.ask_choice``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from acp_server.agent.conversation import PlanEntry
from acp_server.security import SecurityPolicy

DEFAULT_MAX_TOOL_OUTPUT_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class DeliveredFile:
    """A file handed back to the client by deliver_file (seed, "Delivering files")."""

    uri: str  # attachment://deliver/<sha256>.<ext>
    path: Path  # the uploads/<sha256>.<ext> copy
    filename: str
    title: str
    mime_type: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A tool's result. ``text`` is model-facing (``Error: …`` when ``ok`` is False)."""

    text: str
    ok: bool = True
    delivered: DeliveredFile | None = None


@dataclass(slots=True)
class ToolContext:
    session_id: str
    workspace: Path
    policy: SecurityPolicy
    shell_timeout_secs: float
    # Ask the client to pick one of ``choices`` (ask_user); None when dismissed/denied.
    ask_choice: Callable[[str, Sequence[str]], Awaitable[int | None]]
    # Stream text to the client as an agent_message_chunk (escalate_to_human).
    send_text: Callable[[str], Awaitable[None]]
    # Replace the session plan (todo tool): emits a `plan` update.
    set_plan: Callable[[Sequence[PlanEntry]], Awaitable[None]]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def uploads_dir(self) -> Path:
        return self.workspace / "uploads"


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments object
    side_effects: bool  # readonly risk profiles refuse tools with side effects

    async def run(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...


class ToolError(Exception):
    """A tool failed in an expected way; ``str()`` becomes ``Error: <reason>`` for the model."""
