//! The scheduler service: jobs that fire an agent's run (cron, interval, once), managed by the
//! agents' schedule tools, Studio and the CLI. Served by `actors/scheduler/`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::config::SchedulerConfig;
use crate::domain::{ChatKey, ChatKind, Outbound};
use crate::registry::Registry;
use crate::schedule::format::{format_local, shorten, zone_of};
use crate::schedule::{MissedPolicy, ScheduleKind, ScheduleSpec, parse_timezone};
use crate::store::schedules::{
    self as queries, JobRow, JobRunRow, JobRunStatus, JobStatus, NewJobRun,
};

/// Where the scheduler is registered.
pub const NAME: ServiceName<SchedulerMsg> = ServiceName::fixed("scheduler");
/// How long a job operation may take (a stored write and a schedule computation).
const TIMEOUT: Duration = Duration::from_secs(10);

/// Longest prompt a job may carry.
pub const MAX_PROMPT_CHARS: usize = 8_000;
/// Longest job name.
pub const MAX_NAME_CHARS: usize = 80;
/// How many upcoming fire times a job view shows.
pub const PREVIEW_COUNT: usize = 5;

/// What others may ask of the scheduler.
pub enum SchedulerMsg {
    /// Output of a scheduled run (its session's chat is `sched:<job_id>`).
    Deliver(Outbound),
    Create(NewJob, RpcReplyPort<Result<JobView, SchedulerError>>),
    List {
        scope: JobScope,
        include_finished: bool,
        reply: RpcReplyPort<Result<Vec<JobView>, SchedulerError>>,
    },
    Get {
        scope: JobScope,
        id: i64,
        history: u32,
        reply: RpcReplyPort<Result<(JobView, Vec<JobRunRow>), SchedulerError>>,
    },
    Update {
        scope: JobScope,
        id: i64,
        change: JobChange,
        reply: RpcReplyPort<Result<JobView, SchedulerError>>,
    },
    SetPaused {
        scope: JobScope,
        id: i64,
        paused: bool,
        reply: RpcReplyPort<Result<JobView, SchedulerError>>,
    },
    Cancel {
        scope: JobScope,
        id: i64,
        reply: RpcReplyPort<Result<JobView, SchedulerError>>,
    },
    /// Figures for tests, benchmarks and Studio.
    Stats(RpcReplyPort<SchedulerStats>),
}

/// Whose jobs a request may see and change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobScope {
    /// An agent's tools: only its own jobs.
    Agent(String),
    /// The operator (CLI, Studio): every job.
    Operator,
}

impl JobScope {
    pub fn allows(&self, job: &JobRow) -> bool {
        match self {
            JobScope::Agent(agent) => *agent == job.agent,
            JobScope::Operator => true,
        }
    }
}

/// A job to create. Text fields are as the user or the model wrote them; they are validated here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub agent: String,
    /// A short label; empty: the prompt's first words.
    pub name: String,
    /// What the agent is asked at each fire.
    pub prompt: String,
    /// Where the answer goes (`tg:` or a local chat); `None`: silent.
    pub target: Option<ChatKey>,
    /// `cron`, `every` or `at`.
    pub kind: String,
    pub expression: String,
    /// IANA timezone; empty: UTC.
    pub timezone: String,
    /// `skip`, `run_once`, `catch_up [max_runs=N] [window=D]`; empty: `run_once`.
    pub missed_policy: String,
    /// `agent`, `user` or `operator`.
    pub created_by: String,
    pub created_in: Option<ChatKey>,
}

/// A change to a job; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobChange {
    pub name: Option<String>,
    pub prompt: Option<String>,
    pub kind: Option<String>,
    pub expression: Option<String>,
    pub timezone: Option<String>,
    pub missed_policy: Option<String>,
    /// `Some(None)`: make the job silent.
    pub target: Option<Option<ChatKey>>,
}

/// What a job looks like to its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    pub id: i64,
    pub agent: String,
    pub name: String,
    pub prompt: String,
    pub target: Option<String>,
    pub kind: String,
    pub expression: String,
    pub timezone: String,
    /// "at 09:00 on Monday-Friday (Europe/Berlin)".
    pub schedule: String,
    pub missed_policy: String,
    /// active | paused | done | cancelled.
    pub status: JobStatus,
    pub next_run_ms: Option<i64>,
    /// The next fire times (at most [`PREVIEW_COUNT`]).
    pub upcoming: Vec<i64>,
    pub last_run_ms: Option<i64>,
    pub last_outcome: Option<String>,
    pub consecutive_failures: i64,
    pub failing: bool,
    pub running: bool,
    pub queued: usize,
    pub created_by: String,
}

impl JobView {
    /// One paragraph for a model or a terminal: what, when, where to, how it stands.
    pub fn summary(&self) -> String {
        let zone = zone_of(&self.timezone);
        let mut lines = vec![format!(
            "Task #{} \"{}\" ({}): {}",
            self.id, self.name, self.status, self.schedule
        )];
        lines.push(format!("  prompt: {}", shorten(&self.prompt, 160)));
        lines.push(format!(
            "  answers go to: {}; missed runs: {}",
            self.target.as_deref().unwrap_or("nowhere (silent)"),
            self.missed_policy
        ));
        if !self.upcoming.is_empty() {
            let times: Vec<String> = self
                .upcoming
                .iter()
                .map(|ms| format_local(*ms, zone))
                .collect();
            lines.push(format!("  next runs: {}", times.join(", ")));
        } else if self.status == JobStatus::Active {
            lines.push("  next runs: none (the schedule is over)".to_string());
        }
        if let Some(last) = self.last_run_ms {
            lines.push(format!(
                "  last run: {} ({})",
                format_local(last, zone),
                self.last_outcome.as_deref().unwrap_or("running")
            ));
        }
        if self.failing {
            lines.push(format!(
                "  FAILING: {} failed runs in a row",
                self.consecutive_failures
            ));
        }
        if self.running {
            lines.push("  a run is in progress".to_string());
        }
        if self.queued > 0 {
            lines.push(format!("  {} run(s) queued", self.queued));
        }
        lines.join("\n")
    }
}

/// Figures about the scheduler's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerStats {
    pub jobs: usize,
    pub heap_entries: usize,
    /// 0 or 1: the scheduler never holds more than one timer.
    pub timers_armed: usize,
    /// When the armed timer fires (scheduler clock, ms).
    pub timer_at_ms: Option<i64>,
    pub ticks: u64,
    pub dispatched: u64,
    pub running: usize,
    pub queued: usize,
    /// The earliest time any job needs the scheduler (a fire, a queued run, a check).
    pub next_wake_ms: Option<i64>,
}

/// Why the scheduler could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulerError {
    #[error(transparent)]
    Unavailable(#[from] CallError),
    /// No job `id` that the caller may see.
    #[error("there is no task #{id} (list_tasks shows the tasks)")]
    NotFound { id: i64 },
    /// The request was refused; the text says why (a bad expression, a bad target, ...).
    #[error("{0}")]
    Refused(String),
}

impl From<String> for SchedulerError {
    fn from(reason: String) -> Self {
        SchedulerError::Refused(reason)
    }
}

/// The scheduler, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Scheduler {
    registry: Registry,
}

impl Scheduler {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    async fn ask<T: Send + 'static>(
        &self,
        make: impl FnOnce(RpcReplyPort<Result<T, SchedulerError>>) -> SchedulerMsg,
    ) -> Result<T, SchedulerError> {
        super::ask(&self.registry, &NAME, Some(TIMEOUT), make).await?
    }

    /// Output of a scheduled run (its chat is `sched:<job>`); missed when the scheduler is down
    /// (the run's end is in the database and is reconciled when it is back).
    pub fn deliver(&self, outbound: Outbound) {
        let _ = super::tell(&self.registry, &NAME, SchedulerMsg::Deliver(outbound));
    }

    pub async fn create(&self, job: NewJob) -> Result<JobView, SchedulerError> {
        self.ask(|reply| SchedulerMsg::Create(job, reply)).await
    }

    pub async fn list(
        &self,
        scope: JobScope,
        include_finished: bool,
    ) -> Result<Vec<JobView>, SchedulerError> {
        self.ask(|reply| SchedulerMsg::List {
            scope,
            include_finished,
            reply,
        })
        .await
    }

    /// A job and its `history` most recent fires.
    pub async fn get(
        &self,
        scope: JobScope,
        id: i64,
        history: u32,
    ) -> Result<(JobView, Vec<JobRunRow>), SchedulerError> {
        self.ask(|reply| SchedulerMsg::Get {
            scope,
            id,
            history,
            reply,
        })
        .await
    }

    pub async fn update(
        &self,
        scope: JobScope,
        id: i64,
        change: JobChange,
    ) -> Result<JobView, SchedulerError> {
        self.ask(|reply| SchedulerMsg::Update {
            scope,
            id,
            change,
            reply,
        })
        .await
    }

    pub async fn set_paused(
        &self,
        scope: JobScope,
        id: i64,
        paused: bool,
    ) -> Result<JobView, SchedulerError> {
        self.ask(|reply| SchedulerMsg::SetPaused {
            scope,
            id,
            paused,
            reply,
        })
        .await
    }

    pub async fn cancel(&self, scope: JobScope, id: i64) -> Result<JobView, SchedulerError> {
        self.ask(|reply| SchedulerMsg::Cancel { scope, id, reply })
            .await
    }

    pub async fn stats(&self) -> Result<SchedulerStats, SchedulerError> {
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), SchedulerMsg::Stats).await?)
    }
}

// ---------------------------------------------------------------------------------------------
// Checking a job: shared by the scheduler and `clawvisor jobs add` on a stopped daemon, so that a
// job is the same whoever stores it.

/// A checked schedule: the spec, its policy, the anchor and first fire time to store.
pub struct CheckedSchedule {
    pub spec: ScheduleSpec,
    pub policy: MissedPolicy,
    pub timezone: String,
    pub anchor_ms: i64,
    pub next_run_ms: i64,
}

/// Reads and checks a schedule: its kind, expression, zone (empty: UTC) and missed-run policy,
/// that it fires after `now`, and that its fires are at least `[scheduler] min_interval` apart.
pub fn check_schedule(
    config: &SchedulerConfig,
    kind: &str,
    expression: &str,
    timezone: &str,
    missed_policy: &str,
    now: i64,
) -> Result<CheckedSchedule, String> {
    let timezone = if timezone.trim().is_empty() {
        "UTC"
    } else {
        timezone.trim()
    };
    let zone = parse_timezone(timezone).map_err(|error| error.to_string())?;
    let spec = ScheduleSpec::parse(kind, expression, timezone, crate::clock::to_datetime(now))
        .map_err(|error| error.to_string())?;
    let policy = if missed_policy.trim().is_empty() {
        MissedPolicy::default()
    } else {
        MissedPolicy::parse(missed_policy).map_err(|error| error.to_string())?
    };
    let start = crate::clock::to_datetime(now);
    let upcoming = spec.preview(start, 3);
    let Some(first) = upcoming.first() else {
        return Err(match spec.kind() {
            ScheduleKind::At => format!(
                "the time `{}` is in the past (it is now {}); give a future time",
                expression.trim(),
                format_local(now, zone)
            ),
            _ => format!("`{}` never fires after now", expression.trim()),
        });
    };
    let min_gap = i64::try_from(config.min_interval.0.as_millis()).unwrap_or(60_000);
    let gap = upcoming
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).num_milliseconds())
        .min();
    if let Some(gap) = gap
        && gap < min_gap
    {
        return Err(format!(
            "`{}` fires every {} but the shortest interval allowed is {} ([scheduler] min_interval)",
            expression.trim(),
            humantime::format_duration(Duration::from_millis(u64::try_from(gap).unwrap_or(0))),
            humantime::format_duration(config.min_interval.0)
        ));
    }
    let anchor_ms = match &spec {
        ScheduleSpec::Every { anchor, .. } => anchor.timestamp_millis(),
        _ => now,
    };
    Ok(CheckedSchedule {
        next_run_ms: first.timestamp_millis(),
        spec,
        policy,
        timezone: zone.name().to_string(),
        anchor_ms,
    })
}

/// A required text field, trimmed, at most `max` characters.
pub fn check_text(field: &str, text: &str, max: usize) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("`{field}` is empty"));
    }
    if trimmed.chars().count() > max {
        return Err(format!(
            "`{field}` is longer than {max} characters; shorten it"
        ));
    }
    Ok(trimmed.to_string())
}

/// Answers go to a Telegram or local chat, never to a scheduled or handoff conversation.
pub fn check_target(target: &Option<ChatKey>) -> Result<(), String> {
    match target {
        Some(chat) if matches!(chat.kind(), ChatKind::Schedule | ChatKind::Handoff) => Err(
            format!("answers can go to a Telegram or local chat, not `{chat}`"),
        ),
        _ => Ok(()),
    }
}

/// Refuses a job beyond `[scheduler] max_jobs_per_agent` (`live`: the agent's active and paused
/// jobs).
pub fn check_job_limit(agent: &str, live: u64, max: u64) -> Result<(), String> {
    if live >= max {
        return Err(format!(
            "{agent} already has {live} tasks (the limit is {max}, [scheduler] max_jobs_per_agent); cancel one first"
        ));
    }
    Ok(())
}

impl NewJob {
    /// The row this job is stored as (id 0), every field checked. Whether the agent exists and
    /// is under its job limit ([`check_job_limit`]) is the caller's to check: that needs the
    /// configured agents and the database.
    pub fn into_row(
        self,
        config: &SchedulerConfig,
        now: i64,
    ) -> Result<(JobRow, CheckedSchedule), String> {
        let prompt = check_text("prompt", &self.prompt, MAX_PROMPT_CHARS)?;
        let name = if self.name.trim().is_empty() {
            shorten(
                &prompt
                    .split_whitespace()
                    .take(6)
                    .collect::<Vec<_>>()
                    .join(" "),
                MAX_NAME_CHARS,
            )
        } else {
            check_text("name", &self.name, MAX_NAME_CHARS)?
        };
        check_target(&self.target)?;
        let checked = check_schedule(
            config,
            &self.kind,
            &self.expression,
            &self.timezone,
            &self.missed_policy,
            now,
        )?;
        let row = JobRow {
            id: 0,
            agent: self.agent,
            name,
            prompt,
            target_chat: self.target.map(|chat| chat.to_string()),
            kind: checked.spec.kind().as_str().to_string(),
            expression: self.expression.trim().to_string(),
            timezone: checked.timezone.clone(),
            anchor_ms: checked.anchor_ms,
            missed_policy: checked.policy.to_string(),
            status: JobStatus::Active,
            next_run_ms: Some(checked.next_run_ms),
            last_run_ms: None,
            last_outcome: None,
            consecutive_failures: 0,
            failing: false,
            created_by: self.created_by,
            created_in: self.created_in.map(|chat| chat.to_string()),
            created_ms: now,
            updated_ms: now,
        };
        Ok((row, checked))
    }
}

// ---------------------------------------------------------------------------------------------
// Pausing, resuming and cancelling: shared by the scheduler and `clawvisor jobs pause | resume |
// rm` on a stopped daemon, so that a job changes the same way whoever changes it.

/// What the detail of the missed run says when a one-shot's time passed while it was paused.
pub const MISSED_WHILE_PAUSED: &str = "its time passed while it was paused; recorded as missed";

/// A change to a live job's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusChange {
    Pause,
    Resume,
    Cancel,
}

/// What a [`StatusChange`] does to one job, decided by [`StatusChange::decide`] and written by
/// [`StatusTransition::write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusTransition {
    pub change: StatusChange,
    /// The job as it stands after the change.
    pub row: JobRow,
    /// False when the job already stood so (pausing a paused job, resuming an active one):
    /// nothing is written and nothing is announced.
    pub changed: bool,
    /// A one-shot whose time passed while it was paused: the fire time its missed run is
    /// recorded at (the job is done, its last outcome `missed`).
    pub missed_fire_ms: Option<i64>,
}

impl StatusChange {
    /// The word the change is reported and announced with.
    pub fn outcome(self) -> &'static str {
        match self {
            StatusChange::Pause => "paused",
            StatusChange::Resume => "resumed",
            StatusChange::Cancel => "cancelled",
        }
    }

    /// The audit action an operator's change is recorded as (the CLI's and Studio's).
    pub fn audit_action(self) -> &'static str {
        match self {
            StatusChange::Pause => "job.paused",
            StatusChange::Resume => "job.resumed",
            StatusChange::Cancel => "job.cancelled",
        }
    }

    /// Decides the change for a live job (`row`, whose schedule reads as `spec`) at `now`: a
    /// paused or cancelled job has no next time; a resumed one's next time is recomputed from
    /// its schedule, and a one-shot whose time passed while it was paused is done and recorded
    /// as missed, never silently dropped. Whether the job is live is the caller's to check.
    /// Only resuming needs the schedule: a job whose schedule no longer reads (`None`) can still
    /// be paused or cancelled.
    pub fn decide(
        self,
        row: &JobRow,
        spec: Option<&ScheduleSpec>,
        now: i64,
    ) -> Result<StatusTransition, String> {
        let mut next = row.clone();
        let mut missed_fire_ms = None;
        let changed = match self {
            StatusChange::Pause if row.status == JobStatus::Paused => false,
            StatusChange::Resume if row.status == JobStatus::Active => false,
            StatusChange::Pause => {
                next.status = JobStatus::Paused;
                next.next_run_ms = None;
                true
            }
            StatusChange::Cancel => {
                next.status = JobStatus::Cancelled;
                next.next_run_ms = None;
                true
            }
            StatusChange::Resume => {
                let Some(spec) = spec else {
                    return Err(format!(
                        "task #{}'s schedule does not read; cancel it and add a new one",
                        row.id
                    ));
                };
                next.status = JobStatus::Active;
                next.next_run_ms = spec
                    .next_after(crate::clock::to_datetime(now))
                    .map(|time| time.timestamp_millis());
                if next.next_run_ms.is_none() {
                    next.status = JobStatus::Done;
                    next.last_outcome = Some("missed".into());
                    missed_fire_ms = Some(match spec {
                        ScheduleSpec::At(at) => at.timestamp_millis(),
                        _ => row.anchor_ms,
                    });
                }
                true
            }
        };
        Ok(StatusTransition {
            change: self,
            row: next,
            changed,
            missed_fire_ms,
        })
    }
}

impl StatusTransition {
    /// Whether the job's queued fires end as skipped: a paused or cancelled job runs none.
    pub fn skips_queued(&self) -> bool {
        self.changed && self.change != StatusChange::Resume
    }

    /// Writes the change in the caller's transaction: the queued fires `queued_run_ids` (the
    /// job's runs with status `queued`) end as skipped when [`Self::skips_queued`], the missed
    /// run is recorded, and the row is saved. Nothing is written when nothing changed.
    pub fn write(
        &self,
        conn: &rusqlite::Connection,
        queued_run_ids: &[i64],
        now: i64,
    ) -> crate::store::Result<()> {
        if !self.changed {
            return Ok(());
        }
        if self.skips_queued() {
            let reason = format!("the task was {}", self.change.outcome());
            for job_run_id in queued_run_ids {
                queries::finish_run(
                    conn,
                    *job_run_id,
                    JobRunStatus::Skipped,
                    None,
                    Some(&reason),
                    now,
                )?;
            }
        }
        if let Some(fire_ms) = self.missed_fire_ms {
            queries::insert_run(
                conn,
                &NewJobRun {
                    job_id: self.row.id,
                    fire_ms,
                    attempt: 0,
                    trigger: "record",
                    status: JobRunStatus::Missed,
                    due_ms: fire_ms,
                    missed_count: Some(1),
                    detail: Some(MISSED_WHILE_PAUSED),
                },
                now,
            )?;
        }
        queries::save_job(conn, &self.row, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored one-shot job due at `at_ms`, checked at `now` as the scheduler would.
    fn one_shot(at_ms: i64, now: i64) -> (JobRow, ScheduleSpec) {
        let at = crate::clock::to_datetime(at_ms).to_rfc3339();
        let new_job = NewJob {
            agent: "ada".into(),
            name: String::new(),
            prompt: "Ping".into(),
            target: None,
            kind: "at".into(),
            expression: at,
            timezone: "UTC".into(),
            missed_policy: String::new(),
            created_by: "operator".into(),
            created_in: None,
        };
        let (mut row, checked) = new_job
            .into_row(&SchedulerConfig::default(), now)
            .expect("a future one-shot is a valid job");
        row.id = 7;
        (row, checked.spec)
    }

    #[test]
    fn pausing_twice_changes_nothing_and_resuming_after_the_time_records_it_as_missed() {
        let now = 1_800_000_000_000;
        let at_ms = now + 3_600_000;
        let (row, spec) = one_shot(at_ms, now);
        let paused = StatusChange::Pause.decide(&row, None, now).unwrap();
        assert!(paused.changed && paused.skips_queued());
        assert_eq!(
            (paused.row.status, paused.row.next_run_ms),
            (JobStatus::Paused, None)
        );
        let again = StatusChange::Pause.decide(&paused.row, None, now).unwrap();
        assert!(!again.changed && !again.skips_queued());

        // Resuming needs the schedule; a job whose schedule does not read can only be paused
        // or cancelled.
        let refused = StatusChange::Resume.decide(&paused.row, None, now);
        assert!(refused.unwrap_err().contains("cancel it"));

        let early = StatusChange::Resume
            .decide(&paused.row, Some(&spec), now)
            .unwrap();
        assert_eq!(
            (
                early.row.status,
                early.row.next_run_ms,
                early.missed_fire_ms
            ),
            (JobStatus::Active, Some(at_ms), None)
        );
        let late = StatusChange::Resume
            .decide(&paused.row, Some(&spec), at_ms + 1)
            .unwrap();
        assert_eq!(
            (late.row.status, late.row.next_run_ms, late.missed_fire_ms),
            (JobStatus::Done, None, Some(at_ms))
        );
        assert_eq!(late.row.last_outcome.as_deref(), Some("missed"));
        assert!(!late.skips_queued());

        let cancelled = StatusChange::Cancel.decide(&paused.row, None, now).unwrap();
        assert!(cancelled.changed && cancelled.skips_queued());
        assert_eq!(cancelled.row.status, JobStatus::Cancelled);
    }
}
