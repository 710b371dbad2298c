//! The database part of an import's plan (memories and schedules, checked against the rows
//! already there) and carrying out a whole plan: files first (config, agents, secrets, skills),
//! then one write transaction for memories, schedules and the audit row.
//!
//! Invariant: memories and schedules are written through the store's writer in one transaction
//! with their audit row, so an interrupted import leaves all of them or none; a schedule is made
//! by the jobs rules (`jobs::NewJob::into_row`, the per-agent limit), as `clawvisor jobs add`
//! makes one.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use serde_json::{Value, json};

use super::Target;
use super::openclaw::Installation;
use super::plan::{self, FilePlan, Line};
use crate::config::{self, LoadedConfig, Overrides};
use crate::jobs::NewJob;
use crate::store::memory::NewFact;
use crate::store::schedules::JobRow;
use crate::store::{Store, StoreOptions};

/// Who the audit row names.
const OPERATOR: &str = "operator (cli import)";

/// Memories and schedules to add.
#[derive(Debug, Default)]
pub struct DataPlan {
    /// Each fact with the time it was written down.
    pub memories: Vec<(NewFact, i64)>,
    pub jobs: Vec<JobRow>,
    pub lines: Vec<Line>,
    pub skipped: Vec<String>,
}

/// Memories and schedules not there yet, by the rules of `plan.rs`.
pub fn plan_data(installation: &Installation, files: &FilePlan, loaded: &LoadedConfig) -> DataPlan {
    let mut data = DataPlan::default();
    let database = loaded.config.db_path();
    let conn = database
        .is_file()
        .then(|| {
            rusqlite::Connection::open_with_flags(
                &database,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok()
        })
        .flatten();
    plan_memories(installation, files, conn.as_ref(), &mut data);
    plan_jobs(installation, files, loaded, conn.as_ref(), &mut data);
    data
}

fn plan_memories(
    installation: &Installation,
    files: &FilePlan,
    conn: Option<&rusqlite::Connection>,
    data: &mut DataPlan,
) {
    let mut seen = BTreeSet::new();
    for agent in &installation.agents {
        let Some(owner) = files.names.get(&agent.id) else {
            if !agent.memories.is_empty() {
                data.skipped.push(format!(
                    "{} memories of agent {}: the agent was not carried over",
                    agent.memories.len(),
                    agent.id
                ));
            }
            continue;
        };
        let (mut added, mut present, mut sources) = (0, 0, BTreeSet::new());
        for memory in &agent.memories {
            let key = (owner.clone(), memory.text.trim().to_lowercase());
            let stored = conn.is_some_and(|conn| {
                crate::store::memory::same_text(conn, owner, &memory.text)
                    .ok()
                    .flatten()
                    .is_some()
            });
            if stored || !seen.insert(key) {
                present += 1;
                continue;
            }
            added += 1;
            sources.insert(memory.file.clone());
            data.memories.push((
                NewFact {
                    owner: owner.clone(),
                    class: "durable".into(),
                    sensitivity: "normal".into(),
                    source: "imported".into(),
                    chat: None,
                    text: memory.text.clone(),
                    run_id: None,
                    message_id: None,
                    surprise: None,
                    embedding: None,
                },
                memory.date_ms,
            ));
        }
        if added > 0 {
            let sources: Vec<String> = sources.into_iter().collect();
            data.lines.push(Line {
                created: true,
                text: format!(
                    "{} for {owner} (from {})",
                    plan::count(added, "memory", "memories"),
                    sources.join(", ")
                ),
            });
        }
        if present > 0 {
            data.lines.push(Line {
                created: false,
                text: format!(
                    "{} for {owner}: already there",
                    plan::count(present, "memory", "memories")
                ),
            });
        }
    }
}

/// The live jobs' (agent, name) already in the database.
fn live_jobs(conn: Option<&rusqlite::Connection>) -> BTreeSet<(String, String)> {
    conn.and_then(|conn| crate::store::schedules::list_jobs(conn, None, false, 10_000).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|job| (job.agent, job.name))
        .collect()
}

fn plan_jobs(
    installation: &Installation,
    files: &FilePlan,
    loaded: &LoadedConfig,
    conn: Option<&rusqlite::Connection>,
    data: &mut DataPlan,
) {
    let live = live_jobs(conn);
    let now = crate::clock::now_ms();
    let sole_agent = (installation.agents.len() == 1).then(|| installation.agents[0].id.clone());
    for job in &installation.jobs {
        let what = format!("schedule \"{}\"", job.name);
        if let Some(key) = &job.declared {
            data.skipped.push(format!(
                "{what}: OpenClaw's own upkeep ({key}), not a schedule of yours; clawvisor does its \
                 own"
            ));
            continue;
        }
        let Some(agent) = job
            .agent
            .clone()
            .or_else(|| sole_agent.clone())
            .and_then(|id| files.names.get(&id).cloned())
        else {
            data.skipped
                .push(format!("{what}: its agent was not carried over"));
            continue;
        };
        if !job.enabled {
            data.skipped
                .push(format!("{what}: it is turned off in OpenClaw"));
            continue;
        }
        if live.contains(&(agent.clone(), job.name.clone())) {
            data.lines.push(Line {
                created: false,
                text: format!("{what} for {agent}: already there"),
            });
            continue;
        }
        match job_row(job, &agent, loaded, now) {
            Ok((row, note)) => {
                data.lines.push(Line {
                    created: true,
                    text: format!(
                        "{what} for {agent}: {} {} ({}){note}",
                        row.kind, row.expression, row.timezone
                    ),
                });
                data.jobs.push(row);
            }
            Err(reason) => data.skipped.push(format!("{what}: {reason}")),
        }
    }
}

/// A job's row and a note about where its answers go.
fn job_row(
    job: &super::openclaw::Job,
    agent: &str,
    loaded: &LoadedConfig,
    now: i64,
) -> Result<(JobRow, String), String> {
    let (kind, expression, zone) = plan::schedule_of(&job.schedule)?;
    let prompt = plan::prompt_of(&job.payload)?;
    // OpenClaw evaluates a cron expression without a zone in the host's zone: the daemon's.
    let timezone = zone
        .or_else(|| loaded.agent(agent).and_then(|spec| spec.timezone.clone()))
        .unwrap_or_else(|| loaded.timezone.zone.name().to_string());
    let delivery = job.delivery.as_ref();
    let channel = delivery
        .and_then(|d| d.get("channel"))
        .and_then(Value::as_str);
    let to = delivery.and_then(|d| d.get("to")).and_then(Value::as_str);
    let (target, note) = match (channel, to) {
        (Some("telegram"), Some(to)) => {
            match crate::domain::ChatKey::parse(&format!("tg:{}", to.trim())) {
                Some(chat) => (Some(chat.clone()), format!(", answers to {chat}")),
                None => (
                    None,
                    format!(", silent (the chat `{to}` is not a Telegram chat id)"),
                ),
            }
        }
        (Some(other), _) => (None, format!(", silent (its answers went to {other})")),
        _ => (None, ", silent".to_string()),
    };
    let new_job = NewJob {
        agent: agent.to_string(),
        name: job.name.clone(),
        prompt,
        target,
        kind,
        expression,
        timezone,
        missed_policy: String::new(),
        created_by: "operator".into(),
        created_in: None,
    };
    let (row, _) = new_job.into_row(&loaded.config.scheduler, now)?;
    Ok((row, note))
}

/// Writes the plan; returns the closing words.
pub async fn apply(
    target: &Target,
    overrides: &Overrides,
    files: FilePlan,
    data: DataPlan,
) -> Result<String, String> {
    let created_files = files.agent_files.len() + files.skills.len() + files.secrets.len();
    write_files(target, &files)?;
    let overrides = Overrides {
        config: Some(target.config_path.clone()),
        ..overrides.clone()
    };
    let loaded = config::load(&overrides)
        .map_err(|error| format!("the written config does not load: {error}"))?;
    let (memories, jobs) = (data.memories.len(), data.jobs.len());
    let nothing = created_files == 0
        && memories + jobs == 0
        && files.config_text.is_none()
        && target.config_exists;
    if !nothing {
        let imported = ImportedFiles {
            agents: files.names.values().cloned().collect(),
            skills: files.skills.iter().map(|(name, _)| name.clone()).collect(),
        };
        write_rows(&loaded, data, imported).await?;
    }
    Ok(if nothing {
        "Nothing new to import: everything above is already there.".to_string()
    } else {
        format!(
            "Imported {}, {}, {} and {}. Start the daemon with `clawvisor serve`.",
            plan::count(files.agent_files.len(), "agent", "agents"),
            plan::count(files.skills.len(), "skill", "skills"),
            plan::count(memories, "memory", "memories"),
            plan::count(jobs, "schedule", "schedules")
        )
    })
}

fn write_files(target: &Target, files: &FilePlan) -> Result<(), String> {
    let io =
        |path: &Path, error: std::io::Error| format!("cannot write {}: {error}", path.display());
    if let Some(parent) = target.config_path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| io(parent, error))?;
    }
    let config_text = files
        .config_text
        .clone()
        .or_else(|| (!target.config_exists).then(|| target.config_text.clone()));
    if let Some(text) = config_text {
        config::edit::write_atomically(&target.config_path, &text)
            .map_err(|error| io(&target.config_path, error))?;
    }
    std::fs::create_dir_all(&target.actors_dir).map_err(|error| io(&target.actors_dir, error))?;
    for (path, text) in &files.agent_files {
        config::edit::write_atomically(path, text).map_err(|error| io(path, error))?;
    }
    // Private, as `init` makes it: it holds the conversations and the keys.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&target.data_dir)
        .map_err(|error| io(&target.data_dir, error))?;
    for (name, secret) in &files.secrets {
        config::secrets_file::set(&target.data_dir, name, secret.expose())
            .map_err(|error| format!("cannot keep {name} in the secrets store: {error}"))?;
    }
    let skills_dir = target.data_dir.join("skills");
    for (name, from) in &files.skills {
        copy_skill(from, &skills_dir, name).map_err(|error| io(&skills_dir.join(name), error))?;
    }
    Ok(())
}

/// Copies a skill folder (regular files and folders; links are left out) into `<skills>/<name>`
/// through a temporary folder renamed into place.
fn copy_skill(from: &Path, skills_dir: &Path, name: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(skills_dir)?;
    let temporary = tempfile::Builder::new()
        .prefix(".import-")
        .tempdir_in(skills_dir)?;
    copy_tree(from, temporary.path())?;
    std::fs::rename(temporary.keep(), skills_dir.join(name))
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// What the files of an import brought, for its audit row.
struct ImportedFiles {
    agents: Vec<String>,
    skills: Vec<String>,
}

/// Memories and schedules in one transaction with the audit row (written for every import that
/// changed something, even one without rows: Studio's Overview knows by it that the import ran).
async fn write_rows(
    loaded: &LoadedConfig,
    data: DataPlan,
    imported: ImportedFiles,
) -> Result<(), String> {
    let path = loaded.config.db_path();
    let options = StoreOptions::from(&loaded.config);
    let store = tokio::task::spawn_blocking(move || Store::open(&path, options))
        .await
        .map_err(|error| format!("cannot open the database: {error}"))?
        .map_err(|error| format!("cannot open the database: {error}"))?;
    let max = u64::from(loaded.config.scheduler.max_jobs_per_agent);
    let result = store
        .write(move |conn| {
            let mut per_agent: BTreeMap<String, usize> = BTreeMap::new();
            for (fact, date_ms) in &data.memories {
                crate::store::memory::insert(conn, fact, *date_ms)?;
                *per_agent.entry(fact.owner.clone()).or_default() += 1;
            }
            let now = crate::clock::now_ms();
            let mut refused = Vec::new();
            let mut jobs = Vec::new();
            for row in &data.jobs {
                let live = crate::store::schedules::live_count(conn, &row.agent)?;
                if let Err(refusal) = crate::jobs::check::check_job_limit(&row.agent, live, max) {
                    refused.push(format!("schedule \"{}\": {refusal}", row.name));
                    continue;
                }
                let id = crate::store::schedules::insert_job(conn, row, now)?;
                jobs.push(json!({"id": id, "agent": row.agent, "name": row.name}));
            }
            crate::audit::append(
                conn,
                OPERATOR,
                crate::studio::import_hint::IMPORT_ACTION,
                "openclaw",
                &json!({
                    "agents": imported.agents,
                    "skills": imported.skills,
                    "memories": per_agent,
                    "jobs": jobs,
                }),
            )?;
            Ok(refused)
        })
        .await;
    store.stop_writer();
    let refused =
        result.map_err(|error| format!("cannot write the memories and schedules: {error}"))?;
    for line in refused {
        println!("Not carried over: {line}");
    }
    Ok(())
}
