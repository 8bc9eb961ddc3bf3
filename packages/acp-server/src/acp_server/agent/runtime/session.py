"""One ACP session's live state, and the reservation of its single running turn.

A session belongs to one connection. At most one prompt turn runs at a time (a second
``session/prompt`` is -32002, the ZeroClaw ACP documentation, "session/prompt"); the turn owns a ``trio.CancelScope``
that ``session/cancel`` and ``session/close`` cancel synchronously.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from acp_server.agent.io.uploads import uploads_dir
from acp_server.agent.limits.actions import ActionBudget, SessionActions
from acp_server.agent.limits.spend import CostMeter
from acp_server.agent.prompt.identity import seed_persona_files
from acp_server.agent.prompt.system_prompt import (
    PromptFiles,
    PromptInputs,
    build_system_prompt,
    file_signature,
    prompt_file_candidates,
    read_prompt_files,
)
from acp_server.agent.providers.base import Provider, ToolSpec
from acp_server.agent.skills.commands import SkillCommands
from acp_server.agent.skills.loader import LoadedSkills
from acp_server.agent.tools.base import Tool
from acp_server.config import AgentConfig, RuntimeProfileConfig
from acp_server.model import ChatMessage, PlanStep
from acp_server.observability.metrics import NO_METRICS, Metrics
from acp_server.security import CommandRisk, SecurityPolicy
from acp_server.security.sandbox import discard_session_temp_dir, shell_program

if TYPE_CHECKING:
    from acp_server.agent.tools.mcp import McpToolset

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class Turn:
    """A running prompt turn.

    ``streamed`` collects every text chunk sent to the client, so a cancelled turn can
    answer with the partial text (the ZeroClaw ACP documentation, "session/cancel").
    """

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    done: trio.Event = field(default_factory=trio.Event)
    streamed: list[str] = field(default_factory=list)
    # The session's provider and its context window when the turn was admitted: a model
    # chosen meanwhile (session/set_config_option) applies from the next turn.
    provider: Provider | None = None
    context_window: int = 0

    def cancel(self) -> None:
        self.scope.cancel()

    @property
    def partial_text(self) -> str:
        return "".join(self.streamed)


@dataclass(eq=False)
class Session:
    session_id: str
    agent: AgentConfig
    workspace: Path
    provider: Provider
    tools: Mapping[str, Tool]
    policy: SecurityPolicy
    runtime_profile: RuntimeProfileConfig
    history: list[ChatMessage] = field(default_factory=list)
    plan: tuple[PlanStep, ...] | None = None
    # What the client lists the session as (protocol/services/titles.py); None until named.
    title: str | None = None
    # Tools the client answered "allow-always" for, each with the highest command risk
    # class approved (security.remember_allow_always); remembered for this session only.
    allow_always: dict[str, CommandRisk] = field(default_factory=dict)
    # The session's config option choices (protocol/services/config_options.py): the provider it
    # talks to, by ref, and the risk level its policy enforces (at most its profile's).
    provider_ref: str = ""
    risk_level: str = ""
    context_window: int = 0
    """The provider's context window in tokens (``usage_update.size``); 0: not known."""
    last_activity: float = 0.0
    turn: Turn | None = None
    # The store's fencing epoch this copy holds the session at (None: not stored): every
    # turn commit carries it, and one refused for it means the session is open elsewhere.
    epoch: int | None = None
    # What the model is told about the tools (``tool_specs``): derived at the first model
    # call, not at session/new, since the tools' argument schemas cost more to derive than
    # the rest of opening a session; forgotten when the tool set changes.
    _tool_specs: list[ToolSpec] | None = field(default=None, init=False, repr=False)
    # MCP servers started for this session (acp_enable_mcp); their tools join at the
    # first turn, once the servers are ready (session/new never waits for them).
    mcp: McpToolset | None = None
    _mcp_merged: bool = field(default=False, init=False, repr=False)
    # The spending caps this session's model calls are checked against (agent/limits/spend.py).
    cost: CostMeter | None = None
    # Where the session's turns, model calls and refusals are counted (the app's).
    metrics: Metrics = NO_METRICS
    # Strings every turn needs, computed once in __post_init__.
    uploads_path: str = field(default="", init=False)
    # Rebuilt before every turn (refresh_system_prompt): the date is recomputed and the
    # persona and project files re-read when any changed, so an edit applies next turn.
    system_prompt: str = field(default="", init=False, repr=False)
    _prompt_files: PromptFiles | None = field(default=None, init=False, repr=False)
    _prompt_signature: tuple[object, ...] = field(default=(), init=False, repr=False)
    _prompt_candidates: tuple[str, ...] = field(default=(), init=False, repr=False)
    # What system_prompt was last built from: rebuilt only when one of these changed.
    _prompt_key: tuple[object, ...] = field(default=(), init=False, repr=False)
    _shell: str = field(default="", init=False, repr=False)
    # The runtime profile's max_actions_per_hour, counted on trio's clock (agent/limits/actions.py).
    action_budget: ActionBudget = field(init=False, repr=False)
    # What a counted tool call takes a slot from: action_budget and, over the gateway, the
    # budget its principal's sessions share (set with the session's CostMeter).
    actions: SessionActions = field(init=False, repr=False)
    # The skills read with the prompt files; their tools and slash commands follow them.
    commands: SkillCommands = field(default_factory=SkillCommands, init=False, repr=False)

    def __post_init__(self) -> None:
        self.action_budget = ActionBudget(
            self.runtime_profile.max_actions_per_hour, trio.current_time
        )
        self.actions = SessionActions(self.action_budget)
        self.uploads_path = str(uploads_dir(self.workspace))
        # Once per session, like the cwd checks of session/new: write the missing persona
        # templates and take the first reading of a few small capped files.
        if self.agent.workspace is not None:
            seed_persona_files(self.agent.workspace, self.agent.alias)
        self._shell = shell_program()
        inputs = self.prompt_inputs()
        # As str: stat takes them as they are, once per file each turn.
        self._prompt_candidates = tuple(map(str, prompt_file_candidates(inputs)))
        signature = file_signature(self._prompt_candidates)
        self._use_files(read_prompt_files(inputs), signature)

    @property
    def skills(self) -> LoadedSkills:
        files = self._prompt_files
        return files.skills if files is not None else LoadedSkills()

    def _use_files(self, files: PromptFiles, signature: tuple[object, ...]) -> None:
        """Take a reading of the prompt files; ``signature`` is of the candidates, taken
        before it. The skills' own paths (found by the reading) are stat'ed after it."""
        self._prompt_files = files
        self._prompt_signature = signature + file_signature(files.skills.watched)
        tools = self.commands.use(files.skills, self.tools, compact=files.skills_mode == "compact")
        if tools is not None:
            self.tools = tools
            self._tool_specs = None

    def prompt_inputs(self) -> PromptInputs:
        return PromptInputs(
            agent=self.agent,
            cwd=self.workspace,
            policy=self.policy,
            tool_names=tuple(self.tools),
            model=self.provider.model,
            shell=self._shell,
            max_actions_per_hour=self.runtime_profile.max_actions_per_hour,
        )

    async def refresh_system_prompt(self) -> None:
        """Rebuild ``system_prompt`` for the next model call; the files are read again (in
        a worker thread) only when their sizes, times or inodes changed, and the prompt is
        built again only when they, the local date or UTC offset, the tools or the model
        changed."""
        signature = file_signature(self._prompt_candidates)
        watched = signature + file_signature(self.skills.watched)
        local = time.localtime()
        day = (local.tm_year, local.tm_yday, local.tm_gmtoff)
        key = (watched, day, tuple(self.tools), self.provider.model)
        if key == self._prompt_key and self._prompt_files is not None and self.system_prompt:
            return
        if self._prompt_files is None or watched != self._prompt_signature:
            files = await trio.to_thread.run_sync(read_prompt_files, self.prompt_inputs())
            self._use_files(files, signature)  # the skills may change the tools
        inputs = self.prompt_inputs()
        assert self._prompt_files is not None
        # Read after the key: a date that turns meanwhile only means one more rebuild.
        now = datetime.now().astimezone()
        self.system_prompt = build_system_prompt(inputs, self._prompt_files, now)
        self._prompt_key = (self._prompt_signature, day, tuple(self.tools), self.provider.model)

    @property
    def tool_specs(self) -> list[ToolSpec]:
        """What the model is told about the tools."""
        if self._tool_specs is None:
            self._tool_specs = [
                ToolSpec(name=tool.name, description=tool.description, parameters=tool.parameters)
                for tool in self.tools.values()
            ]
        return self._tool_specs

    async def prepare_tools(self) -> list[str]:
        """Before a turn: wait (bounded) for MCP servers, then add their tools once.

        Returns one sentence per server that could not be started or reached, the first
        time only (the turn shows them: the model never hears of tools that did not come).
        """
        mcp = self.mcp
        if mcp is None or self._mcp_merged:
            return []
        await mcp.wait_ready()
        merged: dict[str, Tool] = dict(self.tools)
        for name, tool in mcp.tools.items():
            merged.setdefault(name, tool)  # a built-in is never shadowed
        self.tools = merged
        self._tool_specs = None
        self._mcp_merged = True
        problems = mcp.problems
        for problem in problems:
            logger.warning("session %s: %s", self.session_id, problem)
        return problems

    def close(self) -> None:
        """The session is leaving memory: stop what it started (MCP servers) and remove
        its sandbox temporary directory."""
        if self.mcp is not None:
            self.mcp.close()
        discard_session_temp_dir(self.session_id)

    def touch(self) -> None:
        self.last_activity = trio.current_time()

    @property
    def busy(self) -> bool:
        return self.turn is not None

    def start_turn(self) -> Turn:
        """Reserve the session's turn slot (the caller has checked ``busy``)."""
        turn = Turn(provider=self.provider, context_window=self.context_window)
        self.turn = turn
        self.touch()
        return turn

    def finish_turn(self, turn: Turn) -> None:
        if self.turn is turn:
            self.turn = None
        turn.done.set()
        self.touch()
