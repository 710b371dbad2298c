//! The scheduler service: jobs that fire an agent's run (cron, interval, once), managed by the
//! agents' schedule tools, Studio and the CLI. Served by `actors/scheduler/`; what a job is and
//! the rules of changing one are `crate::jobs`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::domain::Outbound;
use crate::jobs::{JobChange, JobScope, JobView, NewJob};
use crate::registry::Registry;
use crate::store::schedules::JobRunRow;

/// Where the scheduler is registered.
pub const NAME: ServiceName<SchedulerMsg> = ServiceName::fixed("scheduler");
/// How long a job operation may take (a stored write and a schedule computation).
const TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Fires job `id` now, once, besides its schedule: recorded (trigger `manual`) before its
    /// message is sent, like a timer's fire; refused while the job runs or waits to run, and for
    /// a paused or finished job. Answers the job and the fire's history row.
    RunNow {
        scope: JobScope,
        id: i64,
        reply: RpcReplyPort<Result<(JobView, JobRunRow), SchedulerError>>,
    },
    /// Figures for tests, benchmarks and Studio.
    Stats(RpcReplyPort<SchedulerStats>),
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
    /// The job is running or about to (a job never runs twice at once); the text says so.
    #[error("{0}")]
    Busy(String),
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

    /// Fires job `id` now, once (trigger `manual`); the job and the fire's history row.
    pub async fn run_now(
        &self,
        scope: JobScope,
        id: i64,
    ) -> Result<(JobView, JobRunRow), SchedulerError> {
        self.ask(|reply| SchedulerMsg::RunNow { scope, id, reply })
            .await
    }

    pub async fn stats(&self) -> Result<SchedulerStats, SchedulerError> {
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), SchedulerMsg::Stats).await?)
    }
}
