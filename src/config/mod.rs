//! Configuration: defaults < `config/clawvisor.toml` < `CLAWVISOR_*` environment < command-line flags.
//!
//! Loading is one function, [`load`], that returns a validated [`LoadedConfig`] (the daemon's
//! settings plus every agent definition from `actors/*.toml`) or a [`ConfigError`] whose text names
//! the file (or environment variable), the key, and what was expected. Unknown keys are errors in
//! files; unknown `CLAWVISOR_*` variables are reported as warnings (the environment is shared with
//! other programs, and agent files name their own `CLAWVISOR_...` token variables).
//!
//! Paths written in a config file are relative to that file's directory; paths from defaults,
//! the environment or flags are relative to the working directory.
//!
//! Architecture Invariant: only `config` reads configuration files and `CLAWVISOR_*` variables;
//! every actor receives its own slice of the validated config in its `Args`.

mod agent;
mod duration;
mod layers;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use agent::{AgentSpec, Autonomy, FallbackModel, TelegramSpec, load_agents, parse_agent};
pub use duration::Dur;

use crate::actors::supervise::RestartPolicy;

/// The config file shipped in the repository; also the built-in defaults when no file exists.
pub const SHIPPED_CONFIG: &str = include_str!("../../config/clawvisor.toml");
/// The default agent shipped in the repository; used when no agents directory exists.
pub const SHIPPED_AGENT: &str = include_str!("../../actors/assistant.toml");

/// Where the config file used for a run lives: its path, or the built-in defaults.
pub const DEFAULT_CONFIG_PATH: &str = "config/clawvisor.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value is wrong: the origin is a file, an environment variable or a flag.
    #[error("{origin}: {key}: {message}")]
    Key {
        origin: String,
        key: String,
        message: String,
    },
    /// The file itself is unreadable or not TOML.
    #[error("{origin}: {message}")]
    File { origin: String, message: String },
}

impl ConfigError {
    pub(crate) fn key(
        origin: impl Into<String>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError::Key {
            origin: origin.into(),
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (default).
    Text,
    /// One JSON object per line, for journald and log shippers.
    Json,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `RUST_LOG`-style filter (`info`, `clawvisor=debug,info`). `RUST_LOG` wins when set.
    pub level: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StudioConfig {
    /// Address Studio listens on. Anything but loopback requires a token.
    pub bind: String,
    /// Environment variable holding the Studio access token (required off loopback). The token
    /// in `<data_dir>/studio.token` is always accepted too.
    pub token_env: String,
    /// The URL operators use to reach Studio, for links printed at boot (default: from `bind`).
    pub public_url: String,
    /// Environment variable holding a token `/metrics` requires (empty: `/metrics` is open on a
    /// loopback bind without `public_url`, else it needs an access token).
    pub metrics_token_env: String,
}

impl Default for StudioConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:7070".into(),
            token_env: "CLAWVISOR_STUDIO_TOKEN".into(),
            public_url: String::new(),
            metrics_token_env: String::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// Directory with one `<name>.toml` per agent.
    pub dir: PathBuf,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("actors"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SupervisionConfig {
    /// Restarts allowed within `window` before a supervisor escalates (or a bot is degraded).
    pub max_restarts: u32,
    pub window: Dur,
    pub backoff_min: Dur,
    pub backoff_max: Dur,
    pub backoff_factor: f64,
    /// Random spread of each backoff, 0.0 to 0.9 (0.2 = ±20 %).
    pub jitter: f64,
    /// A child that stayed up this long restarts from `backoff_min` again.
    pub reset_after: Dur,
}

impl Default for SupervisionConfig {
    fn default() -> Self {
        let policy = RestartPolicy::default();
        Self {
            max_restarts: policy.max_restarts,
            window: Dur(policy.window),
            backoff_min: Dur(policy.backoff_min),
            backoff_max: Dur(policy.backoff_max),
            backoff_factor: policy.backoff_factor,
            jitter: policy.jitter,
            reset_after: Dur(policy.reset_after),
        }
    }
}

impl SupervisionConfig {
    pub fn policy(&self) -> RestartPolicy {
        RestartPolicy {
            max_restarts: self.max_restarts,
            window: self.window.0,
            backoff_min: self.backoff_min.0,
            backoff_max: self.backoff_max.0,
            backoff_factor: self.backoff_factor,
            jitter: self.jitter,
            reset_after: self.reset_after.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// Upper bound for a graceful stop (runs finish or checkpoint within it).
    pub timeout: Dur,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            timeout: Dur::secs(10),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    Full,
    Normal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// How long a write waits for a lock held by another process before failing.
    pub busy_timeout: Dur,
    /// `full`: every commit survives a power cut. `normal`: faster, may lose the last commits.
    pub synchronous: SyncMode,
    /// Runtime events kept in the database (oldest are dropped).
    pub events_retention: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            busy_timeout: Dur::secs(5),
            synchronous: SyncMode::Full,
            events_retention: 20_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramConfig {
    /// Delay between two bot starts (and restarts), so N bots never hit the Bot API at once.
    pub boot_stagger: Dur,
    /// Long-poll timeout of `getUpdates` (at most 50 s).
    pub poll_timeout: Dur,
    /// Updates older than this at boot are stored but not answered.
    pub stale_grace: Dur,
    /// At boot, wait up to this long for a previous instance polling the same token to stop.
    pub wait_for_previous: Dur,
    /// A bot that exhausted its restart budget is tried again after this long.
    pub degraded_retry: Dur,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            boot_stagger: Dur::secs(1),
            poll_timeout: Dur::secs(30),
            stale_grace: Dur::secs(120),
            wait_for_previous: Dur::secs(0),
            degraded_retry: Dur::secs(600),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// Waits before retrying a failed scheduled run, one per retry; after the last the job is
    /// marked failing (it keeps its schedule).
    pub retry_backoff: Vec<Dur>,
    /// A fire time passed by more than this (the daemon was down, the machine slept) follows
    /// the job's missed-run policy instead of simply running late.
    pub late_grace: Dur,
    /// The scheduler's one timer never sleeps longer than this, so a wall-clock jump is noticed.
    pub max_sleep: Dur,
    /// The shortest gap allowed between two fire times of a job.
    pub min_interval: Dur,
    /// The most active or paused jobs one agent may have.
    pub max_jobs_per_agent: u32,
    /// A scheduled run without an answer after this long is checked against the database.
    pub run_timeout: Dur,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            retry_backoff: vec![Dur::secs(30), Dur::secs(60), Dur::secs(300)],
            late_grace: Dur::secs(120),
            max_sleep: Dur::secs(60),
            min_interval: Dur::secs(60),
            max_jobs_per_agent: 50,
            run_timeout: Dur::secs(1800),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// `web_fetch` may reach loopback, private and link-local addresses (off: protects your LAN).
    pub web_fetch_allow_private: bool,
    pub web_fetch_max_bytes: u64,
    pub web_fetch_timeout: Dur,
    pub shell_timeout: Dur,
    pub shell_max_output: u64,
    pub read_max_bytes: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        let defaults = crate::tools::ToolSettings::default();
        Self {
            web_fetch_allow_private: defaults.web_fetch_allow_private,
            web_fetch_max_bytes: defaults.web_fetch_max_bytes,
            web_fetch_timeout: Dur(defaults.web_fetch_timeout),
            shell_timeout: Dur(defaults.shell_timeout),
            shell_max_output: defaults.shell_max_output as u64,
            read_max_bytes: defaults.read_max_bytes,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// Tool calls allowed per chat per minute (a sliding window).
    pub tool_calls_per_minute: u32,
    /// Read-only tool calls of one model turn that may run at the same time.
    pub max_parallel_tools: u32,
    /// Tool output longer than this many characters is truncated before the model sees it.
    pub tool_output_max_chars: u32,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        let defaults = crate::agent::RuntimeLimits::default();
        Self {
            tool_calls_per_minute: defaults.tool_calls_per_minute as u32,
            max_parallel_tools: defaults.max_parallel_tools as u32,
            tool_output_max_chars: defaults.tool_output_max_chars as u32,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// A conversation with nothing to do leaves memory after this long (it stays in the database).
    pub idle_stop: Dur,
    /// Transcript events kept verbatim before older ones are summarised into a recap.
    pub history_events: u32,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        let defaults = crate::agent::RuntimeLimits::default();
        Self {
            idle_stop: Dur(defaults.session_idle),
            history_events: defaults.history_events,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// The provider (from `[providers]`, with `embeddings_model` set) that embeds memories; empty:
    /// the first provider that has an `embeddings_model`. None at all: full-text memory only.
    pub embeddings_provider: String,
    /// A new memory whose surprise (1 − its highest similarity to the owner's memories) is below
    /// this is a near duplicate and is not saved.
    pub surprise_threshold: f32,
    /// Memories put into the prompt for each message (0: no memory layer).
    pub recall_limit: u32,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            embeddings_provider: String::new(),
            surprise_threshold: 0.25,
            recall_limit: 6,
        }
    }
}

/// `[mcp]`: the MCP servers whose tools agents may use (`[[mcp.servers]]`, one link each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    pub servers: Vec<McpServerConfig>,
    /// How long a link waits for its server to answer `initialize` and list its tools.
    pub connect_timeout: Dur,
    /// How often a live link pings its server (health, latency, a dead HTTP server noticed).
    pub ping_every: Dur,
    /// A server that exhausted its restart budget is tried again after this long.
    pub degraded_retry: Dur,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            connect_timeout: Dur::secs(30),
            ping_every: Dur::secs(30),
            degraded_retry: Dur::secs(300),
        }
    }
}

/// How an MCP server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpTransportKind {
    /// A child process speaking JSON-RPC on stdin/stdout (in its own process group).
    Stdio,
    /// Streamable HTTP at `url`.
    Http,
}

/// How far a server's tools are trusted (the policy gate's MCP rules, `policy::mcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTrustConfig {
    Trusted,
    Untrusted,
    /// Only tools that declare themselves read-only may run.
    ReadOnly,
}

impl McpTrustConfig {
    pub fn policy(self) -> crate::policy::McpTrust {
        match self {
            McpTrustConfig::Trusted => crate::policy::McpTrust::Trusted,
            McpTrustConfig::Untrusted => crate::policy::McpTrust::Untrusted,
            McpTrustConfig::ReadOnly => crate::policy::McpTrust::ReadOnly,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            McpTrustConfig::Trusted => "trusted",
            McpTrustConfig::Untrusted => "untrusted",
            McpTrustConfig::ReadOnly => "read_only",
        }
    }
}

/// One `[[mcp.servers]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// `[a-z0-9_-]`, unique; tools are named `<name>__<tool>`.
    pub name: String,
    pub transport: McpTransportKind,
    /// stdio: the program and its arguments.
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: literal environment variables. The child gets only these, `env_from`, and
    /// PATH, HOME, LANG, USER, TMPDIR — never the daemon's own secrets.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: child variable = daemon environment variable holding a secret.
    #[serde(default)]
    pub env_from: BTreeMap<String, String>,
    /// stdio: working directory (relative to the config file's directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// http: the endpoint (`http://127.0.0.1:8000/mcp`).
    #[serde(default)]
    pub url: String,
    /// http: literal headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// http: header = environment variable holding its (secret) value.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    #[serde(default = "default_mcp_trust")]
    pub trust: McpTrustConfig,
    /// Agents that get this server's tools (`"*"`: every agent; empty: none, unless an agent's
    /// own file lists `mcp:<name>` or `<name>__<tool>`).
    #[serde(default)]
    pub agents: Vec<String>,
    /// Per-call timeout.
    #[serde(default = "default_mcp_timeout")]
    pub timeout: Dur,
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_mcp_trust() -> McpTrustConfig {
    McpTrustConfig::Untrusted
}

fn default_mcp_timeout() -> Dur {
    Dur::secs(60)
}

fn default_true() -> bool {
    true
}

impl McpServerConfig {
    /// Every environment variable this server reads a secret from.
    pub fn secret_vars(&self) -> impl Iterator<Item = &str> {
        self.env_from
            .values()
            .chain(self.headers_env.values())
            .map(String::as_str)
    }
}

/// The wire protocol of an LLM provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, LM Studio, OpenRouter, llama.cpp.
    Openai,
    Anthropic,
    Gemini,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub base_url: String,
    /// Environment variable holding the API key (empty: no key, e.g. a local Ollama).
    #[serde(default)]
    pub api_key_env: String,
    /// Per-call timeout.
    #[serde(default = "default_provider_timeout")]
    pub timeout: Dur,
    /// Retries on 429 / 5xx / connection errors before the fallback chain moves on.
    #[serde(default = "default_provider_retries")]
    pub max_retries: u32,
    /// When set, this provider also serves embeddings with this model.
    #[serde(default)]
    pub embeddings_model: String,
}

fn default_provider_timeout() -> Dur {
    Dur::secs(120)
}

fn default_provider_retries() -> u32 {
    3
}

/// Price of a model in US dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

/// The daemon's settings (agents are loaded beside it into [`LoadedConfig`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the database, workspaces and indexes live.
    pub data_dir: PathBuf,
    pub log: LogConfig,
    pub studio: StudioConfig,
    pub agents: AgentsConfig,
    pub supervision: SupervisionConfig,
    pub shutdown: ShutdownConfig,
    pub store: StoreConfig,
    pub telegram: TelegramConfig,
    pub scheduler: SchedulerConfig,
    pub sessions: SessionsConfig,
    pub policy: PolicyConfig,
    pub tools: ToolsConfig,
    pub memory: MemoryConfig,
    pub mcp: McpConfig,
    pub providers: BTreeMap<String, ProviderConfig>,
    pub pricing: BTreeMap<String, PriceConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("data"),
            log: LogConfig::default(),
            studio: StudioConfig::default(),
            agents: AgentsConfig::default(),
            supervision: SupervisionConfig::default(),
            shutdown: ShutdownConfig::default(),
            store: StoreConfig::default(),
            telegram: TelegramConfig::default(),
            scheduler: SchedulerConfig::default(),
            sessions: SessionsConfig::default(),
            policy: PolicyConfig::default(),
            tools: ToolsConfig::default(),
            memory: MemoryConfig::default(),
            mcp: McpConfig::default(),
            providers: BTreeMap::new(),
            pricing: BTreeMap::new(),
        }
    }
}

impl Config {
    /// The Studio socket address (validated at load time).
    pub fn studio_addr(&self) -> SocketAddr {
        self.studio
            .bind
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 7070)))
    }

    pub fn store_options(&self) -> crate::store::StoreOptions {
        crate::store::StoreOptions {
            busy_timeout: self.store.busy_timeout.0,
            synchronous: match self.store.synchronous {
                SyncMode::Full => crate::store::Synchronous::Full,
                SyncMode::Normal => crate::store::Synchronous::Normal,
            },
            max_readers: 4,
        }
    }

    pub fn db_path(&self) -> PathBuf {
        crate::store::Store::path_in(&self.data_dir)
    }

    /// The loop's limits from `[policy]` and `[sessions]`.
    pub fn runtime_limits(&self) -> crate::agent::RuntimeLimits {
        crate::agent::RuntimeLimits {
            tool_calls_per_minute: self.policy.tool_calls_per_minute.max(1) as usize,
            max_parallel_tools: self.policy.max_parallel_tools.max(1) as usize,
            tool_output_max_chars: self.policy.tool_output_max_chars.max(1_000) as usize,
            session_idle: self.sessions.idle_stop.0,
            history_events: self.sessions.history_events.max(10),
            recall_limit: self.memory.recall_limit as usize,
        }
    }

    /// Tool limits for one agent (`allow_shell` comes from its file).
    pub fn tool_settings(&self, allow_shell: bool) -> crate::tools::ToolSettings {
        crate::tools::ToolSettings {
            web_fetch_allow_private: self.tools.web_fetch_allow_private,
            web_fetch_max_bytes: self.tools.web_fetch_max_bytes,
            web_fetch_timeout: self.tools.web_fetch_timeout.0,
            shell_enabled: allow_shell,
            shell_timeout: self.tools.shell_timeout.0,
            shell_max_output: self.tools.shell_max_output as usize,
            read_max_bytes: self.tools.read_max_bytes,
            protected_paths: vec![self.data_dir.clone()],
        }
    }
}

/// Where the config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    File(PathBuf),
    /// No file was found: the shipped defaults compiled into the binary.
    BuiltIn,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::File(path) => write!(f, "{}", path.display()),
            ConfigSource::BuiltIn => f.write_str("built-in defaults"),
        }
    }
}

/// Command-line overrides (the last layer).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub studio_bind: Option<String>,
    pub actors_dir: Option<PathBuf>,
    pub log_level: Option<String>,
    pub log_format: Option<LogFormat>,
}

/// A validated configuration with its agents.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: Config,
    pub agents: Vec<AgentSpec>,
    pub source: ConfigSource,
    /// Where agents were read from (`None`: the shipped default agent, compiled in).
    pub agents_source: Option<PathBuf>,
    /// Things worth telling the operator that do not stop boot.
    pub warnings: Vec<String>,
    /// What to set next (no bot token, no API key, ...), logged at boot.
    pub hints: Vec<String>,
    /// Every secret the config names (API keys, bot tokens, the Studio token), read from the
    /// environment once at load time, by variable name. Registered for redaction.
    pub secrets: BTreeMap<String, crate::secrets::Secret>,
}

impl LoadedConfig {
    pub fn agent(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|agent| agent.name == name)
    }

    /// The secret held by environment variable `var`, if it was set.
    pub fn secret(&self, var: &str) -> Option<&crate::secrets::Secret> {
        self.secrets.get(var)
    }
}

/// Loads and validates everything from the process environment.
pub fn load(overrides: &Overrides) -> Result<LoadedConfig, ConfigError> {
    load_with_env(overrides, std::env::vars().collect())
}

/// Loads with an explicit environment (tests pass their own).
pub fn load_with_env(
    overrides: &Overrides,
    env: BTreeMap<String, String>,
) -> Result<LoadedConfig, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    layers::load(overrides, &env, &cwd)
}

/// Loads with an explicit environment and working directory.
pub fn load_in(
    overrides: &Overrides,
    env: BTreeMap<String, String>,
    cwd: &Path,
) -> Result<LoadedConfig, ConfigError> {
    layers::load(overrides, &env, cwd)
}

/// Parses one config file's text alone (for tests and `config check` of a single file).
pub fn parse_file(text: &str, origin: &str) -> Result<Config, ConfigError> {
    layers::parse_config_text(text, origin).map(|(config, _)| config)
}

/// Semantic checks that types alone cannot express.
pub(crate) fn validate(config: &Config, origin: &str) -> Result<(), ConfigError> {
    // Off loopback Studio also needs its token; that is checked once the secrets are read.
    config.studio.bind.parse::<SocketAddr>().map_err(|_| {
        ConfigError::key(
            origin,
            "[studio].bind",
            format!(
                "invalid socket address `{}` (expected host:port such as 127.0.0.1:7070)",
                config.studio.bind
            ),
        )
    })?;
    let memory = &config.memory;
    if !(0.0..=1.0).contains(&memory.surprise_threshold) {
        return Err(ConfigError::key(
            origin,
            "[memory].surprise_threshold",
            format!("must be between 0 and 1, not {}", memory.surprise_threshold),
        ));
    }
    if !memory.embeddings_provider.is_empty() {
        match config.providers.get(&memory.embeddings_provider) {
            None => {
                return Err(ConfigError::key(
                    origin,
                    "[memory].embeddings_provider",
                    format!(
                        "provider `{}` is not defined under [providers]",
                        memory.embeddings_provider
                    ),
                ));
            }
            Some(provider) if provider.embeddings_model.trim().is_empty() => {
                return Err(ConfigError::key(
                    origin,
                    "[memory].embeddings_provider",
                    format!(
                        "provider `{}` has no `embeddings_model`; set one in [providers.{}]",
                        memory.embeddings_provider, memory.embeddings_provider
                    ),
                ));
            }
            Some(provider) if provider.kind == ProviderKind::Anthropic => {
                return Err(ConfigError::key(
                    origin,
                    "[memory].embeddings_provider",
                    "Anthropic serves no embeddings; use an OpenAI-compatible or Gemini provider",
                ));
            }
            Some(_) => {}
        }
    }
    let supervision = &config.supervision;
    if supervision.max_restarts == 0 {
        return Err(ConfigError::key(
            origin,
            "[supervision].max_restarts",
            "must be at least 1",
        ));
    }
    if !(1.0..=10.0).contains(&supervision.backoff_factor) {
        return Err(ConfigError::key(
            origin,
            "[supervision].backoff_factor",
            format!(
                "{} is out of range (expected 1.0 to 10.0)",
                supervision.backoff_factor
            ),
        ));
    }
    if !(0.0..0.9).contains(&supervision.jitter) {
        return Err(ConfigError::key(
            origin,
            "[supervision].jitter",
            format!(
                "{} is out of range (expected 0.0 to 0.9)",
                supervision.jitter
            ),
        ));
    }
    if supervision.backoff_min.0 > supervision.backoff_max.0 {
        return Err(ConfigError::key(
            origin,
            "[supervision].backoff_min",
            "is larger than [supervision].backoff_max",
        ));
    }
    let poll = config.telegram.poll_timeout.0;
    if poll.as_secs() > 50 || poll.is_zero() {
        return Err(ConfigError::key(
            origin,
            "[telegram].poll_timeout",
            format!(
                "{} is out of range (expected 1s to 50s)",
                config.telegram.poll_timeout
            ),
        ));
    }
    for (name, provider) in &config.providers {
        let key = format!("[providers.{name}].base_url");
        let url = reqwest::Url::parse(&provider.base_url).map_err(|error| {
            ConfigError::key(
                origin,
                &key,
                format!("invalid URL `{}`: {error}", provider.base_url),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ConfigError::key(
                origin,
                &key,
                "must be an http:// or https:// URL",
            ));
        }
    }
    let scheduler = &config.scheduler;
    if scheduler.max_sleep.0 < Duration::from_secs(1)
        || scheduler.max_sleep.0 > Duration::from_secs(3600)
    {
        return Err(ConfigError::key(
            origin,
            "[scheduler].max_sleep",
            format!(
                "{} is out of range (expected 1s to 1h)",
                scheduler.max_sleep
            ),
        ));
    }
    if scheduler.min_interval.0 < Duration::from_secs(1) {
        return Err(ConfigError::key(
            origin,
            "[scheduler].min_interval",
            "must be at least 1s",
        ));
    }
    if scheduler.max_jobs_per_agent == 0 {
        return Err(ConfigError::key(
            origin,
            "[scheduler].max_jobs_per_agent",
            "must be at least 1",
        ));
    }
    if scheduler.retry_backoff.len() > 20 {
        return Err(ConfigError::key(
            origin,
            "[scheduler].retry_backoff",
            "lists more than 20 retries",
        ));
    }
    validate_mcp(&config.mcp, origin)?;
    for (model, price) in &config.pricing {
        if price.input_per_mtok < 0.0
            || price.output_per_mtok < 0.0
            || !price.input_per_mtok.is_finite()
            || !price.output_per_mtok.is_finite()
        {
            return Err(ConfigError::key(
                origin,
                format!("[pricing.\"{model}\"]"),
                "prices must be finite and not negative",
            ));
        }
    }
    Ok(())
}

/// `[mcp]` and every `[[mcp.servers]]` entry (named by its index, like `[mcp.servers.0].name`).
fn validate_mcp(mcp: &McpConfig, origin: &str) -> Result<(), ConfigError> {
    if mcp.connect_timeout.0 < Duration::from_millis(100) {
        return Err(ConfigError::key(
            origin,
            "[mcp].connect_timeout",
            "must be at least 100ms",
        ));
    }
    if mcp.ping_every.0 < Duration::from_millis(100) {
        return Err(ConfigError::key(
            origin,
            "[mcp].ping_every",
            "must be at least 100ms",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (index, server) in mcp.servers.iter().enumerate() {
        let key = |field: &str| format!("[mcp.servers.{index}].{field}");
        let name = &server.name;
        if name.is_empty()
            || name.len() > 32
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return Err(ConfigError::key(
                origin,
                key("name"),
                format!("`{name}` must be 1 to 32 characters of a-z, 0-9, `_` and `-`"),
            ));
        }
        if name.contains("__") {
            return Err(ConfigError::key(
                origin,
                key("name"),
                format!("`{name}` must not contain `__` (it separates server and tool names)"),
            ));
        }
        if !seen.insert(name.as_str()) {
            return Err(ConfigError::key(
                origin,
                key("name"),
                format!("`{name}` is used by another [[mcp.servers]] entry"),
            ));
        }
        match server.transport {
            McpTransportKind::Stdio => {
                if server.command.trim().is_empty() {
                    return Err(ConfigError::key(
                        origin,
                        key("command"),
                        "a stdio server needs the program to run",
                    ));
                }
                if !server.url.is_empty()
                    || !server.headers.is_empty()
                    || !server.headers_env.is_empty()
                {
                    return Err(ConfigError::key(
                        origin,
                        key("url"),
                        "`url`, `headers` and `headers_env` belong to transport = \"http\"",
                    ));
                }
            }
            McpTransportKind::Http => {
                let url = reqwest::Url::parse(&server.url).map_err(|error| {
                    ConfigError::key(
                        origin,
                        key("url"),
                        format!("invalid URL `{}`: {error}", server.url),
                    )
                })?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(ConfigError::key(
                        origin,
                        key("url"),
                        "must be an http:// or https:// URL",
                    ));
                }
                if !server.command.is_empty()
                    || !server.args.is_empty()
                    || !server.env.is_empty()
                    || !server.env_from.is_empty()
                    || server.cwd.is_some()
                {
                    return Err(ConfigError::key(
                        origin,
                        key("command"),
                        "`command`, `args`, `env`, `env_from` and `cwd` belong to transport = \"stdio\"",
                    ));
                }
                for header in server.headers.keys().chain(server.headers_env.keys()) {
                    if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
                        return Err(ConfigError::key(
                            origin,
                            key("headers"),
                            format!("`{header}` is not a valid HTTP header name"),
                        ));
                    }
                }
            }
        }
        if server.timeout.0 < Duration::from_millis(100)
            || server.timeout.0 > Duration::from_secs(3600)
        {
            return Err(ConfigError::key(
                origin,
                key("timeout"),
                format!("{} is out of range (expected 100ms to 1h)", server.timeout),
            ));
        }
    }
    Ok(())
}

/// A path from a layer, resolved against `base` when relative.
pub(crate) fn resolve(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}
