//! Reading an OpenClaw state directory (`~/.openclaw`, layout of OpenClaw 2026.9) into plain
//! values: nothing here writes, and nothing here knows clawvisor's config.
//!
//! What is read, as OpenClaw 2026.9 keeps it:
//! - `openclaw.json` (JSON5): `agents.entries.<id>` (or the older `agents.list`) with
//!   `agents.defaults`, `models.providers.<name>` (`baseUrl`, `api`, `apiKey`),
//!   `channels.telegram` (`botToken` / `tokenFile`, `allowFrom`, `accounts.<id>`) and the
//!   `bindings` that route a Telegram account to an agent;
//! - each agent's workspace (`workspace`, default `<state>/workspace`): the persona files
//!   (`SOUL.md`, `IDENTITY.md`, `AGENTS.md`, `USER.md`), long-term memory (`MEMORY.md`) and daily
//!   notes (`memory/YYYY-MM-DD.md`), and its `skills/`;
//! - shared skills (`<state>/skills/<name>/SKILL.md`);
//! - automation jobs: the `cron_jobs` table of the state database `state/openclaw.sqlite`
//!   (opened read-only), else the legacy `cron/jobs.json`.
//!
//! Invariant: a key or token read here stays inside a [`KeyValue::Literal`] holding a
//! [`Secret`], whose `Debug` never shows it; nothing here prints.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::secrets::Secret;

/// The persona files of a workspace, in the order they become the agent's instructions.
pub const PERSONA_FILES: [&str; 4] = ["SOUL.md", "IDENTITY.md", "AGENTS.md", "USER.md"];

/// What an OpenClaw state directory holds.
#[derive(Debug)]
pub struct Installation {
    pub dir: PathBuf,
    pub agents: Vec<Agent>,
    pub providers: Vec<Provider>,
    pub bots: Vec<Bot>,
    pub jobs: Vec<Job>,
    /// Shared skills (`<state>/skills`).
    pub skills: Vec<SkillFolder>,
    /// The version that last wrote the config (`meta.lastTouchedVersion`), when recorded.
    pub version: Option<String>,
    /// Things found but not readable: (what, why).
    pub unreadable: Vec<(String, String)>,
}

/// One agent (`agents.entries.<id>`).
#[derive(Debug)]
pub struct Agent {
    pub id: String,
    /// `name` or the name in `IDENTITY.md`.
    pub display_name: Option<String>,
    pub workspace: PathBuf,
    /// `provider/model`.
    pub model: Option<String>,
    pub fallbacks: Vec<String>,
    /// The skill allowlist (`None`: every skill).
    pub skills: Option<Vec<String>>,
    /// (file name, text) of the persona files found.
    pub persona: Vec<(String, String)>,
    pub memories: Vec<Memory>,
    pub workspace_skills: Vec<SkillFolder>,
}

/// One remembered item of a memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    pub text: String,
    /// When it was written down: the daily note's date (noon UTC), else the file's time.
    pub date_ms: i64,
    /// The file it came from, relative to the workspace.
    pub file: String,
}

/// A key or token as the config gives it.
#[derive(Debug)]
pub enum KeyValue {
    /// Written in the file (or a `tokenFile`): goes to the secrets store.
    Literal(Secret),
    /// `${VAR}` or `{ source: "env", id: "VAR" }`: the variable to set.
    Env(String),
    None,
}

/// `models.providers.<name>`.
#[derive(Debug)]
pub struct Provider {
    pub name: String,
    /// `api`: `anthropic-messages`, `openai-completions`, ... (empty: not given).
    pub api: String,
    pub base_url: String,
    pub key: KeyValue,
}

/// One Telegram bot account.
#[derive(Debug)]
pub struct Bot {
    pub account: String,
    /// The agent its binding routes to.
    pub agent: Option<String>,
    pub token: KeyValue,
    pub allow_from: Vec<String>,
    pub enabled: bool,
}

/// One automation job (a `cron_jobs` row's `job_json`).
#[derive(Debug)]
pub struct Job {
    pub name: String,
    /// A job OpenClaw declares itself (heartbeat, skill reviews, memory upkeep): its
    /// `declaration_key`. Users' jobs have none.
    pub declared: Option<String>,
    pub enabled: bool,
    pub agent: Option<String>,
    pub schedule: Value,
    pub payload: Value,
    pub delivery: Option<Value>,
}

/// A skill folder (its `SKILL.md` inside).
#[derive(Debug, Clone)]
pub struct SkillFolder {
    pub dir: PathBuf,
}

/// Why the directory could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(
        "no OpenClaw installation at {}: it has no openclaw.json. Give the folder that holds it, \
         e.g. `clawvisor import openclaw /home/me/.openclaw`.",
        dir.display()
    )]
    Missing { dir: PathBuf },
    #[error("cannot read {}: {reason}. Fix the file (OpenClaw's `openclaw doctor` checks it) and run the import again.", path.display())]
    Config { path: PathBuf, reason: String },
}

/// Reads the state directory `dir`.
pub fn read(dir: &Path) -> Result<Installation, ReadError> {
    let config_path = dir.join("openclaw.json");
    if !config_path.is_file() {
        return Err(ReadError::Missing {
            dir: dir.to_path_buf(),
        });
    }
    let text = std::fs::read_to_string(&config_path).map_err(|error| ReadError::Config {
        path: config_path.clone(),
        reason: error.to_string(),
    })?;
    let config: Value = json5::from_str(&text).map_err(|error| ReadError::Config {
        path: config_path.clone(),
        reason: format!("not valid JSON5 ({error})"),
    })?;
    let mut unreadable = Vec::new();
    let agents = read_agents(dir, &config, &mut unreadable);
    let jobs = read_jobs(dir, &mut unreadable);
    Ok(Installation {
        dir: dir.to_path_buf(),
        providers: read_providers(&config),
        bots: read_bots(dir, &config, &agents, &mut unreadable),
        skills: skill_folders(&dir.join("skills")),
        version: text_at(&config, &["meta", "lastTouchedVersion"]),
        agents,
        jobs,
        unreadable,
    })
}

fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, key| value.get(key))
}

fn text_at(value: &Value, path: &[&str]) -> Option<String> {
    at(value, path)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
}

/// A path as OpenClaw writes it: `~/.openclaw/...` is inside the state directory being imported
/// (which may have been copied elsewhere), `~/...` is in `$HOME`, a relative path is relative to
/// the state directory. OpenClaw's own commands write absolute paths (`/home/sam/.openclaw/
/// workspace`): one that does not exist (the directory was moved or copied) is read inside the
/// state directory being imported when the part after `/.openclaw/` is there.
pub fn resolve_path(state_dir: &Path, text: &str) -> PathBuf {
    let path = Path::new(text);
    if path.is_absolute() && !path.exists() {
        if let Some((_, rest)) = text.rsplit_once("/.openclaw/") {
            let inside = state_dir.join(rest);
            if inside.exists() {
                return inside;
            }
        }
        return path.to_path_buf();
    }
    if let Some(rest) = text.strip_prefix("~/.openclaw/") {
        return state_dir.join(rest);
    }
    if text == "~/.openclaw" {
        return state_dir.to_path_buf();
    }
    if let Some(rest) = text.strip_prefix("~/") {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        return home.join(rest);
    }
    state_dir.join(text)
}

/// `"provider/model"` or `{ primary, fallbacks }`.
fn model_of(value: Option<&Value>) -> (Option<String>, Vec<String>) {
    match value {
        Some(Value::String(text)) => (Some(text.trim().to_string()), Vec::new()),
        Some(Value::Object(object)) => (
            object
                .get("primary")
                .and_then(Value::as_str)
                .map(str::to_string),
            object
                .get("fallbacks")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => (None, Vec::new()),
    }
}

/// The agents' entries: `agents.entries` (2026.9) or `agents.list` (older), else the one
/// implicit agent `main`.
fn agent_entries(config: &Value) -> Vec<(String, Value)> {
    if let Some(entries) = at(config, &["agents", "entries"]).and_then(Value::as_object) {
        return entries
            .iter()
            .map(|(id, entry)| (id.clone(), entry.clone()))
            .collect();
    }
    if let Some(list) = at(config, &["agents", "list"]).and_then(Value::as_array) {
        return list
            .iter()
            .filter_map(|entry| Some((entry.get("id")?.as_str()?.to_string(), entry.clone())))
            .collect();
    }
    vec![("main".to_string(), Value::Null)]
}

fn read_agents(dir: &Path, config: &Value, unreadable: &mut Vec<(String, String)>) -> Vec<Agent> {
    let defaults = at(config, &["agents", "defaults"])
        .cloned()
        .unwrap_or(Value::Null);
    let entries = agent_entries(config);
    let only_one = entries.len() == 1;
    entries
        .into_iter()
        .map(|(id, entry)| {
            let workspace = text_at(&entry, &["workspace"])
                .or_else(|| {
                    only_one
                        .then(|| text_at(&defaults, &["workspace"]))
                        .flatten()
                })
                .map(|text| resolve_path(dir, &text))
                .unwrap_or_else(|| match id.as_str() {
                    "main" => dir.join("workspace"),
                    _ => dir.join(format!("workspace-{id}")),
                });
            let (model, fallbacks) = match entry.get("model") {
                Some(model) => model_of(Some(model)),
                None => model_of(defaults.get("model")),
            };
            let skills = entry
                .get("skills")
                .or_else(|| defaults.get("skills"))
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                });
            let persona = read_persona(&workspace);
            // `agents add` writes the id as `name` and the chosen name as `identity.name`.
            let display_name = text_at(&entry, &["identity", "name"])
                .or_else(|| text_at(&entry, &["name"]))
                .or_else(|| identity_name(&persona));
            let memories = read_memories(&workspace, unreadable);
            Agent {
                workspace_skills: skill_folders(&workspace.join("skills")),
                id,
                display_name,
                workspace,
                model,
                fallbacks,
                skills,
                persona,
                memories,
            }
        })
        .collect()
}

fn read_persona(workspace: &Path) -> Vec<(String, String)> {
    PERSONA_FILES
        .iter()
        .filter_map(|name| {
            let text = std::fs::read_to_string(workspace.join(name)).ok()?;
            let text = text.trim();
            (!text.is_empty()).then(|| (name.to_string(), text.to_string()))
        })
        .collect()
}

/// `- **Name:** Ada` in `IDENTITY.md`.
fn identity_name(persona: &[(String, String)]) -> Option<String> {
    let (_, text) = persona.iter().find(|(name, _)| name == "IDENTITY.md")?;
    text.lines().find_map(|line| {
        let rest = line.trim().trim_start_matches(['-', '*', ' ']);
        let rest = rest.strip_prefix("**Name:**")?.trim();
        (!rest.is_empty() && !rest.starts_with('_')).then(|| rest.to_string())
    })
}

fn read_memories(workspace: &Path, unreadable: &mut Vec<(String, String)>) -> Vec<Memory> {
    let mut memories = Vec::new();
    for name in ["MEMORY.md", "memory.md"] {
        let path = workspace.join(name);
        if let Ok(text) = std::fs::read_to_string(&path) {
            let date_ms = modified_ms(&path);
            memories.extend(items(&text).into_iter().map(|text| Memory {
                text,
                date_ms,
                file: name.to_string(),
            }));
            break;
        }
    }
    let Ok(entries) = std::fs::read_dir(workspace.join("memory")) else {
        return memories;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    files.sort();
    for path in files {
        let file_name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let date_ms = note_date_ms(&file_name).unwrap_or_else(|| modified_ms(&path));
        match std::fs::read_to_string(&path) {
            Ok(text) => memories.extend(items(&text).into_iter().map(|text| Memory {
                text,
                date_ms,
                file: format!("memory/{file_name}"),
            })),
            Err(error) => unreadable.push((path.display().to_string(), error.to_string())),
        }
    }
    memories
}

/// Noon UTC of the date a daily note's name starts with (`2026-09-14.md`, `2026-09-14-trip.md`).
fn note_date_ms(file_name: &str) -> Option<i64> {
    let date = chrono::NaiveDate::parse_from_str(file_name.get(..10)?, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(12, 0, 0)?.and_utc().timestamp_millis())
}

fn modified_ms(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(crate::clock::now_ms, |since| since.as_millis() as i64)
}

/// The items of a memory file: each list item, and each paragraph of other text; headings,
/// comments and code blocks are left out.
pub fn items(text: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut in_code = false;
    let flush = |paragraph: &mut Vec<&str>, items: &mut Vec<String>| {
        if !paragraph.is_empty() {
            items.push(paragraph.join(" "));
            paragraph.clear();
        }
    };
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            in_code = !in_code;
            flush(&mut paragraph, &mut items);
            continue;
        }
        if in_code || line.starts_with("<!--") {
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line == "---" {
            flush(&mut paragraph, &mut items);
            continue;
        }
        let bullet = ["- ", "* ", "+ "]
            .iter()
            .find_map(|marker| line.strip_prefix(marker));
        match bullet {
            Some(item) => {
                flush(&mut paragraph, &mut items);
                let item = item.trim_start_matches("[ ] ").trim_start_matches("[x] ");
                if !item.trim().is_empty() {
                    items.push(item.trim().to_string());
                }
            }
            None => paragraph.push(line),
        }
    }
    flush(&mut paragraph, &mut items);
    items
}

/// A key as the config gives it: a literal, `${VAR}`, or a SecretRef object.
fn key_value(value: Option<&Value>) -> KeyValue {
    match value {
        Some(Value::String(text)) => {
            let text = text.trim();
            if let Some(var) = text
                .strip_prefix("${")
                .and_then(|rest| rest.strip_suffix('}'))
            {
                KeyValue::Env(var.to_string())
            } else if text.is_empty() {
                KeyValue::None
            } else {
                KeyValue::Literal(Secret::new(text))
            }
        }
        Some(Value::Object(object))
            if object.get("source").and_then(Value::as_str) == Some("env") =>
        {
            object
                .get("id")
                .and_then(Value::as_str)
                .map_or(KeyValue::None, |var| KeyValue::Env(var.to_string()))
        }
        _ => KeyValue::None,
    }
}

fn read_providers(config: &Value) -> Vec<Provider> {
    let Some(providers) = at(config, &["models", "providers"]).and_then(Value::as_object) else {
        return Vec::new();
    };
    providers
        .iter()
        .map(|(name, provider)| Provider {
            name: name.clone(),
            api: text_at(provider, &["api"]).unwrap_or_default(),
            base_url: text_at(provider, &["baseUrl"]).unwrap_or_default(),
            key: key_value(provider.get("apiKey")),
        })
        .collect()
}

fn read_bots(
    dir: &Path,
    config: &Value,
    agents: &[Agent],
    unreadable: &mut Vec<(String, String)>,
) -> Vec<Bot> {
    let Some(telegram) = at(config, &["channels", "telegram"]) else {
        return Vec::new();
    };
    let root_allow = strings(telegram.get("allowFrom"));
    let mut accounts: Vec<(String, &Value)> = Vec::new();
    if telegram.get("botToken").is_some() || telegram.get("tokenFile").is_some() {
        accounts.push(("default".to_string(), telegram));
    }
    if let Some(map) = telegram.get("accounts").and_then(Value::as_object) {
        accounts.extend(map.iter().map(|(id, account)| (id.clone(), account)));
    }
    let bindings: Vec<&Value> = config
        .get("bindings")
        .and_then(Value::as_array)
        .map(|list| list.iter().collect())
        .unwrap_or_default();
    let single = (accounts.len() == 1).then_some(());
    accounts
        .into_iter()
        .map(|(account, value)| {
            let bound = bindings.iter().find_map(|binding| {
                let matched = binding.get("match")?;
                (matched.get("channel")?.as_str()? == "telegram"
                    && matched
                        .get("accountId")
                        .and_then(Value::as_str)
                        .map_or(account == "default" || single.is_some(), |id| {
                            id == account || id == "*"
                        }))
                .then(|| binding.get("agentId")?.as_str().map(str::to_string))
                .flatten()
            });
            let agent = bound.or_else(|| (agents.len() == 1).then(|| agents[0].id.clone()));
            let token = match (value.get("botToken"), text_at(value, &["tokenFile"])) {
                (Some(token), _) => key_value(Some(token)),
                (None, Some(file)) => {
                    let path = resolve_path(dir, &file);
                    match std::fs::read_to_string(&path) {
                        Ok(token) => key_value(Some(&Value::String(token))),
                        Err(error) => {
                            unreadable.push((path.display().to_string(), error.to_string()));
                            KeyValue::None
                        }
                    }
                }
                (None, None) => KeyValue::None,
            };
            let own_allow = strings(value.get("allowFrom"));
            Bot {
                agent,
                token,
                allow_from: if own_allow.is_empty() {
                    root_allow.clone()
                } else {
                    own_allow
                },
                enabled: value
                    .get("enabled")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                account,
            }
        })
        .collect()
}

/// Strings and numbers of a list, as text.
fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|item| match item {
                    Value::String(text) => Some(text.trim().to_string()),
                    Value::Number(number) => Some(number.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn skill_folders(dir: &Path) -> Vec<SkillFolder> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut folders: Vec<SkillFolder> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| SkillFolder { dir: entry.path() })
        .filter(|folder| folder.dir.join("SKILL.md").is_file())
        .collect();
    folders.sort_by(|a, b| a.dir.cmp(&b.dir));
    folders
}

/// The jobs of the state database (read-only), else of the legacy `cron/jobs.json`.
fn read_jobs(dir: &Path, unreadable: &mut Vec<(String, String)>) -> Vec<Job> {
    let database = dir.join("state").join("openclaw.sqlite");
    if database.is_file() {
        return match jobs_from_database(&database) {
            Ok(jobs) => jobs,
            Err(error) => {
                unreadable.push((database.display().to_string(), error.to_string()));
                Vec::new()
            }
        };
    }
    let legacy = dir.join("cron").join("jobs.json");
    let Ok(text) = std::fs::read_to_string(&legacy) else {
        return Vec::new();
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(store) => store
            .get("jobs")
            .and_then(Value::as_array)
            .map(|jobs| jobs.iter().map(job_from_json).collect())
            .unwrap_or_default(),
        Err(error) => {
            unreadable.push((legacy.display().to_string(), error.to_string()));
            Vec::new()
        }
    }
}

fn jobs_from_database(path: &Path) -> rusqlite::Result<Vec<Job>> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let present: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cron_jobs')",
        [],
        |row| row.get(0),
    )?;
    if !present {
        return Ok(Vec::new());
    }
    let mut statement = conn.prepare(
        "SELECT name, enabled, agent_id, job_json, declaration_key FROM cron_jobs
         ORDER BY sort_order, job_id",
    )?;
    let rows = statement.query_map([], |row| {
        let name: String = row.get(0)?;
        let enabled: i64 = row.get(1)?;
        let agent: Option<String> = row.get(2)?;
        let json: String = row.get(3)?;
        let declared: Option<String> = row.get(4)?;
        Ok((name, enabled, agent, json, declared))
    })?;
    let mut jobs = Vec::new();
    for row in rows {
        let (name, enabled, agent, json, declared) = row?;
        let value: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
        let mut job = job_from_json(&value);
        job.name = name;
        job.declared = declared.or(job.declared);
        job.enabled = enabled != 0;
        job.agent = agent.or(job.agent);
        jobs.push(job);
    }
    Ok(jobs)
}

fn job_from_json(value: &Value) -> Job {
    Job {
        name: text_at(value, &["name"]).unwrap_or_default(),
        declared: text_at(value, &["declarationKey"]),
        enabled: value
            .get("enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        agent: text_at(value, &["agentId"]),
        schedule: value.get("schedule").cloned().unwrap_or(Value::Null),
        payload: value.get("payload").cloned().unwrap_or(Value::Null),
        delivery: value.get("delivery").cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_list_entries_and_paragraphs_without_headings() {
        let text =
            "# Title\n\n- one\n* two\n\nA paragraph\ncontinued.\n\n```\ncode\n```\n<!-- c -->\n";
        assert_eq!(items(text), vec!["one", "two", "A paragraph continued."]);
    }

    #[test]
    fn a_daily_note_is_dated_by_its_name() {
        let ms = note_date_ms("2026-09-14.md").unwrap();
        assert_eq!(
            chrono::DateTime::from_timestamp_millis(ms)
                .unwrap()
                .to_rfc3339(),
            "2026-09-14T12:00:00+00:00"
        );
        assert_eq!(note_date_ms("notes.md"), None);
    }
}
