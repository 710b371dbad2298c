//! Agent definitions: one `actors/<name>.toml` per agent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::layers::{describe_toml_error, display_key, friendly};
use super::{Config, ConfigError, Dur};

/// How much an agent may do without asking (DESIGN.md, "Policy and risk"). Ordered from the most
/// permissive to the strictest, so `max` of two is the tighter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Everything but destructive (L2+) writes runs freely. Loop limit 50 turns.
    TrustFirst,
    /// Read-only tools run freely; every write asks. Loop limit 15 turns.
    #[default]
    RequireApproval,
    /// Every tool call asks. Loop limit 8 turns.
    Supervised,
}

impl Autonomy {
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::TrustFirst => "trust_first",
            Autonomy::RequireApproval => "require_approval",
            Autonomy::Supervised => "supervised",
        }
    }

    pub fn parse(text: &str) -> Option<Autonomy> {
        match text {
            "trust_first" => Some(Autonomy::TrustFirst),
            "require_approval" => Some(Autonomy::RequireApproval),
            "supervised" => Some(Autonomy::Supervised),
            _ => None,
        }
    }

    /// The loop's turn limit in this mode (DESIGN.md: 50 / 15 / 8).
    pub fn turn_limit(self) -> u32 {
        match self {
            Autonomy::TrustFirst => 50,
            Autonomy::RequireApproval => 15,
            Autonomy::Supervised => 8,
        }
    }
}

/// When an agent's answers in Telegram are spoken (a voice message) instead of written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum VoiceReplies {
    /// Always written.
    #[default]
    Never,
    /// Spoken when the messages the answer replies to include a voice note.
    WhenSpokenTo,
    /// Every answer of a conversation run is spoken.
    Always,
}

impl VoiceReplies {
    /// The word the agent file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            VoiceReplies::Never => "never",
            VoiceReplies::WhenSpokenTo => "when_spoken_to",
            VoiceReplies::Always => "always",
        }
    }
}

/// A model to try when the previous one in the chain fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackModel {
    pub provider: String,
    pub model: String,
}

/// The agent's Telegram bot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramSpec {
    /// Environment variable that holds the bot token (the token itself never goes in a file).
    pub token_env: String,
    /// Bot API base URL (a self-hosted Bot API server, or a test fake).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Telegram user ids allowed to talk to the agent; others go through pairing.
    #[serde(default)]
    pub allow_users: Vec<i64>,
    /// Telegram user ids allowed to approve risky actions (default: `allow_users`).
    #[serde(default)]
    pub approvers: Vec<i64>,
}

fn default_api_url() -> String {
    super::DEFAULT_TELEGRAM_API.to_string()
}

/// One agent, as written in its file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Lowercase letters, digits, `-` and `_`; unique.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// A key of `[providers]` in the config.
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub fallback: Vec<FallbackModel>,
    /// The persona and standing instructions (or `instructions_file`, relative to the agent file).
    #[serde(default)]
    pub instructions: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_file: Option<PathBuf>,
    #[serde(default)]
    pub autonomy: Autonomy,
    /// Built-in tool names, `mcp:<server>` for all tools of a server, or `<server>__<tool>`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// The agent this one reports to (its memory is readable by that agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reports_to: Option<String>,
    /// Agents this one may delegate to (default: the agents that report to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_delegate_to: Option<Vec<String>>,
    /// Skills enabled for this agent.
    #[serde(default)]
    pub skills: Vec<String>,
    /// Stop starting new runs once today's cost reaches this many US dollars (0 = no limit).
    #[serde(default)]
    pub daily_budget_usd: f64,
    /// Stop starting new runs (and stop a run at its next model call) once today's input plus
    /// output tokens reach this many, for every model, priced or not (0 = no limit).
    #[serde(default)]
    pub daily_token_budget: u64,
    /// How long an approval request waits for a decision.
    #[serde(default = "default_approval_ttl")]
    pub approval_ttl: Dur,
    /// The model's context budget in tokens (prompt layers are trimmed to fit).
    #[serde(default = "default_context_tokens")]
    pub context_tokens: u32,
    /// Workspace directory for file tools (default: `<data_dir>/workspaces/<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telegram: Option<TelegramSpec>,
    /// The agent's Signal account (read and checked; not yet run by the daemon, issue #31).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<super::SignalSpec>,
    /// The agent's WhatsApp Business account (`config/whatsapp.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp: Option<super::whatsapp::WhatsAppSpec>,
    /// Shell commands are allowed for this agent (still classified and gated).
    #[serde(default)]
    pub allow_shell: bool,
    /// Hosts this agent's `web_fetch` may always reach, even once a run has read private data
    /// (`"docs.rs"`, `"*.example.com"`), besides `[tools] web_fetch_allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub web_fetch_allow: Vec<String>,
    /// The model reads images: photos a user sends are given to it (not only saved).
    #[serde(default)]
    pub vision: bool,
    /// The agent's IANA time zone (`Europe/Berlin`) for people who set none (absent or empty:
    /// the daemon's `timezone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// A transcribed voice note is quoted back to the user (`🎙 "…"`) before the answer, so they
    /// see what was understood.
    #[serde(default)]
    pub echo_transcripts: bool,
    /// Spoken replies: `never` (default), `when_spoken_to` or `always`; needs a provider with
    /// `speech_model`.
    #[serde(default)]
    pub voice_replies: VoiceReplies,
    /// Where this spec was read from (not a key in the file).
    #[serde(skip)]
    pub source: String,
}

fn default_approval_ttl() -> Dur {
    Dur::secs(300)
}

fn default_context_tokens() -> u32 {
    16_000
}

impl AgentSpec {
    /// The Telegram user ids this agent knows: its `allow_users` and `approvers`.
    pub fn telegram_people(&self) -> Vec<i64> {
        let mut people: Vec<i64> = self
            .telegram
            .iter()
            .flat_map(|telegram| telegram.allow_users.iter().chain(&telegram.approvers))
            .copied()
            .collect();
        people.sort_unstable();
        people.dedup();
        people
    }

    /// The agents this one may hand work to.
    pub fn delegates(&self, all: &[AgentSpec]) -> Vec<String> {
        match &self.can_delegate_to {
            Some(list) => list.clone(),
            None => all
                .iter()
                .filter(|other| other.reports_to.as_deref() == Some(self.name.as_str()))
                .map(|other| other.name.clone())
                .collect(),
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Parses one agent file's text.
pub fn parse_agent(text: &str, origin: &str, config: &Config) -> Result<AgentSpec, ConfigError> {
    let mut spec = deserialize_agent(text, origin)?;
    if !valid_name(&spec.name) {
        return Err(ConfigError::key(
            origin,
            "name",
            format!(
                "`{}` is not a valid agent name (use 1-32 lowercase letters, digits, `-` or `_`)",
                spec.name
            ),
        ));
    }
    check_providers(&spec, origin, config)?;
    // Stored canonical (`europe/berlin` → `Europe/Berlin`); empty means not set, as for the
    // daemon's `timezone`.
    spec.timezone = match spec.timezone.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(name) => Some(
            super::timezone::check_timezone(origin, "timezone", name)?
                .name()
                .to_string(),
        ),
    };
    check_limits(&spec, origin)?;
    if let Some(telegram) = &spec.telegram {
        check_telegram(telegram, origin)?;
    }
    if let Some(signal) = &spec.signal {
        super::signal::check_signal(signal, origin)?;
    }
    if let Some(whatsapp) = &spec.whatsapp {
        super::whatsapp::check_whatsapp(whatsapp, origin)?;
    }
    if spec.voice_replies != VoiceReplies::Never
        && !config
            .providers
            .values()
            .any(|provider| !provider.speech_model.trim().is_empty())
    {
        return Err(ConfigError::key(
            origin,
            "voice_replies",
            "needs a speech provider: set `speech_model` (e.g. \"tts-1\") on an OpenAI-compatible provider in [providers], or set voice_replies = \"never\"",
        ));
    }
    check_instructions(&spec, origin)?;
    Ok(spec)
}

/// Deserializes the text as an [`AgentSpec`] read from `origin`, naming the key and line on error.
fn deserialize_agent(text: &str, origin: &str) -> Result<AgentSpec, ConfigError> {
    let deserializer = toml::de::Deserializer::parse(text).map_err(|error| ConfigError::File {
        origin: origin.to_string(),
        message: describe_toml_error(text, error.message(), error.span()),
    })?;
    let mut spec: AgentSpec = serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let key = display_key(&error.path().to_string());
        let inner = error.inner();
        ConfigError::key(
            origin,
            key,
            describe_toml_error(text, &friendly(inner.message()), inner.span()),
        )
    })?;
    spec.source = origin.to_string();
    Ok(spec)
}

/// The agent's provider and each fallback's are defined under `[providers]`.
fn check_providers(spec: &AgentSpec, origin: &str, config: &Config) -> Result<(), ConfigError> {
    if !config.providers.contains_key(&spec.provider) {
        return Err(ConfigError::key(
            origin,
            "provider",
            format!(
                "provider `{}` is not defined; add [providers.{}] to the config (defined: {})",
                spec.provider,
                spec.provider,
                defined(config.providers.keys())
            ),
        ));
    }
    for (index, fallback) in spec.fallback.iter().enumerate() {
        if !config.providers.contains_key(&fallback.provider) {
            return Err(ConfigError::key(
                origin,
                format!("fallback[{index}].provider"),
                format!(
                    "provider `{}` is not defined (defined: {})",
                    fallback.provider,
                    defined(config.providers.keys())
                ),
            ));
        }
    }
    Ok(())
}

/// A model is named, and the daily budget and the context budget are in range.
fn check_limits(spec: &AgentSpec, origin: &str) -> Result<(), ConfigError> {
    if spec.model.trim().is_empty() {
        return Err(ConfigError::key(origin, "model", "must not be empty"));
    }
    if !(0.0..1.0e6).contains(&spec.daily_budget_usd) {
        return Err(ConfigError::key(
            origin,
            "daily_budget_usd",
            "must be between 0 and 1,000,000",
        ));
    }
    if spec.context_tokens < 1_000 {
        return Err(ConfigError::key(
            origin,
            "context_tokens",
            "must be at least 1000",
        ));
    }
    Ok(())
}

/// The `[telegram]` table names its token variable and an http(s) Bot API.
fn check_telegram(telegram: &TelegramSpec, origin: &str) -> Result<(), ConfigError> {
    if telegram.token_env.trim().is_empty() {
        return Err(ConfigError::key(
            origin,
            "[telegram].token_env",
            "must name an environment variable",
        ));
    }
    let url = reqwest::Url::parse(&telegram.api_url).map_err(|error| {
        ConfigError::key(
            origin,
            "[telegram].api_url",
            format!("invalid URL `{}`: {error}", telegram.api_url),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::key(
            origin,
            "[telegram].api_url",
            "must be an http:// or https:// URL",
        ));
    }
    Ok(())
}

/// Exactly one of `instructions` and `instructions_file` gives the persona.
fn check_instructions(spec: &AgentSpec, origin: &str) -> Result<(), ConfigError> {
    match (&spec.instructions_file, spec.instructions.trim().is_empty()) {
        (Some(_), false) => Err(ConfigError::key(
            origin,
            "instructions_file",
            "set either `instructions` or `instructions_file`, not both",
        )),
        (None, true) => Err(ConfigError::key(
            origin,
            "instructions",
            "missing: give the agent its persona in `instructions` (or `instructions_file`)",
        )),
        _ => Ok(()),
    }
}

fn defined<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<&str> = names.map(String::as_str).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Reads every `*.toml` in `dir` (sorted by file name).
pub fn load_agents(dir: &Path, config: &Config) -> Result<Vec<AgentSpec>, ConfigError> {
    load_agents_with(dir, config, &super::edit::Overlay::default())
}

/// Like [`load_agents`], reading the files `overlay` holds from it (an edit being validated).
pub fn load_agents_with(
    dir: &Path,
    config: &Config,
    overlay: &super::edit::Overlay,
) -> Result<Vec<AgentSpec>, ConfigError> {
    let origin = dir.display().to_string();
    let files = overlay
        .agent_files(dir)
        .map_err(|error| ConfigError::File {
            origin: origin.clone(),
            message: format!("cannot read the agents directory: {error}"),
        })?;
    let mut agents = Vec::new();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for file in files {
        let origin = file.display().to_string();
        let text = overlay.read(&file).map_err(|error| ConfigError::File {
            origin: origin.clone(),
            message: format!("cannot read: {error}"),
        })?;
        let mut spec = parse_agent(&text, &origin, config)?;
        if let Some(first) = seen.get(&spec.name) {
            return Err(ConfigError::key(
                origin,
                "name",
                format!("agent `{}` is already defined in {first}", spec.name),
            ));
        }
        if let Some(relative) = spec.instructions_file.clone() {
            let path = file
                .parent()
                .map(|dir| dir.join(&relative))
                .unwrap_or(relative);
            spec.instructions = read_instructions(&path).map_err(|problem| {
                ConfigError::key(
                    &origin,
                    "instructions_file",
                    format!("cannot read {}: {problem}", path.display()),
                )
            })?;
        }
        seen.insert(spec.name.clone(), origin);
        agents.push(spec);
    }
    Ok(agents)
}

/// The largest `instructions_file` read: a persona, not a data set.
const MAX_INSTRUCTIONS_BYTES: u64 = 1024 * 1024;

/// Reads an `instructions_file`: a regular file of at most [`MAX_INSTRUCTIONS_BYTES`], so that
/// a device (`/dev/zero`), a FIFO or a huge log named by mistake gives an error instead of
/// blocking or filling memory.
fn read_instructions(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let metadata = std::fs::metadata(path).map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".to_string());
    }
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let mut text = String::new();
    file.take(MAX_INSTRUCTIONS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| error.to_string())?;
    if text.len() as u64 > MAX_INSTRUCTIONS_BYTES {
        return Err("larger than the 1 MiB limit".to_string());
    }
    Ok(text)
}

/// Checks one `web_fetch_allow` entry: a host name, or `*.` and a host name; no scheme, port or
/// path. The error says what to write instead.
pub fn check_web_fetch_host(entry: &str) -> Result<(), String> {
    let name = entry.trim().strip_prefix("*.").unwrap_or(entry.trim());
    let valid = !name.is_empty()
        && !name.contains(['/', ':', '@', '?', '#', '*', ' ', '\\'])
        && url::Url::parse(&format!("http://{name}/")).is_ok();
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{entry}` is not a host name; write the host only, like \"docs.rs\" or \"*.example.com\" (no scheme, port or path)"
        ))
    }
}

/// Checks that hold between agents: `reports_to` names an agent and has no cycle;
/// `can_delegate_to` names agents.
pub fn validate_agents(agents: &[AgentSpec], _config: &Config) -> Result<(), ConfigError> {
    let names: BTreeSet<&str> = agents.iter().map(|agent| agent.name.as_str()).collect();
    for agent in agents {
        for entry in &agent.web_fetch_allow {
            check_web_fetch_host(entry)
                .map_err(|problem| ConfigError::key(&agent.source, "web_fetch_allow", problem))?;
        }
        if let Some(boss) = &agent.reports_to {
            if !names.contains(boss.as_str()) {
                return Err(ConfigError::key(
                    &agent.source,
                    "reports_to",
                    format!("no agent is named `{boss}`"),
                ));
            }
            let mut seen = BTreeSet::new();
            let mut current = Some(agent.name.as_str());
            while let Some(name) = current {
                if !seen.insert(name) {
                    return Err(ConfigError::key(
                        &agent.source,
                        "reports_to",
                        format!("`reports_to` forms a cycle through `{name}`"),
                    ));
                }
                current = agents
                    .iter()
                    .find(|other| other.name == name)
                    .and_then(|other| other.reports_to.as_deref());
            }
        }
        for delegate in agent.can_delegate_to.iter().flatten() {
            if !names.contains(delegate.as_str()) {
                return Err(ConfigError::key(
                    &agent.source,
                    "can_delegate_to",
                    format!("no agent is named `{delegate}`"),
                ));
            }
        }
    }
    let mut numbers: BTreeMap<&str, &str> = BTreeMap::new();
    for agent in agents {
        if let Some(whatsapp) = &agent.whatsapp
            && let Some(other) =
                numbers.insert(whatsapp.phone_number_id.trim(), agent.name.as_str())
        {
            return Err(ConfigError::key(
                &agent.source,
                "[whatsapp].phone_number_id",
                format!(
                    "{} is already the WhatsApp number of agent `{other}`: one number serves exactly one agent",
                    whatsapp.phone_number_id
                ),
            ));
        }
    }
    let mut tokens: BTreeMap<&str, &str> = BTreeMap::new();
    for agent in agents {
        if let Some(telegram) = &agent.telegram
            && let Some(other) = tokens.insert(telegram.token_env.as_str(), agent.name.as_str())
        {
            return Err(ConfigError::key(
                &agent.source,
                "[telegram].token_env",
                format!(
                    "{} is already the token of agent `{other}`: one bot serves exactly one agent",
                    telegram.token_env
                ),
            ));
        }
    }
    let mut signal_accounts: BTreeMap<&str, &str> = BTreeMap::new();
    for agent in agents {
        if let Some(signal) = &agent.signal
            && let Some(other) = signal_accounts.insert(signal.account.trim(), agent.name.as_str())
        {
            return Err(ConfigError::key(
                &agent.source,
                "[signal].account",
                format!(
                    "{} is already the Signal account of agent `{other}`: one account serves exactly one agent",
                    signal.account
                ),
            ));
        }
    }
    Ok(())
}
