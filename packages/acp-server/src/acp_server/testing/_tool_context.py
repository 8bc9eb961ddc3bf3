"""A ``ToolContext`` for running one tool outside a turn, recording what it sends back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from acp_server.agent.tools.base import ToolContext
from acp_server.config import RiskProfileConfig
from acp_server.model import PlanStep
from acp_server.security import SecurityPolicy


@dataclass
class Recorder:
    """What a tool asked of the client: questions, streamed text, plans."""

    answer: int | None = 0
    questions: list[tuple[str, list[str]]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    plans: list[list[PlanStep]] = field(default_factory=list)

    async def ask_choice(self, question: str, choices: Sequence[str]) -> int | None:
        self.questions.append((question, list(choices)))
        return self.answer

    async def send_text(self, text: str) -> None:
        self.texts.append(text)

    async def set_plan(self, entries: Sequence[PlanStep]) -> None:
        self.plans.append(list(entries))


def tool_context(
    workspace: Path,
    profile: RiskProfileConfig | None = None,
    *,
    shell_timeout_secs: float = 30.0,
    recorder: Recorder | None = None,
) -> tuple[ToolContext, Recorder]:
    """A context for tools run in ``workspace`` under ``profile``'s policy, and the
    ``Recorder`` of what they asked (``recorder.answer`` answers their questions)."""
    recorder = recorder or Recorder()
    policy = SecurityPolicy(profile or RiskProfileConfig(), workspace)
    ctx = ToolContext(
        session_id="s-test",
        workspace=policy.workspace,
        policy=policy,
        shell_timeout_secs=shell_timeout_secs,
        ask_choice=recorder.ask_choice,
        send_text=recorder.send_text,
        set_plan=recorder.set_plan,
    )
    return ctx, recorder
