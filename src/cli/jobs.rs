//! `clawvisor jobs list | add | pause | resume | rm | preview`: the scheduler's jobs from the
//! terminal.
//!
//! While a daemon runs, every command goes through its API (`/api/v1/schedules`), so the
//! scheduler that keeps the jobs in memory makes the change, arms its timer and audits it. While
//! it is stopped (or only `clawvisor chat`, which runs no scheduler, runs), the command works on
//! the database with the same checks the scheduler makes (`NewJob::into_row`, the job limit) and
//! the same transitions (`StatusChange::decide`), each change written with its audit row in one
//! transaction; the scheduler loads the jobs at its next boot (`jobs_to_load`), so a job added
//! meanwhile fires at its next time and a paused one stays quiet. `preview` needs no daemon: it
//! is the schedule math the scheduler runs, in the daemon's zone unless `--tz`.

use std::process::ExitCode;

use serde_json::{Value, json};

use super::daemon_link::{self, Api, Daemon, LinkError};
use super::{JobsCommand, open_existing};
use crate::config::LoadedConfig;
use crate::jobs::NewJob;
use crate::jobs::check::check_job_limit;
use crate::jobs::status::StatusChange;
use crate::schedule::format::{format_local, zone_of};
use crate::schedule::{ScheduleSpec, parse_timezone};
use crate::store::Store;
use crate::store::schedules::{self as queries, JobRow, JobRunStatus};

/// Who the audit log names for a change made here with the daemon stopped.
const OPERATOR: &str = "operator (cli)";
/// Fire times `preview` prints unless `--count`.
const PREVIEW_DEFAULT: usize = 5;
/// The most fire times `preview` prints.
const PREVIEW_MAX: usize = 50;

pub(super) async fn run(loaded: &LoadedConfig, command: JobsCommand) -> ExitCode {
    if let JobsCommand::Preview {
        schedule,
        tz,
        kind,
        count,
    } = &command
    {
        return preview(loaded, schedule, tz.as_deref(), kind.as_deref(), *count);
    }
    let daemon = match daemon_link::find(loaded).await {
        Ok(daemon) => daemon,
        Err(error) => return fail(&error.to_string()),
    };
    let result = match daemon {
        Daemon::Running(api) => through_api(&api, loaded, command).await,
        Daemon::Stopped => {
            let store = match open_existing(loaded).await {
                Ok(store) => store,
                Err(code) => return code,
            };
            let result = offline(&store, loaded, command).await;
            store.stop_writer();
            result
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::FAILURE
}

/// `cron` for crontab lines and `@daily` & co., `every` for a duration (`15m`), else `at`.
fn infer_kind(expression: &str) -> &'static str {
    let trimmed = expression.trim();
    if trimmed.starts_with('@') || trimmed.split_whitespace().count() >= 5 {
        return "cron";
    }
    let every = ScheduleSpec::parse("every", trimmed, "UTC", chrono::Utc::now());
    if every.is_ok() { "every" } else { "at" }
}

fn preview(
    loaded: &LoadedConfig,
    expression: &str,
    tz: Option<&str>,
    kind: Option<&str>,
    count: Option<usize>,
) -> ExitCode {
    let zone = match tz.map(str::trim).filter(|name| !name.is_empty()) {
        Some(name) => match parse_timezone(name) {
            Ok(zone) => zone,
            Err(error) => return fail(&error.to_string()),
        },
        None => loaded.timezone.zone,
    };
    let kind = kind.unwrap_or_else(|| infer_kind(expression));
    let now = chrono::Utc::now();
    let spec = match ScheduleSpec::parse(kind, expression.trim(), zone.name(), now) {
        Ok(spec) => spec,
        Err(error) => return fail(&format!("`{}` ({kind}): {error}", expression.trim())),
    };
    let count = count.unwrap_or(PREVIEW_DEFAULT).clamp(1, PREVIEW_MAX);
    println!("{}", spec.describe_in(zone));
    let times = spec.preview(now, count);
    if times.is_empty() {
        println!("It would not run again after now.");
        return ExitCode::SUCCESS;
    }
    println!("Next runs ({}):", zone.name());
    for time in times {
        println!("  {}", format_local(time.timestamp_millis(), zone));
    }
    ExitCode::SUCCESS
}

/// One job as `list` prints it, from the API's JSON or a stored row.
struct JobLine {
    id: i64,
    agent: String,
    name: String,
    status: String,
    schedule: String,
    timezone: String,
    next_run_ms: Option<i64>,
    last_run_ms: Option<i64>,
    last_outcome: Option<String>,
    failing: bool,
    running: bool,
}

impl JobLine {
    fn from_json(job: &Value) -> JobLine {
        let text = |key: &str| job[key].as_str().unwrap_or_default().to_string();
        JobLine {
            id: job["id"].as_i64().unwrap_or_default(),
            agent: text("agent"),
            name: text("name"),
            status: text("status"),
            schedule: text("schedule"),
            timezone: text("timezone"),
            next_run_ms: job["next_run_ms"].as_i64(),
            last_run_ms: job["last_run_ms"].as_i64(),
            last_outcome: job["last_outcome"].as_str().map(str::to_string),
            failing: job["failing"].as_bool().unwrap_or_default(),
            running: job["running"].as_bool().unwrap_or_default(),
        }
    }

    fn from_row(row: &JobRow) -> JobLine {
        let anchor = crate::clock::to_datetime(row.anchor_ms);
        let schedule = match ScheduleSpec::parse(&row.kind, &row.expression, &row.timezone, anchor)
        {
            Ok(spec) => spec.describe_in(zone_of(&row.timezone)),
            Err(error) => format!("{} `{}` (does not read: {error})", row.kind, row.expression),
        };
        JobLine {
            id: row.id,
            agent: row.agent.clone(),
            name: row.name.clone(),
            status: row.status.as_str().to_string(),
            schedule,
            timezone: row.timezone.clone(),
            next_run_ms: row.next_run_ms,
            last_run_ms: row.last_run_ms,
            last_outcome: row.last_outcome.clone(),
            failing: row.failing,
            running: false,
        }
    }

    fn print(&self) {
        let zone = zone_of(&self.timezone);
        let mut flags = String::new();
        if self.failing {
            flags.push_str(" FAILING");
        }
        if self.running {
            flags.push_str(" running");
        }
        println!(
            "#{} {} [{}{flags}] \"{}\"",
            self.id, self.agent, self.status, self.name
        );
        println!("    schedule: {}", self.schedule);
        match self.next_run_ms {
            Some(ms) => println!("    next: {} ({})", format_local(ms, zone), zone.name()),
            None => println!("    next: none"),
        }
        match (self.last_run_ms, &self.last_outcome) {
            (Some(ms), outcome) => println!(
                "    last: {} at {}",
                outcome.as_deref().unwrap_or("running"),
                format_local(ms, zone)
            ),
            (None, Some(outcome)) => println!("    last: {outcome}"),
            (None, None) => println!("    last: never ran"),
        }
    }
}

fn print_jobs(jobs: &[JobLine]) {
    if jobs.is_empty() {
        println!("no jobs");
    }
    for job in jobs {
        job.print();
    }
}

/// A refusal of the daemon (a bad schedule, an unknown job) is the operator's to fix.
fn link_error(error: LinkError) -> String {
    match error.status() {
        Some(404) => format!("{error}; `clawvisor jobs list --all` shows the jobs"),
        _ => error.to_string(),
    }
}

async fn through_api(api: &Api, loaded: &LoadedConfig, command: JobsCommand) -> Result<(), String> {
    match command {
        JobsCommand::List { all } => {
            let answer = api.get("/api/v1/schedules").await.map_err(link_error)?;
            let jobs: Vec<JobLine> = answer["jobs"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter(|job| all || matches!(job["status"].as_str(), Some("active" | "paused")))
                .map(JobLine::from_json)
                .collect();
            print_jobs(&jobs);
            Ok(())
        }
        JobsCommand::Add {
            agent,
            schedule,
            prompt,
            tz,
            kind,
            name,
            missed,
            target,
        } => {
            if loaded.agent(&agent).is_none() {
                return Err(unknown_agent(loaded, &agent));
            }
            let kind = kind.unwrap_or_else(|| infer_kind(&schedule).to_string());
            let body = json!({
                "agent": agent, "name": name.unwrap_or_default(), "prompt": prompt.join(" "),
                "kind": kind, "expression": schedule, "timezone": tz.unwrap_or_default(),
                "missed_policy": missed.unwrap_or_default(), "target": target,
            });
            let job = api.post("/api/v1/schedules", body).await;
            print_answer("created", job)
        }
        JobsCommand::Pause { id } => {
            let job = api
                .post(&format!("/api/v1/schedules/{id}/pause"), json!({}))
                .await;
            print_answer("paused", job)
        }
        JobsCommand::Resume { id } => {
            let job = api
                .post(&format!("/api/v1/schedules/{id}/resume"), json!({}))
                .await;
            print_answer("resumed", job)
        }
        JobsCommand::Rm { id } => {
            let job = api.delete(&format!("/api/v1/schedules/{id}")).await;
            print_answer("cancelled", job)
        }
        JobsCommand::Preview { .. } => Ok(()),
    }
}

/// Prints the job the daemon answered with, or why it refused.
fn print_answer(what: &str, answer: Result<Value, LinkError>) -> Result<(), String> {
    let job = answer.map_err(link_error)?;
    print_changed(what, &JobLine::from_json(&job));
    Ok(())
}

fn print_changed(what: &str, job: &JobLine) {
    println!("Job #{} {what}.", job.id);
    job.print();
}

fn unknown_agent(loaded: &LoadedConfig, agent: &str) -> String {
    let names: Vec<&str> = loaded
        .agents
        .iter()
        .map(|spec| spec.name.as_str())
        .collect();
    format!(
        "no agent is named `{agent}` (the agents are: {})",
        names.join(", ")
    )
}

async fn offline(store: &Store, loaded: &LoadedConfig, command: JobsCommand) -> Result<(), String> {
    let now = crate::clock::now_ms();
    match command {
        JobsCommand::List { all } => {
            let rows = store
                .read(move |conn| queries::list_jobs(conn, None, all, 500))
                .await
                .map_err(|error| error.to_string())?;
            let jobs: Vec<JobLine> = rows.iter().map(JobLine::from_row).collect();
            print_jobs(&jobs);
            Ok(())
        }
        JobsCommand::Add {
            agent,
            schedule,
            prompt,
            tz,
            kind,
            name,
            missed,
            target,
        } => {
            let Some(spec) = loaded.agent(&agent) else {
                return Err(unknown_agent(loaded, &agent));
            };
            // Without a zone the job lives in the agent's (its file's, else the daemon's), as
            // when Studio creates it.
            let timezone = tz
                .filter(|zone| !zone.trim().is_empty())
                .or_else(|| spec.timezone.clone())
                .unwrap_or_else(|| loaded.timezone.zone.name().to_string());
            let target = match target.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(text) => Some(crate::domain::ChatKey::parse(text).ok_or_else(|| {
                    format!(
                        "`--target {text}` is not a chat (like `tg:12345`, `tg:-100123/7` for a forum topic, or `studio:operator`)"
                    )
                })?),
            };
            let new_job = NewJob {
                kind: kind.unwrap_or_else(|| infer_kind(&schedule).to_string()),
                agent,
                name: name.unwrap_or_default(),
                prompt: prompt.join(" "),
                target,
                expression: schedule,
                timezone,
                missed_policy: missed.unwrap_or_default(),
                created_by: "operator".into(),
                created_in: None,
            };
            let (row, _) = new_job.into_row(&loaded.config.scheduler, now)?;
            let max = u64::from(loaded.config.scheduler.max_jobs_per_agent);
            let stored = row.clone();
            let id = store
                .write(move |conn| {
                    let live = queries::live_count(conn, &stored.agent)?;
                    if let Err(refusal) = check_job_limit(&stored.agent, live, max) {
                        return Ok(Err(refusal));
                    }
                    let id = queries::insert_job(conn, &stored, now)?;
                    crate::audit::append(
                        conn,
                        OPERATOR,
                        "job.created",
                        &format!("job:{id}"),
                        &json!({"agent": stored.agent, "name": stored.name, "kind": stored.kind,
                                "expression": stored.expression, "timezone": stored.timezone}),
                    )?;
                    Ok(Ok(id))
                })
                .await
                .map_err(|error| error.to_string())??;
            let mut row = row;
            row.id = id;
            print_changed("created", &JobLine::from_row(&row));
            println!("(the daemon is stopped: the job is armed when it starts)");
            Ok(())
        }
        JobsCommand::Pause { id } => change_offline(store, id, StatusChange::Pause, now).await,
        JobsCommand::Resume { id } => change_offline(store, id, StatusChange::Resume, now).await,
        JobsCommand::Rm { id } => change_offline(store, id, StatusChange::Cancel, now).await,
        JobsCommand::Preview { .. } => Ok(()),
    }
}

/// Pause, resume or cancel with the daemon stopped, by the scheduler's own rules
/// (`StatusChange::decide` and `StatusTransition::write`, which the scheduler calls too): a
/// paused or cancelled job has no next time and its queued fires end as skipped; a resumed one's
/// next time is recomputed from its expression, and a one-shot whose time passed while it was
/// paused is recorded as missed and done. The change and its audit row are one transaction.
async fn change_offline(
    store: &Store,
    id: i64,
    change: StatusChange,
    now: i64,
) -> Result<(), String> {
    let changed = store
        .write(move |conn| {
            let Some(row) = queries::job(conn, id)? else {
                return Ok(Err(format!(
                    "there is no job #{id} (`clawvisor jobs list --all` shows the jobs)"
                )));
            };
            if !row.status.is_live() {
                return Ok(Err(format!(
                    "job #{id} is {} and cannot be changed; add a new one",
                    row.status
                )));
            }
            let anchor = crate::clock::to_datetime(row.anchor_ms);
            let spec = ScheduleSpec::parse(&row.kind, &row.expression, &row.timezone, anchor);
            if let (StatusChange::Resume, Err(error)) = (change, &spec) {
                return Ok(Err(format!(
                    "job #{id}'s schedule does not read ({error}); cancel it and add a new one"
                )));
            }
            let transition = match change.decide(&row, spec.as_ref().ok(), now) {
                Ok(transition) => transition,
                Err(error) => return Ok(Err(error)),
            };
            if !transition.changed {
                // Pausing a paused job or resuming an active one changes nothing, as in the
                // scheduler.
                return Ok(Ok(transition.row));
            }
            let queued: Vec<i64> = queries::open_runs(conn)?
                .into_iter()
                .filter(|open| open.job_id == id && open.status == JobRunStatus::Queued)
                .map(|open| open.id)
                .collect();
            transition.write(conn, &queued, now)?;
            let next = transition.row;
            crate::audit::append(
                conn,
                OPERATOR,
                change.audit_action(),
                &format!("job:{id}"),
                &json!({"agent": next.agent, "name": next.name, "status": next.status.as_str()}),
            )?;
            Ok(Ok(next))
        })
        .await
        .map_err(|error| error.to_string())??;
    print_changed(change.outcome(), &JobLine::from_row(&changed));
    Ok(())
}
