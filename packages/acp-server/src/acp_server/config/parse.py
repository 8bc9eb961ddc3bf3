"""``config.toml`` to ``Config``: every problem is a ``ConfigError`` naming its dotted key."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from msgspec.structs import fields

from acp_core.gateway_contract import (
    normalize_host,
    normalize_path_prefix,
    path_prefix_problem,
)
from acp_server.config import checks
from acp_server.config.agent_files import agent_files
from acp_server.config.checks import ERROR_CODE_STYLES
from acp_server.config.choices import agent_model_choices
from acp_server.config.client import parse_client_offers, parse_vision
from acp_server.config.limits import parse_actions, parse_cost, with_runtime_budget
from acp_server.config.mcp import parse_mcp_servers
from acp_server.config.observability import parse_log_format, with_metrics_listen
from acp_server.config.proxies import with_proxy_settings
from acp_server.config.skills import agent_skills, agent_table_keys, parse_skills_table
from acp_server.config.storage import parse_storage
from acp_server.config.values import (
    CURRENT_SCHEMA_VERSION,
    DEFAULT_AUTO_APPROVE,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TOOL_ITERATIONS,
    DEFAULT_PROFILE_ALIAS,
    DEFAULT_PROJECT_INSTRUCTIONS,
    DEFAULT_PROVIDER_TIMEOUT_SECS,
    DEFAULT_SESSION_TIMEOUT_SECS,
    DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES,
    DEFAULT_SHELL_CPU_LIMIT_SECS,
    DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES,
    DEFAULT_SHELL_TIMEOUT_SECS,
    PROVIDER_KEY_ENV,
    SANDBOX_BACKEND_NAMES,
    SANDBOX_NETWORK_MODES,
    AcpConfig,
    AgentConfig,
    Config,
    ConfigError,
    GatewayConfig,
    GatewayTlsConfig,
    ProviderConfig,
    RiskProfileConfig,
    RuntimeProfileConfig,
)
from acp_server.config.web import parse_web

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_TOP_LEVEL_KEYS: Final = frozenset(
    {
        "schema_version",
        "workspace_dir",
        "acp",
        "gateway",
        "providers",
        "agents",
        "risk_profiles",
        "runtime_profiles",
        "autonomy",
        "cost",
        "actions",
        "web",
        "logging",
        "skills",
        "storage",
    }
)
# Legacy [autonomy] budget keys (runtime profiles hold them now): ignored with a warning.
_AUTONOMY_IGNORED: Final = frozenset(
    {"max_actions_per_hour", "max_cost_per_day_cents", "shell_env_passthrough"}
)


class ConfigParser:
    """Turns a TOML document into a ``Config``; every problem names its dotted key."""

    def __init__(self, path: Path, config_dir: Path, env: Mapping[str, str]) -> None:
        self.path = path
        self.config_dir = config_dir
        self.env = env

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.path, key, problem)

    def warn_unknown(self, table: Mapping[str, Any], known: frozenset[str], prefix: str) -> None:
        for key in table:
            if key not in known:
                dotted = f"{prefix}.{key}" if prefix else key
                logger.warning("%s: unknown key `%s` ignored", self.path, dotted)

    # -- typed getters -----------------------------------------------------------------

    def table(self, parent: Mapping[str, Any], key: str, dotted: str) -> dict[str, Any]:
        value = parent.get(key, {})
        if not isinstance(value, dict):
            raise self.error(dotted, f"expected a table, got {checks.type_name(value)}")
        return value

    def get(
        self,
        table: Mapping[str, Any],
        key: str,
        dotted: str,
        kind: type[_T],
        default: _T,
        check: Callable[[_T], str | None] | None = None,
    ) -> _T:
        if key not in table:
            return default
        value = table[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            raise self.error(
                dotted, f"expected {checks.kind_name(kind)}, got {checks.type_name(value)}"
            )
        if check is not None:
            problem = check(value)
            if problem:
                raise self.error(dotted, problem)
        return value  # type: ignore[no-any-return]

    def strings(
        self, table: Mapping[str, Any], key: str, dotted: str, default: tuple[str, ...]
    ) -> tuple[str, ...]:
        if key not in table:
            return default
        value = table[key]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(dotted, f"expected an array of strings, got {checks.type_name(value)}")
        return tuple(value)

    # -- sections ----------------------------------------------------------------------

    def parse(self, doc: dict[str, Any]) -> Config:
        self.warn_unknown(doc, _TOP_LEVEL_KEYS, "")
        self.get(doc, "schema_version", "schema_version", int, CURRENT_SCHEMA_VERSION)
        workspace_raw = self.get(doc, "workspace_dir", "workspace_dir", str, "")
        workspace_dir = (
            self.resolve_path(workspace_raw) if workspace_raw.strip() else self.config_dir / "data"
        )
        acp_table = self.table(doc, "acp", "acp")
        acp = parse_client_offers(self, acp_table, self.parse_acp(acp_table))
        gateway = self.parse_gateway(self.table(doc, "gateway", "gateway"))
        providers = self.parse_providers(self.table(doc, "providers", "providers"))
        risk_profiles = self.parse_risk_profiles(doc)
        runtime_profiles = self.parse_runtime_profiles(
            self.table(doc, "runtime_profiles", "runtime_profiles")
        )
        agents = self.parse_agents(
            self.table(doc, "agents", "agents"), providers, risk_profiles, runtime_profiles
        )
        skills = parse_skills_table(self, doc)
        for alias, agent in agents.items():
            body = doc["agents"][alias]
            agent = agent_files(self, agent, acp, workspace_dir, body)
            agent = agent_skills(self, agent, skills, workspace_dir, body)
            agents[alias] = agent_model_choices(self, agent, providers, body)
        if acp.default_agent is not None and acp.default_agent not in agents:
            raise self.error(
                "acp.default_agent",
                f"names agent `{acp.default_agent}`, but there is no [agents.{acp.default_agent}]",
            )
        return Config(
            config_dir=self.config_dir,
            config_file=self.path,
            workspace_dir=workspace_dir,
            acp=acp,
            gateway=gateway,
            providers=providers,
            agents=agents,
            risk_profiles=risk_profiles,
            runtime_profiles=runtime_profiles,
            cost=parse_cost(self, doc),
            actions=parse_actions(self, doc),
            web=parse_web(self, doc),
            storage=parse_storage(self, self.table(doc, "storage", "storage")),
            log_format=parse_log_format(self, doc),
        )

    def resolve_path(self, raw: str) -> Path:
        path = Path(raw).expanduser()
        return path if path.is_absolute() else (self.config_dir / path)

    def parse_acp(self, t: dict[str, Any]) -> AcpConfig:
        self.warn_unknown(t, _field_names(AcpConfig), "acp")
        default_agent = self.get(t, "default_agent", "acp.default_agent", str, "").strip()
        error_codes: str = self.get(
            t, "error_codes", "acp.error_codes", str, "zeroclaw", checks.one_of(ERROR_CODE_STYLES)
        )
        return AcpConfig(
            default_agent=default_agent or None,
            max_sessions=self.get(
                t, "max_sessions", "acp.max_sessions", int, DEFAULT_MAX_SESSIONS, checks.positive
            ),
            session_timeout_secs=self.get(
                t,
                "session_timeout_secs",
                "acp.session_timeout_secs",
                int,
                DEFAULT_SESSION_TIMEOUT_SECS,
                checks.positive,
            ),
            permission_timeout_secs=self.optional_positive(t, "permission_timeout_secs", "acp"),
            idle_session_timeout_secs=self.optional_positive(t, "idle_session_timeout_secs", "acp"),
            session_persistence=self.get(
                t, "session_persistence", "acp.session_persistence", bool, True
            ),
            project_instructions=self.file_names(t, "project_instructions", "acp"),
            error_codes=error_codes,  # type: ignore[arg-type]  # checked by checks.one_of
        )

    def file_names(self, t: Mapping[str, Any], key: str, prefix: str) -> tuple[str, ...]:
        names = self.strings(t, key, f"{prefix}.{key}", DEFAULT_PROJECT_INSTRUCTIONS)
        for bad in (n for n in names if not n.strip() or "/" in n or n in (".", "..")):
            raise self.error(f"{prefix}.{key}", f"{bad!r} is not a plain file name")
        return names

    def optional_positive(self, t: dict[str, Any], key: str, table: str) -> int | None:
        """A positive integer setting whose absence means "use the related default"."""
        if key not in t:
            return None
        value: int = self.get(t, key, f"{table}.{key}", int, 1, checks.positive)
        return value

    def parse_gateway(self, t: dict[str, Any]) -> GatewayConfig:
        self.warn_unknown(t, _field_names(GatewayConfig), "gateway")
        d = GatewayConfig()
        tls_table = self.table(t, "tls", "gateway.tls")
        self.warn_unknown(tls_table, _field_names(GatewayTlsConfig), "gateway.tls")
        cert = self.get(tls_table, "cert_path", "gateway.tls.cert_path", str, "")
        key = self.get(tls_table, "key_path", "gateway.tls.key_path", str, "")
        tls = GatewayTlsConfig(
            enabled=self.get(tls_table, "enabled", "gateway.tls.enabled", bool, False),
            cert_path=self.resolve_path(cert) if cert else None,
            key_path=self.resolve_path(key) if key else None,
        )
        if tls.enabled and (tls.cert_path is None or tls.key_path is None):
            raise self.error("gateway.tls", "enabled = true needs both cert_path and key_path")
        prefix = self.get(t, "path_prefix", "gateway.path_prefix", str, "", path_prefix_problem)
        gateway = GatewayConfig(
            host=normalize_host(self.get(t, "host", "gateway.host", str, d.host)),
            port=self.get(t, "port", "gateway.port", int, d.port, checks.listen_port),
            path_prefix=normalize_path_prefix(prefix),
            require_pairing=self.get(
                t, "require_pairing", "gateway.require_pairing", bool, d.require_pairing
            ),
            allow_public_bind=self.get(
                t, "allow_public_bind", "gateway.allow_public_bind", bool, d.allow_public_bind
            ),
            paired_tokens=self.strings(t, "paired_tokens", "gateway.paired_tokens", ()),
            pair_rate_limit_per_minute=self.get(
                t,
                "pair_rate_limit_per_minute",
                "gateway.pair_rate_limit_per_minute",
                int,
                d.pair_rate_limit_per_minute,
                checks.positive,
            ),
            websocket_ping_interval_secs=self.get(
                t,
                "websocket_ping_interval_secs",
                "gateway.websocket_ping_interval_secs",
                int,
                d.websocket_ping_interval_secs,
                checks.non_negative,
            ),
            allowed_origins=self.strings(t, "allowed_origins", "gateway.allowed_origins", ()),
            tls=tls,
        )
        return with_metrics_listen(self, t, with_proxy_settings(self, t, gateway))

    def parse_providers(self, t: dict[str, Any]) -> dict[str, ProviderConfig]:
        self.warn_unknown(t, frozenset({"models"}), "providers")
        models = self.table(t, "models", "providers.models")
        result: dict[str, ProviderConfig] = {}
        known = _field_names(ProviderConfig) - {"type", "alias"}
        for ptype, aliases in models.items():
            if not isinstance(aliases, dict):
                raise self.error(f"providers.models.{ptype}", "expected a table of aliases")
            for alias, body in aliases.items():
                prefix = f"providers.models.{ptype}.{alias}"
                if not isinstance(body, dict):
                    raise self.error(prefix, f"expected a table, got {checks.type_name(body)}")
                self.warn_unknown(body, known, prefix)
                api_key = self.get(body, "api_key", f"{prefix}.api_key", str, "").strip()
                if not api_key:
                    api_key = self.env_api_key(ptype, alias)
                provider = ProviderConfig(
                    type=ptype,
                    alias=alias,
                    model=self.get(body, "model", f"{prefix}.model", str, "").strip() or None,
                    api_key=api_key or None,
                    uri=self.get(body, "uri", f"{prefix}.uri", str, "").strip() or None,
                    temperature=self.optional_float(body, "temperature", prefix),
                    max_tokens=self.optional_int(body, "max_tokens", prefix),
                    timeout_secs=self.get(
                        body,
                        "timeout_secs",
                        f"{prefix}.timeout_secs",
                        float,
                        float(DEFAULT_PROVIDER_TIMEOUT_SECS),
                        checks.positive,
                    ),
                    chunk_delay_ms=self.get(
                        body,
                        "chunk_delay_ms",
                        f"{prefix}.chunk_delay_ms",
                        int,
                        0,
                        checks.non_negative,
                    ),
                    context_window=self.optional_int(body, "context_window", prefix),
                )
                result[provider.ref] = parse_vision(self, body, prefix, provider)
        return result

    def env_api_key(self, ptype: str, alias: str) -> str:
        # ZeroClaw's env override form, then the provider's well-known variable.
        specific = self.env.get(f"ZEROCLAW_providers__models__{ptype}__{alias}__api_key", "")
        if specific.strip():
            return specific.strip()
        well_known = PROVIDER_KEY_ENV.get(ptype)
        return self.env.get(well_known, "").strip() if well_known else ""

    def optional_float(self, body: Mapping[str, Any], key: str, prefix: str) -> float | None:
        if key not in body:
            return None
        return self.get(body, key, f"{prefix}.{key}", float, 0.0, checks.non_negative)

    def optional_int(self, body: Mapping[str, Any], key: str, prefix: str) -> int | None:
        if key not in body:
            return None
        return self.get(body, key, f"{prefix}.{key}", int, 0, checks.positive)

    def parse_risk_profile(
        self, t: Mapping[str, Any], prefix: str, base: RiskProfileConfig
    ) -> RiskProfileConfig:
        level = self.get(t, "level", f"{prefix}.level", str, base.level, checks.risk_level)
        backend: str = self.get(
            t,
            "sandbox_backend",
            f"{prefix}.sandbox_backend",
            str,
            base.sandbox_backend,
            checks.one_of(SANDBOX_BACKEND_NAMES),
        )
        network: str = self.get(
            t,
            "sandbox_network",
            f"{prefix}.sandbox_network",
            str,
            base.sandbox_network,
            checks.one_of(SANDBOX_NETWORK_MODES),
        )
        return RiskProfileConfig(
            level=level,  # type: ignore[arg-type]  # checked by checks.risk_level
            workspace_only=self.get(
                t, "workspace_only", f"{prefix}.workspace_only", bool, base.workspace_only
            ),
            forbidden_paths=self.strings(
                t, "forbidden_paths", f"{prefix}.forbidden_paths", base.forbidden_paths
            ),
            allowed_commands=self.strings(
                t, "allowed_commands", f"{prefix}.allowed_commands", base.allowed_commands
            ),
            always_ask=self.strings(t, "always_ask", f"{prefix}.always_ask", base.always_ask),
            # ZeroClaw's implementation always merges its built-in auto-approve list into the profile's.
            auto_approve=_merged(
                DEFAULT_AUTO_APPROVE,
                self.strings(t, "auto_approve", f"{prefix}.auto_approve", ()),
            ),
            block_high_risk_commands=self.get(
                t,
                "block_high_risk_commands",
                f"{prefix}.block_high_risk_commands",
                bool,
                base.block_high_risk_commands,
            ),
            require_approval_for_medium_risk=self.get(
                t,
                "require_approval_for_medium_risk",
                f"{prefix}.require_approval_for_medium_risk",
                bool,
                base.require_approval_for_medium_risk,
            ),
            sandbox_enabled=(
                self.get(t, "sandbox_enabled", f"{prefix}.sandbox_enabled", bool, False)
                if "sandbox_enabled" in t
                else base.sandbox_enabled
            ),
            sandbox_backend=backend,  # type: ignore[arg-type]  # checked by checks.one_of
            firejail_args=self.strings(
                t, "firejail_args", f"{prefix}.firejail_args", base.firejail_args
            ),
            sandbox_network=network,  # type: ignore[arg-type]  # checked by checks.one_of
        )

    def parse_risk_profiles(self, doc: Mapping[str, Any]) -> dict[str, RiskProfileConfig]:
        known = _field_names(RiskProfileConfig) - {"private_paths"}  # derived, not read
        profiles: dict[str, RiskProfileConfig] = {}
        default_base = RiskProfileConfig()
        legacy = self.table(doc, "autonomy", "autonomy")
        if legacy:
            # Legacy V1 table: ZeroClaw's implementation migrates it into [risk_profiles.default].
            self.warn_unknown(legacy, known | _AUTONOMY_IGNORED, "autonomy")
            for key in sorted(_AUTONOMY_IGNORED & legacy.keys()):
                logger.warning("%s: `autonomy.%s` is not supported and is ignored", self.path, key)
            default_base = self.parse_risk_profile(legacy, "autonomy", default_base)
            profiles[DEFAULT_PROFILE_ALIAS] = default_base
        table = self.table(doc, "risk_profiles", "risk_profiles")
        for alias, body in table.items():
            prefix = f"risk_profiles.{alias}"
            if not isinstance(body, dict):
                raise self.error(prefix, f"expected a table, got {checks.type_name(body)}")
            self.warn_unknown(body, known, prefix)
            base = default_base if alias == DEFAULT_PROFILE_ALIAS else RiskProfileConfig()
            profiles[alias] = self.parse_risk_profile(body, prefix, base)
        profiles.setdefault(DEFAULT_PROFILE_ALIAS, RiskProfileConfig())
        return profiles

    def parse_runtime_profiles(self, t: dict[str, Any]) -> dict[str, RuntimeProfileConfig]:
        profiles: dict[str, RuntimeProfileConfig] = {}
        known = _field_names(RuntimeProfileConfig)
        for alias, body in t.items():
            prefix = f"runtime_profiles.{alias}"
            if not isinstance(body, dict):
                raise self.error(prefix, f"expected a table, got {checks.type_name(body)}")
            self.warn_unknown(body, known, prefix)
            profiles[alias] = RuntimeProfileConfig(
                shell_timeout_secs=self.get(
                    body,
                    "shell_timeout_secs",
                    f"{prefix}.shell_timeout_secs",
                    int,
                    DEFAULT_SHELL_TIMEOUT_SECS,
                    checks.positive,
                ),
                max_tool_iterations=self.get(
                    body,
                    "max_tool_iterations",
                    f"{prefix}.max_tool_iterations",
                    int,
                    DEFAULT_MAX_TOOL_ITERATIONS,
                    checks.positive,
                ),
                shell_cpu_limit_secs=self.get(
                    body,
                    "shell_cpu_limit_secs",
                    f"{prefix}.shell_cpu_limit_secs",
                    int,
                    DEFAULT_SHELL_CPU_LIMIT_SECS,
                    checks.positive,
                ),
                shell_file_size_limit_bytes=self.get(
                    body,
                    "shell_file_size_limit_bytes",
                    f"{prefix}.shell_file_size_limit_bytes",
                    int,
                    DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES,
                    checks.positive,
                ),
                shell_address_space_limit_bytes=self.get(
                    body,
                    "shell_address_space_limit_bytes",
                    f"{prefix}.shell_address_space_limit_bytes",
                    int,
                    DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES,
                    checks.positive,
                ),
            )
            profiles[alias] = with_runtime_budget(self, body, prefix, profiles[alias])
        profiles.setdefault(DEFAULT_PROFILE_ALIAS, RuntimeProfileConfig())
        return profiles

    def parse_agents(
        self,
        t: dict[str, Any],
        providers: Mapping[str, ProviderConfig],
        risk_profiles: Mapping[str, RiskProfileConfig],
        runtime_profiles: Mapping[str, RuntimeProfileConfig],
    ) -> dict[str, AgentConfig]:
        agents: dict[str, AgentConfig] = {}
        known = agent_table_keys(_field_names(AgentConfig))
        for alias, body in t.items():
            prefix = f"agents.{alias}"
            if not isinstance(body, dict):
                raise self.error(prefix, f"expected a table, got {checks.type_name(body)}")
            if not alias.strip():
                raise self.error(prefix, "agent aliases must not be blank")
            self.warn_unknown(body, known, prefix)
            system_prompt = self.get(body, "system_prompt", f"{prefix}.system_prompt", str, "")
            agent = AgentConfig(
                alias=alias,
                enabled=self.get(body, "enabled", f"{prefix}.enabled", bool, True),
                model_provider=self.get(
                    body, "model_provider", f"{prefix}.model_provider", str, ""
                ).strip(),
                risk_profile=self.get(
                    body, "risk_profile", f"{prefix}.risk_profile", str, DEFAULT_PROFILE_ALIAS
                ).strip(),
                runtime_profile=self.get(
                    body,
                    "runtime_profile",
                    f"{prefix}.runtime_profile",
                    str,
                    DEFAULT_PROFILE_ALIAS,
                ).strip(),
                system_prompt=system_prompt or None,
                acp_enable_mcp=self.get(
                    body, "acp_enable_mcp", f"{prefix}.acp_enable_mcp", bool, False
                ),
                mcp_servers=parse_mcp_servers(self, body, prefix),
                mcp_allow_private_hosts=self.get(
                    body,
                    "mcp_allow_private_hosts",
                    f"{prefix}.mcp_allow_private_hosts",
                    bool,
                    False,
                ),
            )
            # A blank reference makes the agent non-dispatchable (answered at session/new);
            # a reference to something that does not exist is a mistake in the file.
            refs = (
                ("model_provider", agent.model_provider, providers),
                ("risk_profile", agent.risk_profile, risk_profiles),
                ("runtime_profile", agent.runtime_profile, runtime_profiles),
            )
            for key, ref, table in refs:
                if ref and ref not in table:
                    available = ", ".join(sorted(table)) or "none configured"
                    raise self.error(
                        f"{prefix}.{key}", f"`{ref}` does not exist (available: {available})"
                    )
            agents[alias] = agent
        return agents


def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _merged(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))
