//! Jobs as the scheduler, the agents' schedule tools, Studio and `clawvisor jobs` see them: what a
//! job to create or a change to one holds, how a job is shown, and the rules every writer follows
//! whoever stores the job — the checks of a new job ([`check`]) and the pause / resume / cancel
//! transitions ([`status`]). Plain rules and SQL over `store::schedules`; no actor.
//!
//! **Architecture Invariant:** a job is checked and changed by these functions only, so that the
//! scheduler and the CLI on a stopped daemon write the same rows.

pub mod check;
pub mod status;

use crate::domain::ChatKey;
use crate::schedule::format::{format_local, shorten, zone_of};
use crate::store::schedules::{JobRow, JobStatus};

/// Longest prompt a job may carry.
pub const MAX_PROMPT_CHARS: usize = 8_000;
/// Longest job name.
pub const MAX_NAME_CHARS: usize = 80;
/// How many upcoming fire times a job view shows.
pub const PREVIEW_COUNT: usize = 5;

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
