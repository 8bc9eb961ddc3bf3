"""The configuration's values: one frozen ``msgspec.Struct`` per table of ``config.toml``, the
defaults, and ``ConfigError``. Reading and validating a file is ``acp_server.config.parse``."""

from __future__ import annotations

from collections.abc import Mapping
from ipaddress import IPv4Network, IPv6Network
from pathlib import Path
from typing import Final, Literal

import msgspec

# Shared with the bridge (acp_core.gateway_contract), re-exported under their old names.
from acp_core.gateway_contract import CONFIG_DIR_ENV as CONFIG_DIR_ENV
from acp_core.gateway_contract import CONFIG_FILE_NAME as CONFIG_FILE_NAME
from acp_core.gateway_contract import DEFAULT_GATEWAY_HOST as DEFAULT_GATEWAY_HOST
from acp_core.gateway_contract import DEFAULT_GATEWAY_PORT as DEFAULT_GATEWAY_PORT
from acp_server.config.storage import StorageConfig
from acp_server.errors import ZeroclawError
from acp_server.observability.logs import LogFormat

RiskLevel = Literal["readonly", "supervised", "full"]
SandboxBackendName = Literal["auto", "landlock", "bubblewrap", "firejail", "none"]
SandboxNetwork = Literal["allow", "deny"]
SANDBOX_BACKEND_NAMES: Final = ("auto", "landlock", "bubblewrap", "firejail", "none")
SANDBOX_NETWORK_MODES: Final = ("allow", "deny")

DEFAULT_MAX_SESSIONS: Final = 10
DEFAULT_SESSION_TIMEOUT_SECS: Final = 3600
DEFAULT_SHELL_TIMEOUT_SECS: Final = 60
DEFAULT_MAX_TOOL_ITERATIONS: Final = 20
DEFAULT_PROVIDER_TIMEOUT_SECS: Final = 120
DEFAULT_SHELL_CPU_LIMIT_SECS: Final = 600
DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES: Final = 1 << 30  # 1 GiB: the largest file a command may write
DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES: Final = 16 << 30  # 16 GiB of virtual memory

# ZeroClaw's defaults (RiskProfileConfig's Default impl).
DEFAULT_ALLOWED_COMMANDS: Final = (
    "git", "npm", "cargo", "ls", "cat", "grep", "find", "echo", "pwd", "wc", "head", "tail",
    "date", "df", "du", "uname", "uptime", "hostname", "python", "python3", "pip", "node", "free",
)  # fmt: skip
DEFAULT_FORBIDDEN_PATHS: Final = (
    "/etc", "/root", "/home", "/usr", "/bin", "/sbin", "/lib", "/opt", "/boot", "/dev",
    "/proc", "/sys", "/var", "/tmp", "~/.ssh", "~/.gnupg", "~/.aws", "~/.config",
)  # fmt: skip
DEFAULT_PROJECT_INSTRUCTIONS: Final = ("AGENTS.md",)
"""File names read from the session cwd and its parents into the system prompt."""
DEFAULT_MAX_FULL_SKILLS_CHARS: Final = 64_000
"""The most characters the skills block may take in ``full`` mode before it falls back to
``compact`` (names, descriptions and locations, plus the ``read_skill`` tool)."""
SkillsMode = Literal["full", "compact"]
DEFAULT_AUTO_APPROVE: Final = (
    "file_read", "glob_search", "content_search", "todo_write", "calculator", "web_fetch",
)  # fmt: skip


class AcpConfig(msgspec.Struct, frozen=True):
    default_agent: str | None = None
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_timeout_secs: int = DEFAULT_SESSION_TIMEOUT_SECS
    """The ZeroClaw ACP documentation's one timeout: the default of the two below."""
    permission_timeout_secs: int | None = None
    """How long a permission request waits for the client (unanswered = denied)."""
    idle_session_timeout_secs: int | None = None
    """How long a session with no turn stays in memory over stdio before it is dropped
    (it can still be loaded from the store)."""
    # false: never open the SQLite store (throwaway CI runs); sessions live in memory only.
    session_persistence: bool = True
    project_instructions: tuple[str, ...] = DEFAULT_PROJECT_INSTRUCTIONS
    """File names looked up in the session cwd and its parents (``[]``: none)."""
    error_codes: Literal["zeroclaw", "acp"] = "zeroclaw"
    """"zeroclaw": an unknown session is -32000 (the ZeroClaw ACP documentation); "acp": -32002, the ACP
    spec's "resource not found", for clients that read -32000 as "authentication required"."""
    client_fs: Literal["auto", "never"] = "auto"
    """"auto": file tools read and write text files through the client's ``fs/*`` when it
    offers them (config/client.py); "never": always on this machine's disk."""
    client_terminal: bool = False
    """Run the shell tool in the client's terminal (``terminal/*``) when it offers one; off
    by default, since the command then runs outside this server's sandbox."""

    @property
    def permission_timeout(self) -> int:
        if self.permission_timeout_secs is not None:
            return self.permission_timeout_secs
        return self.session_timeout_secs

    @property
    def idle_session_timeout(self) -> int:
        if self.idle_session_timeout_secs is not None:
            return self.idle_session_timeout_secs
        return self.session_timeout_secs


class GatewayTlsConfig(msgspec.Struct, frozen=True):
    enabled: bool = False
    cert_path: Path | None = None
    key_path: Path | None = None


class GatewayConfig(msgspec.Struct, frozen=True):
    """The ``[gateway]`` table. ``host`` and ``path_prefix`` are stored as the rules in
    ``acp_core.gateway_contract`` normalize them (the bridge reads them the same way)."""

    host: str = DEFAULT_GATEWAY_HOST
    port: int = DEFAULT_GATEWAY_PORT
    path_prefix: str = ""
    require_pairing: bool = True
    allow_public_bind: bool = False
    paired_tokens: tuple[str, ...] = ()  # SHA-256 hex digests of tokens, never tokens
    pair_rate_limit_per_minute: int = 10
    websocket_ping_interval_secs: int = 30
    allowed_origins: tuple[str, ...] = ()
    tls: GatewayTlsConfig = msgspec.field(default_factory=GatewayTlsConfig)
    # Load balancers whose word on the client address is taken (config/proxies.py).
    trusted_proxies: tuple[IPv4Network | IPv6Network, ...] = ()
    proxy_protocol: bool = False
    # A listener of its own for GET /metrics (config/observability.py); None: only the
    # main port serves it, to the admin secret.
    metrics_listen: tuple[str, int] | None = None


class ProviderConfig(msgspec.Struct, frozen=True):
    """``[providers.models.<type>.<alias>]``; ``ref`` is ``"<type>.<alias>"``."""

    type: str
    alias: str
    model: str | None = None
    api_key: str | None = None
    uri: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_secs: float = DEFAULT_PROVIDER_TIMEOUT_SECS
    chunk_delay_ms: int = 0  # echo provider only: slows streaming so clients can cancel
    vision: bool = False
    """The model takes images: prompt images are sent to it (agent/providers/images.py)."""
    context_window: int | None = None
    """The model's context window in tokens (the ``size`` of ACP ``usage_update``)."""

    @property
    def ref(self) -> str:
        return f"{self.type}.{self.alias}"


class McpServerConfig(msgspec.Struct, frozen=True):
    """A stdio MCP server (base ACP ``McpServer`` shape)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    call_timeout_secs: float | None = None
    """How long one tool call may run (None: the MCP runtime's default)."""


McpHttpTransport = Literal["http", "sse"]
DEFAULT_MCP_CONNECT_TIMEOUT_SECS: Final = 10.0
"""How long opening a connection to an HTTP MCP server may take (TCP and TLS)."""


class McpHttpServerConfig(msgspec.Struct, frozen=True):
    """An MCP server reached over HTTP (ACP ``McpServerHttp`` / ``McpServerSse``):
    ``http`` is MCP's streamable HTTP transport, ``sse`` its older HTTP+SSE one."""

    name: str
    url: str
    transport: McpHttpTransport = "http"
    headers: tuple[tuple[str, str], ...] = ()
    """Sent with every request to the server (an ``Authorization`` token, typically)."""
    public_only: bool = False
    """Connect to public addresses only (the web tools' rule, docs/security.md): set for a
    server a gateway client named, unless the agent sets ``mcp_allow_private_hosts``."""
    connect_timeout_secs: float = DEFAULT_MCP_CONNECT_TIMEOUT_SECS
    call_timeout_secs: float | None = None
    """How long one tool call may run (None: the MCP runtime's default)."""


AnyMcpServerConfig = McpServerConfig | McpHttpServerConfig


class IdentityConfig(msgspec.Struct, frozen=True):
    """``[agents.<alias>.identity]``: ``openclaw`` (the markdown files only) or ``aieos``
    (an AIEOS JSON document first; ``aieos_path``, relative to the agent workspace, wins
    over ``aieos_inline``)."""

    format: Literal["openclaw", "aieos"] = "openclaw"
    aieos_path: Path | None = None
    aieos_inline: str | None = None

    @property
    def aieos_configured(self) -> bool:
        return self.format == "aieos" and (self.aieos_path or self.aieos_inline) is not None


class SkillsConfig(msgspec.Struct, frozen=True):
    """An agent's skills (``[skills]`` and ``[agents.<alias>] skill_bundles`` /
    ``skills_mode``; ``docs/agents.md``). ``sources`` are directories holding one skill per
    subdirectory, earlier ones winning name clashes: ``<agent workspace>/skills``, then
    ``<workspace_dir>/shared/skills/<bundle>`` for each bundle in order."""

    sources: tuple[Path, ...] = ()
    mode: SkillsMode = "full"
    allow_scripts: bool = False
    max_full_chars: int = DEFAULT_MAX_FULL_SKILLS_CHARS


class AgentConfig(msgspec.Struct, frozen=True):
    alias: str
    enabled: bool = True
    model_provider: str = ""
    risk_profile: str = "default"
    runtime_profile: str = "default"
    system_prompt: str | None = None
    acp_enable_mcp: bool = False
    mcp_servers: tuple[AnyMcpServerConfig, ...] = ()
    mcp_allow_private_hosts: bool = False
    """Gateway clients may name HTTP MCP servers on private, loopback or link-local
    addresses (off: only public ones, as for the web tools)."""
    workspace: Path | None = None
    """The agent workspace holding the personality files (``[agents.<alias>.workspace]
    path``, default ``<workspace_dir>/agents/<alias>/workspace``); None: no personality."""
    project_instructions: tuple[str, ...] = DEFAULT_PROJECT_INSTRUCTIONS
    """``[acp] project_instructions``, copied onto each agent by the parser."""
    identity: IdentityConfig = msgspec.field(default_factory=IdentityConfig)
    skills: SkillsConfig = msgspec.field(default_factory=SkillsConfig)
    model_providers: tuple[str, ...] = ()
    """More ``<type>.<alias>`` provider refs a client may switch the session to (the
    session's ``model`` config option; ``model_provider`` is always one of them)."""

    @property
    def dispatchable(self) -> bool:
        """ZeroClaw's rule: enabled and all three profile references non-blank."""
        return self.enabled and all(
            ref.strip() for ref in (self.model_provider, self.risk_profile, self.runtime_profile)
        )


class PrivatePath(msgspec.Struct, frozen=True):
    """One of the server's own paths that no session reaches: ``label`` names it in
    messages (``the config directory``)."""

    label: str
    path: Path


class RiskProfileConfig(msgspec.Struct, frozen=True):
    level: RiskLevel = "supervised"
    workspace_only: bool = True
    forbidden_paths: tuple[str, ...] = DEFAULT_FORBIDDEN_PATHS
    allowed_commands: tuple[str, ...] = DEFAULT_ALLOWED_COMMANDS
    always_ask: tuple[str, ...] = ()
    auto_approve: tuple[str, ...] = DEFAULT_AUTO_APPROVE
    block_high_risk_commands: bool = True
    require_approval_for_medium_risk: bool = True
    sandbox_enabled: bool | None = None
    """OS sandbox for the shell tool: None = best effort, False = off, True = required."""
    sandbox_backend: SandboxBackendName = "auto"
    """``auto`` tries landlock, then bubblewrap; naming a backend makes it required."""
    firejail_args: tuple[str, ...] = ()
    sandbox_network: SandboxNetwork = "allow"
    private_paths: tuple[PrivatePath, ...] = ()
    """The server's config and data directories, TLS key and home directory: never granted
    to a session (security/grants.py). Filled in by ``load_config`` for every profile; not
    a config.toml key."""


class RuntimeProfileConfig(msgspec.Struct, frozen=True):
    shell_timeout_secs: int = DEFAULT_SHELL_TIMEOUT_SECS
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS
    # setrlimit of every shell command, under any sandbox backend (none included).
    shell_cpu_limit_secs: int = DEFAULT_SHELL_CPU_LIMIT_SECS
    shell_file_size_limit_bytes: int = DEFAULT_SHELL_FILE_SIZE_LIMIT_BYTES
    shell_address_space_limit_bytes: int = DEFAULT_SHELL_ADDRESS_SPACE_LIMIT_BYTES
    max_actions_per_hour: int | None = None
    """Counted tool calls a session may make in any sliding hour (agent/limits/actions.py); None:
    no limit (ZeroClaw's quick-start preset is unbounded too)."""
    max_cost_per_day_cents: int | None = None
    """What one agent may spend per UTC day, in US cents (agent/limits/spend.py); None: no cap."""


class ModelPrice(msgspec.Struct, frozen=True):
    """``[cost.rates.providers.models.<type>."<model>"]``: USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0


class CostConfig(msgspec.Struct, frozen=True):
    """``[cost]``: spending caps over every agent sharing the session store (UTC days)."""

    enabled: bool = True
    daily_limit_usd: float = 10.0
    monthly_limit_usd: float = 100.0
    rates: Mapping[tuple[str, str], ModelPrice] = msgspec.field(default_factory=dict)
    """Prices by (provider type, model id)."""
    per_principal_daily_cents: int | None = None
    """``per_principal_daily_cents``: what each gateway principal may spend per UTC day
    (None: no cap of its own); the local operator is never held to it."""
    principal_daily_cents: Mapping[str, int] = msgspec.field(default_factory=dict)
    """``[cost.principals.<name>] max_cost_per_day_cents``: one principal's own cap."""

    def principal_cap_cents(self, principal: str | None) -> int | None:
        """The daily cap of ``principal`` in cents (None: none; the operator has none)."""
        if principal is None:
            return None
        return self.principal_daily_cents.get(principal, self.per_principal_daily_cents)


class ActionsConfig(msgspec.Struct, frozen=True):
    """``[actions]``: each gateway principal's action budget, counted over all of that
    principal's sessions and connections on one process (agent/limits/actions.py)."""

    per_principal_per_hour: int | None = None
    """``per_principal_per_hour``: counted tool calls each gateway principal may start in
    any sliding hour (None: no cap of its own); the local operator is never held to it."""
    principal_per_hour: Mapping[str, int] = msgspec.field(default_factory=dict)
    """``[actions.principals.<name>] max_actions_per_hour``: one principal's own cap."""

    def principal_cap(self, principal: str | None) -> int | None:
        """The hourly cap of ``principal`` (None: none; the operator has none)."""
        if principal is None:
            return None
        return self.principal_per_hour.get(principal, self.per_principal_per_hour)


class WebConfig(msgspec.Struct, frozen=True):
    """``[web]``: the web_fetch and http_request tools (agent/tools/web.py)."""

    allow_private_hosts: bool = False
    """Let the web tools reach loopback, private and link-local addresses."""


class Config(msgspec.Struct, frozen=True):
    config_dir: Path
    config_file: Path | None  # None: no config.toml, built-in defaults in use
    workspace_dir: Path  # daemon-level data directory (store lives under it)
    acp: AcpConfig = msgspec.field(default_factory=AcpConfig)
    gateway: GatewayConfig = msgspec.field(default_factory=GatewayConfig)
    providers: Mapping[str, ProviderConfig] = msgspec.field(default_factory=dict)  # by ref
    agents: Mapping[str, AgentConfig] = msgspec.field(default_factory=dict)  # by alias
    risk_profiles: Mapping[str, RiskProfileConfig] = msgspec.field(default_factory=dict)
    runtime_profiles: Mapping[str, RuntimeProfileConfig] = msgspec.field(default_factory=dict)
    cost: CostConfig = msgspec.field(default_factory=CostConfig)
    actions: ActionsConfig = msgspec.field(default_factory=ActionsConfig)
    web: WebConfig = msgspec.field(default_factory=WebConfig)
    storage: StorageConfig = msgspec.field(default_factory=StorageConfig)
    log_format: LogFormat = "human"
    """``[logging] format`` (observability/logs.py); ``--log-format`` overrides it."""

    @staticmethod
    def default_agent_workspace(workspace_dir: Path, alias: str) -> Path:
        return workspace_dir / "agents" / alias / "workspace"

    @property
    def store_path(self) -> Path:
        return self.workspace_dir / "sessions" / "acp-sessions.db"

    @property
    def default_model(self) -> str | None:
        """The first configured provider's model (initialize's ``_meta.zeroclaw.defaultModel``)."""
        for provider in self.providers.values():
            if provider.model:
                return provider.model
        return None


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


CURRENT_SCHEMA_VERSION: Final = 3
DEFAULT_MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
"""A config file larger than this is refused (it is hand-written TOML, not data)."""

DEFAULT_AGENT_ALIAS: Final = "default"
DEFAULT_PROFILE_ALIAS: Final = "default"

# Environment keys the built-in default consults, in order (README: "With no config.toml").
# (env var, provider type, model)
ENV_PROVIDER_CHOICES: Final = (
    ("OPENROUTER_API_KEY", "openrouter", "anthropic/claude-sonnet-4.6"),
    ("ANTHROPIC_API_KEY", "anthropic", "claude-sonnet-4-6"),
    ("OPENAI_API_KEY", "openai", "gpt-4.1"),
)
ECHO_PROVIDER_TYPE: Final = "echo"
ECHO_MODEL: Final = "echo"

# Well-known key variables per provider type, used when a provider table has no api_key.
PROVIDER_KEY_ENV: Final = {ptype: env for env, ptype, _model in ENV_PROVIDER_CHOICES}


class ConfigError(ZeroclawError):
    """The configuration cannot be used. ``str()`` names the file, the key and the problem."""

    def __init__(self, file: Path | None, key: str | None, problem: str) -> None:
        where = str(file) if file is not None else "configuration"
        text = f"{where}: {problem}" if key is None else f"{where}: `{key}`: {problem}"
        super().__init__(text)
        self.file = file
        self.key = key
        self.problem = problem
