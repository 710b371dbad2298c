//! Configuration: defaults < `clawvisor.toml` < `CLAWVISOR_*` environment < command-line flags.
//!
//! Loading is one function, [`load`], that returns a validated [`LoadedConfig`] (the daemon's
//! settings plus every agent definition from `actors/*.toml`) or a [`ConfigError`] whose text names
//! the file (or environment variable), the key, and what was expected. Unknown keys are errors in
//! files; unknown `CLAWVISOR_*` variables are reported as warnings (the environment is shared with
//! other programs, and agent files name their own `CLAWVISOR_...` token variables).
//!
//! Which file: `--config`, `CLAWVISOR_CONFIG`, `clawvisor.toml` in the working directory (what
//! `clawvisor init` writes), `config/clawvisor.toml` there (the repository's layout), else the
//! built-in defaults (`starter`).
//!
//! Paths written in a config file are relative to that file's directory; paths from defaults,
//! the environment or flags are relative to the working directory. Every path the config holds
//! is absolute and canonical (symbolic links and `..` resolved as far as the path exists), so
//! what the daemon prints is where the files are.
//!
//! The settings of each `[section]` are here unless a section is large enough for its own file
//! (`mcp`, `providers`, `backup`, `web_search`, `triggers`; agent files in `agent`); `layers` merges the
//! layers as TOML tables and deserializes them once (`serde_path_to_error` names the key of any
//! bad value), `validate` checks what types cannot, `duration` reads durations, and `timezone`
//! decides the daemon's zone ([`LoadedConfig::timezone`]).
//!
//! The secrets the config names (API keys, bot tokens, the Studio token; `secret_uses` lists
//! them) are read at load into [`LoadedConfig::secrets`] and registered for redaction: from the
//! environment, else from the secrets store `<data_dir>/secrets.toml` that Studio's Keys & tokens
//! page writes (`secrets_file`; the environment wins). [`LoadedConfig::secret_sources`] says
//! which one each came from.
//!
//! Architecture Invariant: only `config` reads configuration files, `CLAWVISOR_*` variables and
//! `TZ`; every actor receives its own slice of the validated config in its `Args`.

mod agent;
mod backup;
mod bytes;
mod duration;
pub mod edit;
mod layers;
mod mcp;
mod memory;
mod nodes;
mod providers;
mod secret_uses;
pub mod secrets_file;
pub mod signal;
mod starter;
mod timezone;
mod triggers;
mod validate;
mod web_search;
// Issue #32, browser: `[browser]` and `[[browser.logins]]`.
mod browser;
pub use browser::{BrowserConfig, BrowserLogin, site_host};
pub mod whatsapp;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use agent::{
    AgentSpec, Autonomy, FallbackModel, TelegramSpec, VoiceReplies, check_web_fetch_host,
    load_agents, parse_agent,
};
pub use backup::BackupConfig;
pub use bytes::Bytes;
pub use duration::Dur;
pub use mcp::{McpConfig, McpServerConfig, McpTransportKind, McpTrustConfig};
pub use memory::EmbeddingsMode;
pub use nodes::{
    DEFAULT_NODE_BIND, NodeEntry, NodeServeConfig, add_node_entry, remove_node_entry,
    valid_node_name,
};
pub use providers::{PriceConfig, ProviderConfig, ProviderKind, TranscriptionConfig};
pub use secret_uses::{SecretUse, SecretUseKind, secret_uses};
pub use signal::{DEFAULT_SIGNAL_RPC_URL, SignalSpec};
pub use starter::{
    CONFIG_FILE, REPOSITORY_CONFIG_PATH, STARTER_ACTORS_DIR, STARTER_AGENT_FILE, STARTER_DATA_DIR,
    config_file, config_file_in, starter_agent, starter_config, starter_config_with_data_dir,
};
pub use timezone::{DaemonTimezone, system_timezone};
pub use triggers::{BODY_PLACEHOLDER, DeliverTo, MAX_BODY_CEILING, TriggerConfig};
/// One `[studio] tls_proxies` or `plain_http_peers` entry as a network: an address is a network of one.
pub fn tls_proxy_network(entry: &str) -> Result<ipnet::IpNet, String> {
    let entry = entry.trim();
    entry
        .parse::<ipnet::IpNet>()
        .or_else(|_| entry.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| {
            format!(
                "`{entry}` is not an address or network (write it like 10.0.0.5 or 172.18.0.0/16)"
            )
        })
}

pub use web_search::{BRAVE_API_URL, MAX_RESULTS_CEILING, WebSearchBackend, WebSearchConfig};

use crate::supervision::RestartPolicy;

/// The config file shipped in the repository (`starter_config` is the built-in defaults and what
/// `clawvisor init` writes).
pub const SHIPPED_CONFIG: &str = include_str!("../../config/clawvisor.toml");
/// The default agent shipped in the repository; used when no agents directory exists, and
/// written by `clawvisor init`.
pub const SHIPPED_AGENT: &str = include_str!("../../actors/assistant.toml");
/// The Bot API's address unless an agent's `[telegram] api_url` names another.
pub const DEFAULT_TELEGRAM_API: &str = "https://api.telegram.org";
/// The database's file name in the data directory.
pub const DATABASE_FILE: &str = "clawvisor.db";

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
    /// Addresses (`10.0.0.5`) or networks (`172.18.0.0/16`) of proxies that terminate TLS in
    /// front of Studio on another machine or container; they count only with an `https://`
    /// `public_url`. Studio refuses a token, session or login link over plain HTTP from any other
    /// non-loopback peer.
    pub tls_proxies: Vec<String>,
    /// Addresses or networks allowed to send credentials over plain HTTP though not loopback:
    /// only for a hop that crosses no network, like Docker's bridge gateway (`172.17.0.1`) when
    /// the port is published on the host's loopback (`-p 127.0.0.1:7070:7070`).
    pub plain_http_peers: Vec<String>,
}

impl Default for StudioConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:7070".into(),
            token_env: "CLAWVISOR_STUDIO_TOKEN".into(),
            public_url: String::new(),
            metrics_token_env: String::new(),
            tls_proxies: Vec::new(),
            plain_http_peers: Vec::new(),
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
    /// Free space in the data directory below which the daemon warns (log, Studio, doctor).
    pub min_free: Bytes,
    /// Free space below which the writer refuses new writes itself, before SQLite fails: every
    /// writer holds at once until space returns (0 turns the hold off).
    pub hold_free: Bytes,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            busy_timeout: Dur::secs(5),
            synchronous: SyncMode::Full,
            events_retention: 20_000,
            min_free: Bytes::mib(64),
            hold_free: Bytes::mib(8),
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
    /// A streamed answer is shown while it is written (a draft in private chats, a message
    /// edited as it grows elsewhere) only once the run has been answering this long; an answer
    /// finished sooner arrives as one message.
    pub stream_after: Dur,
    /// ... and only once it has at least this many characters, so that a few words are not
    /// shown alone.
    pub stream_min_chars: usize,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            boot_stagger: Dur::secs(1),
            poll_timeout: Dur::secs(30),
            stale_grace: Dur::secs(120),
            wait_for_previous: Dur::secs(0),
            degraded_retry: Dur::secs(600),
            stream_after: Dur::secs(1),
            stream_min_chars: 20,
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
    /// Hosts every agent's `web_fetch` may always reach, even once a run has read private data
    /// (`"docs.rs"`, `"*.example.com"`); an agent file's `web_fetch_allow` adds its own.
    pub web_fetch_allow: Vec<String>,
    pub web_fetch_max_bytes: u64,
    pub web_fetch_timeout: Dur,
    pub shell_timeout: Dur,
    pub shell_max_output: u64,
    pub read_max_bytes: u64,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            web_fetch_allow_private: false,
            web_fetch_allow: Vec::new(),
            web_fetch_max_bytes: 2 * 1024 * 1024,
            web_fetch_timeout: Dur::secs(20),
            shell_timeout: Dur::secs(60),
            shell_max_output: 64 * 1024,
            read_max_bytes: 1024 * 1024,
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
    /// A call blocked as L3 by the risk check alone (e.g. `rm -rf` in the agent's workspace) is
    /// put to the Studio operator, who may allow exactly that action once by typing it out
    /// (audited). Off: L3 is always refused.
    pub allow_l3_once: bool,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            tool_calls_per_minute: 30,
            max_parallel_tools: 4,
            tool_output_max_chars: 16_000,
            allow_l3_once: false,
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
    /// Model calls in flight at once, across all agents; further runs wait their turn, so a
    /// burst (or the backlog after a restart) slows down instead of holding memory for every
    /// conversation at once. Read at start.
    pub max_model_calls: u32,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            idle_stop: Dur::secs(600),
            history_events: 200,
            max_model_calls: 8,
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
    /// How memories are embedded: auto, provider, local or off (`config/memory.rs`).
    pub embeddings: EmbeddingsMode,
    /// The local model's directory (absolute, or a name under `<data dir>/models/`).
    pub local_model: String,
    /// The local model leaves memory after this long unused.
    pub local_idle_unload: Dur,
    /// Texts per forward pass of the local model.
    pub local_batch: u32,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            embeddings_provider: String::new(),
            surprise_threshold: 0.25,
            recall_limit: 6,
            embeddings: EmbeddingsMode::Auto,
            local_model: String::new(),
            local_idle_unload: Dur::secs(600),
            local_batch: 32,
        }
    }
}

/// The daemon's settings (agents are loaded beside it into [`LoadedConfig`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Where the database, workspaces and indexes live.
    pub data_dir: PathBuf,
    /// The daemon's IANA time zone (`Europe/Berlin`); empty: the system's (`TZ`, then
    /// `/etc/localtime`), else UTC. Agent files and people (`/timezone`) may choose their own.
    pub timezone: String,
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
    pub transcription: TranscriptionConfig,
    pub mcp: McpConfig,
    pub web_search: WebSearchConfig,
    pub browser: BrowserConfig,
    pub backup: BackupConfig,
    pub providers: BTreeMap<String, ProviderConfig>,
    pub pricing: BTreeMap<String, PriceConfig>,
    /// `[[triggers]]`: webhooks that wake an agent (`triggers.rs`; applied at a restart).
    pub triggers: Vec<TriggerConfig>,
    /// `[[nodes]]`: paired machines whose tools agents may use (issue #34, `crate::node`).
    pub nodes: Vec<NodeEntry>,
    /// `[node]`: this machine as a node (`clawvisor node serve` only).
    pub node: NodeServeConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("data"),
            timezone: String::new(),
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
            transcription: TranscriptionConfig::default(),
            mcp: McpConfig::default(),
            web_search: WebSearchConfig::default(),
            browser: BrowserConfig::default(),
            backup: BackupConfig::default(),
            providers: BTreeMap::new(),
            pricing: BTreeMap::new(),
            triggers: Vec::new(),
            nodes: Vec::new(),
            node: NodeServeConfig::default(),
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

    /// The database file: [`DATABASE_FILE`] in the data directory.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join(DATABASE_FILE)
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
    /// Every secret the config names (API keys, bot tokens, the Studio token), read once at load
    /// time from the environment or the secrets store, by variable name. Registered for
    /// redaction.
    pub secrets: BTreeMap<String, crate::secrets::Secret>,
    /// Where each of [`secrets`](Self::secrets) came from.
    pub secret_sources: BTreeMap<String, SecretSource>,
    /// The daemon's time zone (`timezone`, else the system's, else UTC) and where it came from.
    pub timezone: DaemonTimezone,
}

/// Where a secret's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// The daemon's environment (it wins over the store).
    Environment,
    /// The secrets store, `<data_dir>/secrets.toml` (Studio's Keys & tokens).
    Store,
}

impl LoadedConfig {
    /// Every secret variable the config and the agents name, with what uses it.
    pub fn secret_uses(&self) -> BTreeMap<String, Vec<SecretUse>> {
        secret_uses(&self.config, &self.agents)
    }

    /// Whether the secret `var` was read from the secrets store (not the environment).
    pub fn secret_from_store(&self, var: &str) -> bool {
        self.secret_sources.get(var) == Some(&SecretSource::Store)
    }

    pub fn agent(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|agent| agent.name == name)
    }

    /// The secret held by variable `var` (environment or store), if it was set.
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
    load_with_overlay(overrides, env, &edit::Overlay::default())
}

/// Like [`load_with_env`], reading the files `overlay` holds from it: how an edit of the files
/// is validated whole before it is written.
pub fn load_with_overlay(
    overrides: &Overrides,
    env: BTreeMap<String, String>,
    overlay: &edit::Overlay,
) -> Result<LoadedConfig, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    layers::load(overrides, &env, &cwd, overlay)
}

/// Loads with an explicit environment and working directory.
pub fn load_in(
    overrides: &Overrides,
    env: BTreeMap<String, String>,
    cwd: &Path,
) -> Result<LoadedConfig, ConfigError> {
    layers::load(overrides, &env, cwd, &edit::Overlay::default())
}

/// Parses one config file's text alone (for tests and `config check` of a single file).
pub fn parse_file(text: &str, origin: &str) -> Result<Config, ConfigError> {
    layers::parse_config_text(text, origin).map(|(config, _)| config)
}
/// A path from a layer, resolved against `base` when relative, made [`canonical`].
pub(crate) fn resolve(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        canonical(path)
    } else {
        canonical(&base.join(path))
    }
}

/// `path` without `.` and `..`, its directories canonicalized as far as they exist (symbolic
/// links resolved) and the rest read lexically: `/srv/cv/config/../data` is `/srv/cv/data`
/// whether or not `config/` or `data/` exist yet. The last name is kept as written, so a data
/// directory or config file that is a symbolic link stays one (and a config file's relative
/// paths stay relative to the link's directory).
pub fn canonical(path: &Path) -> PathBuf {
    use std::path::Component;
    match (path.components().next_back(), path.parent()) {
        (Some(Component::Normal(name)), Some(parent)) => canonical_dir(parent).join(name),
        _ => canonical_dir(path),
    }
}

/// `path` with its longest existing prefix canonicalized and the rest read lexically.
fn canonical_dir(path: &Path) -> PathBuf {
    use std::path::Component;
    let components: Vec<Component<'_>> = path.components().collect();
    let (mut out, rest) = (1..=components.len())
        .rev()
        .find_map(|len| {
            let prefix: PathBuf = components[..len].iter().collect();
            std::fs::canonicalize(&prefix)
                .ok()
                .map(|real| (real, &components[len..]))
        })
        .unwrap_or((PathBuf::new(), &components[..]));
    for component in rest {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // At the root `..` stays at the root; past the start of a relative path it is kept.
                let last = out.components().next_back();
                match last {
                    Some(Component::Normal(_)) => {
                        out.pop();
                    }
                    Some(Component::RootDir | Component::Prefix(_)) => {}
                    _ => out.push(".."),
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths_resolve_dot_dot_whether_or_not_the_folders_exist() {
        let root = tempfile::tempdir().expect("a temporary directory");
        let real = std::fs::canonicalize(root.path()).expect("it exists");
        assert_eq!(
            canonical(&root.path().join("config/../data")),
            real.join("data")
        );
        assert_eq!(canonical(&root.path().join("./a/./b/..")), real.join("a"));
        std::fs::create_dir(root.path().join("config")).expect("config/");
        assert_eq!(
            canonical(&root.path().join("config/../data")),
            real.join("data")
        );
        // A link is followed before its `..` is read, as the kernel would.
        std::fs::create_dir_all(root.path().join("elsewhere/deep")).expect("made");
        std::os::unix::fs::symlink(root.path().join("elsewhere/deep"), root.path().join("link"))
            .expect("linked");
        assert_eq!(
            canonical(&root.path().join("link/../data")),
            real.join("elsewhere/data")
        );
        // The last name stays as written: a data directory that is a link stays one.
        assert_eq!(canonical(&root.path().join("./link")), real.join("link"));
        assert_eq!(canonical(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(
            resolve(root.path(), Path::new("../data")),
            canonical(&real.join("../data"))
        );
    }
}
