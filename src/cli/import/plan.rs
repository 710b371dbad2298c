//! What an OpenClaw import would create, decided before anything is written: the same plan is
//! printed by `--dry-run` and carried out otherwise (`apply.rs`).
//!
//! Idempotence is decided here, against what is already there: a provider by its name in
//! `[providers]`, an agent by its name in the agents folder (an existing agent is left as it is),
//! a secret by its name in the secrets store (never replaced), a skill by its folder name in
//! `<data dir>/skills`, a memory by its owner and text (`store::memory::same_text`, and once per
//! import), a schedule by its agent and name among the live jobs.
//!
//! Invariant: a key or token only travels inside a [`Secret`]; the lines of the plan name the
//! variable that holds it, never the value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use toml_edit::DocumentMut;

use super::openclaw::{Agent, Installation, KeyValue, PERSONA_FILES};
use crate::config::edit::{self, Setting};
use crate::secrets::Secret;

/// One line of the report: what is created, or what is already there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub created: bool,
    pub text: String,
}

/// The file part of an import: config, agent files, secrets, skills.
#[derive(Debug, Default)]
pub struct FilePlan {
    /// The config's new text (`None`: unchanged).
    pub config_text: Option<String>,
    pub agent_files: Vec<(PathBuf, String)>,
    pub secrets: Vec<(String, Secret)>,
    /// (name, source folder) of skills copied into `<data dir>/skills/<name>`.
    pub skills: Vec<(String, PathBuf)>,
    /// OpenClaw agent id → clawvisor agent name, for every agent that exists after the import.
    pub names: BTreeMap<String, String>,
    /// Environment variables the operator has to set (a `${VAR}` key in OpenClaw's config).
    pub env_to_set: BTreeSet<String>,
    pub lines: Vec<Line>,
    /// What is not carried over, with the reason.
    pub skipped: Vec<String>,
}

impl FilePlan {
    fn created(&mut self, text: String) {
        self.lines.push(Line {
            created: true,
            text,
        });
    }

    fn kept(&mut self, text: String) {
        self.lines.push(Line {
            created: false,
            text,
        });
    }
}

/// What is already there, as the plan needs it.
pub struct Existing<'a> {
    pub config_text: &'a str,
    pub actors_dir: &'a Path,
    /// Names in the secrets store.
    pub secret_names: BTreeSet<String>,
    pub skills_dir: PathBuf,
}

/// A provider as clawvisor's config will hold it.
struct ProviderChoice {
    kind: &'static str,
    base_url: String,
    api_key_env: String,
    secret: Option<Secret>,
    free: bool,
}

/// Providers OpenClaw knows without a `models.providers` entry: (name, kind, base URL, key
/// variable).
const BUILT_IN_PROVIDERS: [(&str, &str, &str, &str); 6] = [
    (
        "anthropic",
        "anthropic",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    ),
    (
        "openai",
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    ),
    (
        "google",
        "gemini",
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
    ),
    (
        "gemini",
        "gemini",
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
    ),
    (
        "openrouter",
        "openai",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
    ),
    ("ollama", "openai", "http://127.0.0.1:11434/v1", ""),
];

/// The name of the variable for a provider's key: `ANTHROPIC_API_KEY`, `LMSTUDIO_API_KEY`.
fn key_variable(provider: &str) -> String {
    let upper: String = provider
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{upper}_API_KEY")
}

/// The clawvisor name of an OpenClaw agent id: lowercase, other characters as `-`.
pub fn agent_name(id: &str) -> String {
    let name: String = id
        .trim()
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    name
}

fn choose_provider(installation: &Installation, name: &str) -> Result<ProviderChoice, String> {
    let built_in = BUILT_IN_PROVIDERS.iter().find(|(known, ..)| *known == name);
    let configured = installation.providers.iter().find(|p| p.name == name);
    let Some(provider) = configured else {
        let Some((_, kind, base_url, env)) = built_in else {
            return Err(format!(
                "OpenClaw names the provider `{name}` but its config does not say where it is; \
                 add it under [providers] in clawvisor.toml"
            ));
        };
        return Ok(ProviderChoice {
            kind,
            base_url: base_url.to_string(),
            api_key_env: env.to_string(),
            secret: None,
            free: env.is_empty(),
        });
    };
    let kind = match provider.api.as_str() {
        "anthropic-messages" => "anthropic",
        "google-generative-ai" | "google-gemini" => "gemini",
        "openai-completions" | "openai-responses" | "openai-chat" => "openai",
        "" => built_in.map_or("openai", |(_, kind, ..)| *kind),
        other => {
            return Err(format!(
                "provider `{name}` speaks `{other}`, which clawvisor does not (it speaks OpenAI, \
                 Anthropic and Gemini)"
            ));
        }
    };
    let base_url = if provider.base_url.is_empty() {
        built_in
            .map(|(_, _, url, _)| url.to_string())
            .unwrap_or_default()
    } else {
        provider.base_url.clone()
    };
    if base_url.is_empty() {
        return Err(format!(
            "provider `{name}` has no baseUrl in OpenClaw's config"
        ));
    }
    let (api_key_env, secret) = match &provider.key {
        KeyValue::Literal(secret) => (key_variable(name), Some(secret.clone())),
        KeyValue::Env(var) => (var.clone(), None),
        KeyValue::None => (
            built_in
                .map(|(.., env)| env.to_string())
                .unwrap_or_default(),
            None,
        ),
    };
    let local = ["://127.0.0.1", "://localhost", "://[::1]"]
        .iter()
        .any(|host| base_url.contains(host));
    Ok(ProviderChoice {
        kind,
        base_url,
        free: local && secret.is_none() && api_key_env.is_empty(),
        api_key_env,
        secret,
    })
}

/// Adds the providers the imported agents use (and every `models.providers` entry) to the
/// config text; returns the names that are usable.
fn plan_providers(
    installation: &Installation,
    existing: &Existing<'_>,
    plan: &mut FilePlan,
) -> BTreeSet<String> {
    let document: Option<DocumentMut> = existing.config_text.parse().ok();
    let configured = |name: &str| {
        document
            .as_ref()
            .and_then(|document| document.get("providers")?.get(name))
            .is_some()
    };
    let mut wanted: BTreeSet<String> = installation
        .providers
        .iter()
        .map(|p| p.name.clone())
        .collect();
    for agent in &installation.agents {
        for model in agent.model.iter().chain(&agent.fallbacks) {
            if let Some((provider, _)) = model.split_once('/') {
                wanted.insert(provider.to_string());
            }
        }
    }
    let mut text = existing.config_text.to_string();
    let mut usable = BTreeSet::new();
    for name in wanted {
        if configured(&name) {
            plan.kept(format!(
                "provider {name}: already configured, left as it is"
            ));
            usable.insert(name);
            continue;
        }
        let choice = match choose_provider(installation, &name) {
            Ok(choice) => choice,
            Err(reason) => {
                plan.skipped.push(format!("provider {name}: {reason}"));
                continue;
            }
        };
        match edit::set_provider(
            &text,
            &name,
            choice.kind,
            &choice.base_url,
            &choice.api_key_env,
            choice.free,
        ) {
            Ok(changed) => text = changed,
            Err(error) => {
                plan.skipped.push(format!("provider {name}: {error}"));
                continue;
            }
        }
        let key = key_line("key", &choice.api_key_env, choice.secret, existing, plan);
        plan.created(format!(
            "provider {name} ({}, {}){key}",
            choice.kind, choice.base_url
        ));
        usable.insert(name);
    }
    if text != existing.config_text {
        plan.config_text = Some(text);
    }
    usable
}

/// Where a key goes, said without its value; queues the secret when it is new.
fn key_line(
    what: &str,
    var: &str,
    secret: Option<Secret>,
    existing: &Existing<'_>,
    plan: &mut FilePlan,
) -> String {
    if var.is_empty() {
        return format!(", no {what}");
    }
    match secret {
        Some(_) if existing.secret_names.contains(var) => {
            format!(", {what}: {var} is already in the secrets store (kept)")
        }
        Some(secret) => {
            plan.secrets.push((var.to_string(), secret));
            format!(", {what} kept in the secrets store as {var}")
        }
        None if std::env::var_os(var).is_some() || existing.secret_names.contains(var) => {
            format!(", {what} from {var} (already set)")
        }
        None => {
            plan.env_to_set.insert(var.to_string());
            format!(", {what} from {var} (set it)")
        }
    }
}

/// `1 person`, `3 people`: a count with its noun.
pub fn count(number: usize, one: &str, many: &str) -> String {
    format!("{number} {}", if number == 1 { one } else { many })
}

/// The agents' files; existing agents (by name) are left as they are.
pub fn plan_files(installation: &Installation, existing: &Existing<'_>) -> FilePlan {
    let mut plan = FilePlan::default();
    let providers = plan_providers(installation, existing, &mut plan);
    let skills = plan_skills(installation, existing, &mut plan);
    for agent in &installation.agents {
        let name = agent_name(&agent.id);
        if let Err(error) = edit::check_agent_name(&name) {
            plan.skipped.push(format!("agent {}: {error}", agent.id));
            continue;
        }
        if edit::find_agent_file(existing.actors_dir, &name).is_some() {
            plan.kept(format!("agent {name}: already there, left as it is"));
            plan.names.insert(agent.id.clone(), name);
            continue;
        }
        match agent_file(
            installation,
            agent,
            &name,
            &providers,
            &skills,
            existing,
            &mut plan,
        ) {
            Ok(text) => {
                let path = edit::new_agent_path(existing.actors_dir, &name);
                plan.agent_files.push((path, text));
                plan.names.insert(agent.id.clone(), name);
            }
            Err(reason) => plan.skipped.push(format!("agent {}: {reason}", agent.id)),
        }
    }
    plan
}

/// The persona files as one instructions text, each under the name of the file it came from.
fn instructions(agent: &Agent) -> String {
    let mut parts = vec![format!(
        "Imported from OpenClaw (workspace {}).",
        agent.workspace.display()
    )];
    for file in PERSONA_FILES {
        if let Some((_, text)) = agent.persona.iter().find(|(name, _)| name == file) {
            parts.push(format!("## From {file}\n\n{text}"));
        }
    }
    parts.join("\n\n")
}

fn agent_file(
    installation: &Installation,
    agent: &Agent,
    name: &str,
    providers: &BTreeSet<String>,
    skills: &BTreeMap<String, Option<String>>,
    existing: &Existing<'_>,
    plan: &mut FilePlan,
) -> Result<String, String> {
    let Some((provider, model)) = agent
        .model
        .as_deref()
        .and_then(|model| model.split_once('/'))
    else {
        return Err("it names no model (`provider/model`) in OpenClaw's config".to_string());
    };
    if !providers.contains(provider) {
        return Err(format!(
            "its provider `{provider}` could not be carried over (see above)"
        ));
    }
    let mut changes = vec![
        ("provider".to_string(), Setting::Text(provider.to_string())),
        ("model".to_string(), Setting::Text(model.to_string())),
        (
            "instructions".to_string(),
            Setting::Text(instructions(agent)),
        ),
    ];
    if let Some(display) = &agent.display_name {
        changes.push(("description".to_string(), Setting::Text(display.clone())));
    }
    let enabled: Vec<String> = skills
        .iter()
        .filter(|(skill, owner)| match owner {
            Some(owner) => owner == &agent.id,
            None => agent
                .skills
                .as_ref()
                .is_none_or(|list| list.contains(skill)),
        })
        .map(|(skill, _)| skill.clone())
        .collect();
    if !enabled.is_empty() {
        changes.push(("skills".to_string(), Setting::Texts(enabled.clone())));
    }
    let bot = telegram_changes(installation, agent, name, existing, plan, &mut changes);
    let header = format!(
        "# The agent `{name}`, imported from OpenClaw ({}) by `clawvisor import openclaw`.\n\
         name = \"{name}\"\n",
        installation.dir.display()
    );
    let text = edit::edit_agent(&header, &changes).map_err(|error| error.to_string())?;
    let text = add_fallbacks(&text, agent, providers, plan)?;
    plan.created(format!(
        "agent {name}{}: {provider}/{model}, instructions from {}{}{bot}",
        agent
            .display_name
            .as_ref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default(),
        if agent.persona.is_empty() {
            "nothing (no persona files)".to_string()
        } else {
            agent
                .persona
                .iter()
                .map(|(file, _)| file.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        },
        if enabled.is_empty() {
            String::new()
        } else {
            format!(", skills {}", enabled.join(", "))
        },
    ));
    Ok(text)
}

/// `[[fallback]]` tables for the fallbacks whose provider is usable.
fn add_fallbacks(
    text: &str,
    agent: &Agent,
    providers: &BTreeSet<String>,
    plan: &mut FilePlan,
) -> Result<String, String> {
    let mut document: DocumentMut = text
        .parse()
        .map_err(|error: toml_edit::TomlError| error.to_string())?;
    let mut tables = toml_edit::ArrayOfTables::new();
    for fallback in &agent.fallbacks {
        match fallback.split_once('/') {
            Some((provider, model)) if providers.contains(provider) => {
                let mut table = toml_edit::Table::new();
                table["provider"] = toml_edit::value(provider);
                table["model"] = toml_edit::value(model);
                tables.push(table);
            }
            _ => plan.skipped.push(format!(
                "fallback model {fallback} of agent {}: its provider could not be carried over",
                agent.id
            )),
        }
    }
    if !tables.is_empty() {
        document.insert("fallback", toml_edit::Item::ArrayOfTables(tables));
    }
    Ok(document.to_string())
}

/// The agent's Telegram bot: token variable and allowlist; returns the words for the report.
fn telegram_changes(
    installation: &Installation,
    agent: &Agent,
    name: &str,
    existing: &Existing<'_>,
    plan: &mut FilePlan,
    changes: &mut Vec<(String, Setting)>,
) -> String {
    let mut bots = installation
        .bots
        .iter()
        .filter(|bot| bot.agent.as_deref() == Some(agent.id.as_str()));
    let Some(bot) = bots.next() else {
        return String::new();
    };
    for other in bots {
        plan.skipped.push(format!(
            "Telegram account {} of agent {}: a clawvisor agent has one bot (kept account {})",
            other.account, agent.id, bot.account
        ));
    }
    if !bot.enabled {
        plan.skipped.push(format!(
            "Telegram account {}: it is disabled in OpenClaw",
            bot.account
        ));
        return String::new();
    }
    let upper = name.to_ascii_uppercase().replace('-', "_");
    let var = match &bot.token {
        KeyValue::Env(var) => var.clone(),
        _ => format!("TELEGRAM_{upper}_BOT_TOKEN"),
    };
    let secret = match &bot.token {
        KeyValue::Literal(secret) => Some(secret.clone()),
        KeyValue::Env(_) => None,
        KeyValue::None => {
            plan.skipped.push(format!(
                "Telegram account {}: it has no bot token",
                bot.account
            ));
            return String::new();
        }
    };
    let key = key_line("token", &var, secret, existing, plan);
    let mut people = Vec::new();
    for entry in &bot.allow_from {
        let id = entry
            .trim_start_matches("telegram:")
            .trim_start_matches("tg:");
        match id.parse::<i64>() {
            Ok(id) if id > 0 => people.push(id),
            _ => plan.skipped.push(format!(
                "Telegram allowlist entry `{entry}` of account {}: clawvisor allows people by \
                 their numeric Telegram id; they can ask to be let in (pairing) instead",
                bot.account
            )),
        }
    }
    people.sort_unstable();
    people.dedup();
    changes.push(("telegram.token_env".to_string(), Setting::Text(var)));
    if !people.is_empty() {
        changes.push((
            "telegram.allow_users".to_string(),
            Setting::Integers(people.clone()),
        ));
    }
    format!(
        ", Telegram bot (account {}{key}), {} allowed",
        bot.account,
        count(people.len(), "person", "people")
    )
}

/// Skills to copy: name → `None` (shared) or `Some(agent id)` (an agent's workspace skill).
fn plan_skills(
    installation: &Installation,
    existing: &Existing<'_>,
    plan: &mut FilePlan,
) -> BTreeMap<String, Option<String>> {
    let mut skills = BTreeMap::new();
    let folders = installation
        .skills
        .iter()
        .map(|folder| (None, folder))
        .chain(installation.agents.iter().flat_map(|agent| {
            agent
                .workspace_skills
                .iter()
                .map(|folder| (Some(agent.id.clone()), folder))
        }));
    for (owner, folder) in folders {
        let text = std::fs::read_to_string(folder.dir.join("SKILL.md")).unwrap_or_default();
        let skill = match crate::skills::parse(&text, &folder.dir, crate::skills::Level::Installed)
        {
            Ok(skill) => skill,
            Err(reason) => {
                plan.skipped
                    .push(format!("skill {}: {reason}", folder.dir.display()));
                continue;
            }
        };
        let name = skill.name.clone();
        if skills.contains_key(&name) {
            plan.skipped.push(format!(
                "skill {}: a skill named {name} is already imported",
                folder.dir.display()
            ));
            continue;
        }
        if existing.skills_dir.join(&name).exists() {
            plan.kept(format!("skill {name}: already installed, left as it is"));
        } else {
            plan.skills.push((name.clone(), folder.dir.clone()));
            plan.created(format!("skill {name} ({})", skill.description));
        }
        skills.insert(name, owner);
    }
    skills
}

/// The words of an OpenClaw schedule as clawvisor's (kind, expression, zone), or why not.
pub fn schedule_of(schedule: &Value) -> Result<(String, String, Option<String>), String> {
    let zone = schedule
        .get("tz")
        .and_then(Value::as_str)
        .map(str::to_string);
    match schedule.get("kind").and_then(Value::as_str) {
        Some("cron") => schedule
            .get("expr")
            .and_then(Value::as_str)
            .map(|expr| ("cron".to_string(), expr.to_string(), zone))
            .ok_or_else(|| "its cron schedule has no expression".to_string()),
        Some("every") => {
            let ms = schedule.get("everyMs").and_then(Value::as_u64).unwrap_or(0);
            if ms < 1000 {
                return Err("its interval is missing or under a second".to_string());
            }
            let interval = std::time::Duration::from_secs(ms / 1000);
            Ok((
                "every".to_string(),
                humantime::format_duration(interval).to_string(),
                None,
            ))
        }
        Some("at") => schedule
            .get("at")
            .and_then(Value::as_str)
            .map(|at| ("at".to_string(), at.to_string(), zone))
            .ok_or_else(|| "its one-time schedule has no time".to_string()),
        Some(other) => Err(format!(
            "it fires on `{other}` events (a watched command), which clawvisor schedules do not do"
        )),
        None => Err("it has no schedule".to_string()),
    }
}

/// The prompt of a job, or why it cannot be one.
pub fn prompt_of(payload: &Value) -> Result<String, String> {
    let field = match payload.get("kind").and_then(Value::as_str) {
        Some("agentTurn") => "message",
        Some("systemEvent") => "text",
        Some(other) => {
            return Err(format!(
                "it runs a `{other}` payload directly; clawvisor schedules ask an agent. Recreate \
                 it as a prompt with `clawvisor jobs add`"
            ));
        }
        None => return Err("it has no payload".to_string()),
    };
    payload
        .get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
        .ok_or_else(|| format!("its payload has no `{field}`"))
}
