"""Session config options (ACP "Session Config Options"): the ``model`` and ``mode`` pickers.

* ``model`` (category ``model``): the model providers the session's agent may use, its
  ``model_provider`` first, then ``[agents.<alias>] model_providers``. A change applies from
  the session's next turn (a running turn keeps the provider it started with).
* ``mode`` (category ``mode``): the risk levels up to the agent's risk profile's level
  (``readonly``, ``supervised``, and ``full`` only when the profile is ``full``). A client
  can lower the level, never raise it above what the administrator configured. The
  session's security policy is rebuilt at the chosen level at once, so the next tool call
  is decided by it; everything else about it (the extra roots of ``additionalDirectories``
  included) stays as it was.

Choices are kept with the session in the store and applied again when it is restored; a
stored choice the configuration no longer offers is dropped (the default applies).

The ``mode`` option is also offered as ACP's session modes (``modes`` in the results of
``session/new``, ``session/load``, ``session/resume`` and ``session/fork``;
``session/set_mode``, services/modes.py): one value, the session's ``risk_level``, seen
both ways, so a change made either way is announced both ways (``config_option_update``
and ``current_mode_update``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final, cast

from acp_core import schema
from acp_core.errors import InvalidParamsError
from acp_server.agent.providers.base import ProviderError
from acp_server.agent.runtime.session import Session
from acp_server.config import Config, RiskLevel, RiskProfileConfig
from acp_server.errors import AgentUnavailable, OperationFailed
from acp_server.protocol.limits import shortened

if TYPE_CHECKING:
    from acp_core.jsonrpc import Payload
    from acp_server.protocol.routes import Job
    from acp_server.protocol.services.connection_state import ConnectionState
    from acp_server.protocol.services.context import AcpApp
    from acp_server.storage import AsyncSessionStore

logger = logging.getLogger(__name__)

MODEL_OPTION: Final = "model"
MODE_OPTION: Final = "mode"
RISK_LEVELS: Final = ("readonly", "supervised", "full")
"""Lowest first: a session may run at its profile's level or any before it."""
MAX_SHOWN_VALUE_CHARS: Final = 80
LEVEL_NAMES: Final = {"readonly": "Read only", "supervised": "Supervised", "full": "Full"}
LEVEL_DESCRIPTIONS: Final = {
    "readonly": "Tools without side effects only: nothing is written or run",
    "supervised": "Side effects ask for approval unless the profile auto-approves them",
    "full": "Tool calls run without asking (within the security policy)",
}


def provider_choices(agent_model_provider: str, model_providers: tuple[str, ...]) -> list[str]:
    """The refs the ``model`` option offers: the agent's own provider first, each once."""
    refs = [agent_model_provider, *model_providers] if agent_model_provider else model_providers
    return list(dict.fromkeys(refs))


def level_choices(profile_level: str) -> list[str]:
    """The risk levels a session of a profile at ``profile_level`` may run at."""
    if profile_level not in RISK_LEVELS:
        return [profile_level]
    return list(RISK_LEVELS[: RISK_LEVELS.index(profile_level) + 1])


def shown(text: str) -> str:
    """A client's value as an error message quotes it: escaped and bounded."""
    return shortened(repr(text), MAX_SHOWN_VALUE_CHARS)


def _profile(config: Config, session: Session) -> RiskProfileConfig:
    return config.risk_profiles.get(session.agent.risk_profile, RiskProfileConfig())


def config_options(config: Config, session: Session) -> list[schema.ConfigOption]:
    """The session's options with their current values, in the order clients show them."""
    agent = session.agent
    providers = []
    for ref in provider_choices(agent.model_provider, agent.model_providers):
        provider = config.providers.get(ref)
        model = provider.model if provider is not None else None
        providers.append(
            schema.ConfigOptionValue(
                value=ref, name=model or ref, description=f"provider {ref}" if model else None
            )
        )
    levels = [
        schema.ConfigOptionValue(value=mode.id, name=mode.name, description=mode.description)
        for mode in _modes(config, session)
    ]
    return [
        schema.ConfigOption(
            id=MODEL_OPTION,
            name="Model",
            description="The model provider the next turn uses",
            category="model",
            type="select",
            current_value=session.provider_ref,
            options=providers,
        ),
        schema.ConfigOption(
            id=MODE_OPTION,
            name="Mode",
            description="The risk level tool calls are decided at (at most the agent's profile)",
            category="mode",
            type="select",
            current_value=session.risk_level,
            options=levels,
        ),
    ]


def _modes(config: Config, session: Session) -> list[schema.SessionMode]:
    """The levels ``session`` may run at, named: the ``mode`` option's values and ACP's
    ``availableModes`` alike."""
    return [
        schema.SessionMode(
            id=level, name=LEVEL_NAMES.get(level, level), description=LEVEL_DESCRIPTIONS.get(level)
        )
        for level in level_choices(_profile(config, session).level)
    ]


def session_modes(config: Config, session: Session) -> schema.SessionModeState:
    """ACP ``modes``: the ``mode`` option's values and current value, as session modes."""
    return schema.SessionModeState(
        current_mode_id=session.risk_level, available_modes=_modes(config, session)
    )


def choose(app: AcpApp, session: Session, config_id: str, value: str) -> None:
    """Apply one choice to ``session``.

    Raises:
        InvalidParamsError: no such option, or a value the option does not offer (-32602).
        AgentUnavailable: the chosen provider cannot be built.
    """
    config = app.config
    if config_id == MODEL_OPTION:
        agent = session.agent
        if value not in provider_choices(agent.model_provider, agent.model_providers):
            raise InvalidParamsError(f"Invalid value for config option `model`: {shown(value)}")
        if value == session.provider_ref:
            return
        provider_config = config.providers.get(value)
        if provider_config is None:
            raise AgentUnavailable(f"model provider `{value}` is not configured")
        try:
            session.provider = app.provider_factory(provider_config)
        except ProviderError as exc:
            raise AgentUnavailable(str(exc)) from exc
        session.provider_ref = value
        session.context_window = provider_config.context_window or 0
    elif config_id == MODE_OPTION:
        profile = _profile(config, session)
        if value not in level_choices(profile.level):
            raise InvalidParamsError(f"Invalid value for config option `mode`: {shown(value)}")
        if value == session.risk_level:
            return
        try:
            # A RiskLevel: level_choices offers nothing else. Only the level changes: the
            # session's extra roots and the rest of its policy stay.
            session.policy = session.policy.at_level(cast(RiskLevel, value))
        except (ValueError, OSError) as exc:
            raise OperationFailed("Failed to apply the session mode") from exc
        session.risk_level = value
    else:
        raise InvalidParamsError(f"Unknown config option: {shown(config_id)}")


def session_choices(session: Session) -> dict[str, str]:
    """What the store keeps for ``session``."""
    return {MODEL_OPTION: session.provider_ref, MODE_OPTION: session.risk_level}


def apply_stored_choices(app: AcpApp, session: Session, stored: Mapping[str, str]) -> None:
    """Apply the choices a restored session was stored with; one the configuration no longer
    offers (or whose provider cannot be built) is dropped with a warning."""
    for config_id, value in stored.items():
        try:
            choose(app, session, config_id, value)
        except (InvalidParamsError, AgentUnavailable, OperationFailed) as exc:
            logger.warning(
                "session %s: stored %s choice %r no longer applies (%s); using the default",
                session.session_id,
                config_id,
                value,
                exc,
            )


async def stored_choices(store: AsyncSessionStore, session_id: str) -> dict[str, str]:
    """The choices ``session_id`` was stored with (best effort: none when unreadable)."""
    try:
        return await store.config_choices(session_id)
    except Exception as exc:
        logger.warning("could not read the config choices of %s: %s", session_id, exc)
        return {}


def restored_result(config: Config, session: Session) -> schema.RestoredSessionResult:
    """What ``session/load`` and ``session/resume`` answer: the session's options."""
    return schema.RestoredSessionResult(
        modes=session_modes(config, session), config_options=config_options(config, session)
    )


def admit_choice(
    state: ConnectionState, params: schema.SetConfigOptionParams, request_key: str
) -> Job:
    """ACP ``session/set_config_option``, applied in arrival order (a prompt sent right
    behind it runs with the new choice); the job stores the choices, sends
    ``config_option_update`` (and ``current_mode_update`` for the mode) and answers with
    the full set."""
    session = state.table.live(params.session_id)
    choose(state.app, session, params.config_id, params.value)
    announce = store_and_announce(state, session, mode_changed=params.config_id == MODE_OPTION)

    async def answer() -> Payload:
        options = await announce()
        return schema.SetConfigOptionResult(config_options=options)

    return answer


def store_and_announce(
    state: ConnectionState, session: Session, *, mode_changed: bool
) -> Callable[[], Awaitable[list[schema.ConfigOption]]]:
    """The job behind a choice, with the session's options and choices as they are now:
    store the choices (best effort: the choice applies to the live session anyway), send
    ``config_option_update`` and, when the mode was set, ``current_mode_update`` (ACP:
    session modes and config options stay in step). Returns the options sent."""
    options = config_options(state.config, session)
    choices = session_choices(session)
    current_mode = session.risk_level

    async def announce() -> list[schema.ConfigOption]:
        store = state.app.store
        if store is not None:
            try:
                await store.set_config_choices(session.session_id, choices)
            except Exception as exc:  # the choice still applies to the live session
                logger.warning(
                    "could not store the config choices of %s: %s", session.session_id, exc
                )
        outbound = state.outbound
        await outbound.send_update(
            session.session_id, schema.ConfigOptionUpdate(config_options=options)
        )
        if mode_changed:
            update = schema.CurrentModeUpdate(current_mode_id=current_mode)
            await outbound.send_update(session.session_id, update)
        return options

    return announce
