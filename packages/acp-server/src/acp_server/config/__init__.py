"""Configuration: the typed view of ``<config_dir>/config.toml``.

A faithful subset of ZeroClaw's v3 schema (the ZeroClaw configuration docs):
``[acp]``, ``[gateway]``, ``[providers.models.<type>.<alias>]``, ``[agents.<alias>]``,
``[risk_profiles.<alias>]``, ``[runtime_profiles.<alias>]``, ``[skills]``, the legacy
``[autonomy]`` table (mapped onto the default risk profile) and ``workspace_dir`` (the
daemon-level data directory, default ``<config_dir>/data``).

Everything here is an immutable value; ``load_config`` reads and validates the file, and
a bad file is a ``ConfigError`` naming the file, the key and the problem.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from acp_core import gateway_contract
from acp_server.config.parse import ConfigParser
from acp_server.config.skills import skill_sources
from acp_server.config.storage import StorageConfig, default_storage
from acp_server.config.values import (
    CONFIG_DIR_ENV,
    CONFIG_FILE_NAME,
    CURRENT_SCHEMA_VERSION,
    DEFAULT_AGENT_ALIAS,
    DEFAULT_ALLOWED_COMMANDS,
    DEFAULT_AUTO_APPROVE,
    DEFAULT_FORBIDDEN_PATHS,
    DEFAULT_GATEWAY_HOST,
    DEFAULT_GATEWAY_PORT,
    DEFAULT_MAX_CONFIG_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TOOL_ITERATIONS,
    DEFAULT_PROFILE_ALIAS,
    DEFAULT_PROVIDER_TIMEOUT_SECS,
    DEFAULT_SESSION_TIMEOUT_SECS,
    DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES,
    DEFAULT_SHELL_CPU_LIMIT_SECS,
    DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES,
    DEFAULT_SHELL_TIMEOUT_SECS,
    ECHO_MODEL,
    ECHO_PROVIDER_TYPE,
    ENV_PROVIDER_CHOICES,
    PROVIDER_KEY_ENV,
    AcpConfig,
    AgentConfig,
    AnyMcpServerConfig,
    Config,
    ConfigError,
    GatewayConfig,
    GatewayTlsConfig,
    McpHttpServerConfig,
    McpServerConfig,
    PrivatePath,
    ProviderConfig,
    RiskLevel,
    RiskProfileConfig,
    RuntimeProfileConfig,
    SkillsConfig,
    SkillsMode,
)

logger = logging.getLogger(__name__)

__all__ = [
    "CONFIG_DIR_ENV",
    "CONFIG_FILE_NAME",
    "CURRENT_SCHEMA_VERSION",
    "DEFAULT_AGENT_ALIAS",
    "DEFAULT_ALLOWED_COMMANDS",
    "DEFAULT_AUTO_APPROVE",
    "DEFAULT_FORBIDDEN_PATHS",
    "DEFAULT_GATEWAY_HOST",
    "DEFAULT_GATEWAY_PORT",
    "DEFAULT_MAX_CONFIG_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MAX_TOOL_ITERATIONS",
    "DEFAULT_PROFILE_ALIAS",
    "DEFAULT_PROVIDER_TIMEOUT_SECS",
    "DEFAULT_SESSION_TIMEOUT_SECS",
    "DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES",
    "DEFAULT_SHELL_CPU_LIMIT_SECS",
    "DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES",
    "DEFAULT_SHELL_TIMEOUT_SECS",
    "ECHO_MODEL",
    "ECHO_PROVIDER_TYPE",
    "ENV_PROVIDER_CHOICES",
    "PROVIDER_KEY_ENV",
    "AcpConfig",
    "AgentConfig",
    "AnyMcpServerConfig",
    "Config",
    "ConfigError",
    "GatewayConfig",
    "GatewayTlsConfig",
    "McpHttpServerConfig",
    "McpServerConfig",
    "PrivatePath",
    "ProviderConfig",
    "RiskLevel",
    "RiskProfileConfig",
    "RuntimeProfileConfig",
    "SkillsConfig",
    "SkillsMode",
    "StorageConfig",
    "default_config",
    "load_config",
    "private_paths_of",
    "resolve_config_dir",
    "starter_config_document",
    "with_acp_overrides",
    "with_private_paths",
    "write_starter_config",
]


def resolve_config_dir(flag: str | Path | None) -> Path:
    """The config directory: ``--config-dir`` → ``$ZEROCLAW_CONFIG_DIR`` → ``~/.zeroclaw``
    when it exists → the platform's user config dir for ``zeroclaw``."""
    return gateway_contract.resolve_config_dir(
        flag,
        environ=os.environ,
        home=Path.home(),
        cwd=Path.cwd(),
        is_dir=Path.is_dir,
        platform_config_dir=_platform_config_dir,
    )


def _platform_config_dir() -> Path:
    import platformdirs  # only when neither the flag, the variable nor ~/.zeroclaw says

    return Path(platformdirs.user_config_dir(gateway_contract.APP_NAME))


def load_config(
    config_dir: Path, *, environ: Mapping[str, str] | None = None, announce_default: bool = False
) -> Config:
    """Read ``<config_dir>/config.toml``, or build the built-in default when it is absent.

    ``announce_default``: say on stderr which provider the built-in default picked. Only
    commands that will run an agent ask for it (``acp``, ``gateway``); ``sessions`` and the
    other administrative commands stay quiet.

    Raises:
        ConfigError: the file is unreadable, not TOML, or has a bad value.
    """
    env = os.environ if environ is None else environ
    path = config_dir / CONFIG_FILE_NAME
    try:
        with path.open("rb") as handle:
            raw = handle.read(DEFAULT_MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return default_config(config_dir, environ=env, announce=announce_default)
    except IsADirectoryError:
        raise ConfigError(path, None, "is a directory, expected a TOML file") from None
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > DEFAULT_MAX_CONFIG_BYTES:
        raise ConfigError(path, None, f"larger than {DEFAULT_MAX_CONFIG_BYTES} bytes")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(path, None, f"not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, None, f"invalid TOML: {exc}") from None
    return with_private_paths(ConfigParser(path, config_dir, env).parse(document))


def private_paths_of(config: Config, home: Path) -> tuple[PrivatePath, ...]:
    """What no session may reach: the config directory (config.toml with its keys, the
    gateway's admin secret, a bridge's token), the data directory (the session store,
    every session's state), the gateway's TLS key, and the server user's home."""
    found = [
        PrivatePath("the config directory", config.config_dir),
        PrivatePath("the data directory (workspace_dir)", config.workspace_dir),
        PrivatePath("the server user's home directory", home),
    ]
    if config.gateway.tls.key_path is not None:
        found.append(PrivatePath("the gateway's TLS key", config.gateway.tls.key_path))
    return tuple(found)


def with_private_paths(config: Config, home: Path | None = None) -> Config:
    """``config`` with its private paths set on every risk profile (so every session's
    policy, whatever its profile or mode, carries them)."""
    paths = private_paths_of(config, Path.home() if home is None else home)
    profiles = {
        name: replace(profile, private_paths=paths)
        for name, profile in config.risk_profiles.items()
    }
    return replace(config, risk_profiles=profiles)


def default_config(
    config_dir: Path, *, environ: Mapping[str, str] | None = None, announce: bool = False
) -> Config:
    """The configuration used when there is no ``config.toml``: one agent ``default`` whose
    provider is picked from the environment (first key found), else the offline echo provider."""
    env = os.environ if environ is None else environ
    provider = _default_provider(env)
    if announce:
        if provider.type == ECHO_PROVIDER_TYPE:
            logger.info(
                "no %s in %s; using the offline echo provider "
                "(set OPENROUTER_API_KEY, ANTHROPIC_API_KEY or OPENAI_API_KEY, or run `zeroclaw init`)",
                CONFIG_FILE_NAME,
                config_dir,
            )
        else:
            logger.info(
                "no %s in %s; using %s model %s (key from $%s)",
                CONFIG_FILE_NAME,
                config_dir,
                provider.type,
                provider.model,
                PROVIDER_KEY_ENV[provider.type],
            )
    agent_workspace = Config.default_agent_workspace(config_dir / "data", DEFAULT_AGENT_ALIAS)
    agent = AgentConfig(
        alias=DEFAULT_AGENT_ALIAS,
        model_provider=provider.ref,
        risk_profile=DEFAULT_PROFILE_ALIAS,
        runtime_profile=DEFAULT_PROFILE_ALIAS,
        workspace=agent_workspace,
        skills=SkillsConfig(sources=skill_sources(agent_workspace, config_dir / "data", ())),
    )
    return with_private_paths(
        Config(
            config_dir=config_dir,
            config_file=None,
            workspace_dir=config_dir / "data",
            providers={provider.ref: provider},
            agents={agent.alias: agent},
            risk_profiles={DEFAULT_PROFILE_ALIAS: RiskProfileConfig()},
            runtime_profiles={DEFAULT_PROFILE_ALIAS: RuntimeProfileConfig()},
            storage=default_storage(env),
        )
    )


def _default_provider(env: Mapping[str, str]) -> ProviderConfig:
    for var, ptype, model in ENV_PROVIDER_CHOICES:
        key = env.get(var, "").strip()
        if key:
            return ProviderConfig(type=ptype, alias="default", model=model, api_key=key)
    return ProviderConfig(type=ECHO_PROVIDER_TYPE, alias="default", model=ECHO_MODEL)


def starter_config_document(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What ``zeroclaw init`` writes: every section with its defaults spelled out.

    API keys are never written: providers read them from the environment.
    """
    env = os.environ if environ is None else environ
    provider = _default_provider(env)
    risk = RiskProfileConfig()
    runtime = RuntimeProfileConfig()
    providers: dict[str, dict[str, dict[str, Any]]] = {
        ECHO_PROVIDER_TYPE: {"default": {"model": ECHO_MODEL, "chunk_delay_ms": 0}}
    }
    if provider.type != ECHO_PROVIDER_TYPE:
        providers[provider.type] = {"default": {"model": provider.model}}
    return {
        "schema_version": CURRENT_SCHEMA_VERSION,
        "acp": {
            "default_agent": DEFAULT_AGENT_ALIAS,
            "max_sessions": DEFAULT_MAX_SESSIONS,
            "session_timeout_secs": DEFAULT_SESSION_TIMEOUT_SECS,
            "session_persistence": True,
        },
        "providers": {"models": providers},
        "agents": {
            DEFAULT_AGENT_ALIAS: {
                "enabled": True,
                "model_provider": provider.ref,
                "risk_profile": DEFAULT_PROFILE_ALIAS,
                "runtime_profile": DEFAULT_PROFILE_ALIAS,
            },
            "offline": {
                "enabled": True,
                "model_provider": f"{ECHO_PROVIDER_TYPE}.default",
                "risk_profile": DEFAULT_PROFILE_ALIAS,
                "runtime_profile": DEFAULT_PROFILE_ALIAS,
            },
        },
        "risk_profiles": {
            DEFAULT_PROFILE_ALIAS: {
                "level": risk.level,
                "workspace_only": risk.workspace_only,
                "block_high_risk_commands": risk.block_high_risk_commands,
                "require_approval_for_medium_risk": risk.require_approval_for_medium_risk,
                "allowed_commands": list(risk.allowed_commands),
                "forbidden_paths": list(risk.forbidden_paths),
                "auto_approve": list(risk.auto_approve),
                "always_ask": list(risk.always_ask),
            }
        },
        "runtime_profiles": {
            DEFAULT_PROFILE_ALIAS: {
                "shell_timeout_secs": runtime.shell_timeout_secs,
                "max_tool_iterations": runtime.max_tool_iterations,
            }
        },
        "gateway": {
            "host": DEFAULT_GATEWAY_HOST,
            "port": DEFAULT_GATEWAY_PORT,
            "require_pairing": True,
            "allow_public_bind": False,
        },
    }


def write_starter_config(config_dir: Path, *, force: bool = False) -> Path:
    """Write the starter ``config.toml`` atomically; refuse to overwrite unless ``force``.

    Raises:
        ConfigError: the file exists (and not ``force``) or cannot be written.
    """
    import tomli_w

    path = config_dir / CONFIG_FILE_NAME
    if path.exists() and not force:
        raise ConfigError(path, None, "already exists; pass --force to overwrite it")
    try:
        config_dir.mkdir(parents=True, exist_ok=True)
        tmp = config_dir / f".{CONFIG_FILE_NAME}.tmp-{os.getpid()}"
        with tmp.open("wb") as handle:
            tomli_w.dump(starter_config_document(), handle)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except OSError as exc:
        raise ConfigError(path, None, f"cannot write: {exc.strerror or exc}") from None
    return path


def with_acp_overrides(
    config: Config, *, max_sessions: int | None = None, session_timeout_secs: int | None = None
) -> Config:
    """Apply ``zeroclaw acp --max-sessions/--session-timeout`` on top of the file."""
    acp = config.acp
    if max_sessions is not None:
        acp = replace(acp, max_sessions=max_sessions)
    if session_timeout_secs is not None:
        acp = replace(acp, session_timeout_secs=session_timeout_secs)
    return replace(config, acp=acp)
