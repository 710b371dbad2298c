//! Scheduler: cron / interval / one-shot jobs that fire an agent's run and never miss silently.
//!
//! Responsibility: the `jobs` and `job_runs` tables, one timer for the earliest thing due, the
//! scheduled runs' messages to agents (chat `sched:<job>`, a session isolated from user chats),
//! their answers' delivery to the job's target chat, and retries. The schedule tools are built
//! with each agent's other tools (`tools::tools_for_agent`) and ask this actor by name, so a run
//! that starts the moment the daemon is back already has them.
//!
//! Fire protocol (the fire is durable before anything leaves):
//! 1. Due: in one transaction the fire is recorded as a `job_runs` row (`queued`; its key
//!    (job, fire time, attempt) is unique, so a fire cannot be recorded twice) and the job's
//!    `next_run_ms` is recomputed from its expression. Fire times that will not run are recorded
//!    as `missed` / `skipped` rows in the same transaction.
//! 2. Dispatch: the row becomes `running` (committed), then the agent gets an `Inbound` for chat
//!    `sched:<job>` whose text starts with the fire's own marker `[Scheduled run <row> of task`.
//! 3. The run's final answer comes back as `Deliver`; the row's end, the job's outcome and (for a
//!    Telegram target) the reply's outbox row are written in one transaction, then the answer is
//!    handed to the channel. A failed run is queued again after `[scheduler] retry_backoff`;
//!    after the last retry the job is marked failing and its chat is told.
//!
//! Invariants:
//! - A job never runs twice at once: at most one `running` row per job (a unique index), and a
//!   queued fire waits until the running one ended. An on-time fire that finds its job still
//!   running is recorded as `skipped`.
//! - No fire time passes unrecorded: each one ran, is queued, or is counted in a `missed` /
//!   `skipped` row (and the target chat and Studio are told when the daemon was down).
//! - The next fire time is always recomputed from the expression (`ScheduleSpec::next_after`),
//!   never by adding an interval; the timer sleeps at most `[scheduler] max_sleep`, so a
//!   wall-clock jump is noticed within it.
//!
//! Background job: the fire timer. Owner: this actor; table: `jobs`, `job_runs`; one `send_after`
//! for the earliest wake-up (a heap keyed by wake time, stale entries skipped), re-armed after
//! every change; cancelled by the actor's stop (the handle is aborted with its state).
//! On restart: jobs and open rows are reloaded; a fire time that passed while the scheduler was
//! down follows the job's missed-run policy; a `running` row is reconciled with the database —
//! its message never reached the session → sent again (same row, same marker); its run ended →
//! its outcome is taken from `runs`; its run is open → the session resumes it and answers.
//! Idempotent: re-recording a fire is refused by its unique key, a row is finished only once
//! (`finish_run` only ends open rows), and a message is sent again only when the session holds
//! no message with its marker.
//!
//! Restart policy: permanent, under the root.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;

use super::agent::AgentMsg;
use crate::config::{AgentSpec, SchedulerConfig};
use crate::domain::{
    ChatKey, ChatKind, Inbound, InboundSource, OutEvent, Outbound, Sender, SessionCommand,
};
use crate::events::{EventBus, EventKind};
use crate::registry::{Registry, names};
use crate::schedule::{MissedOutcome, MissedPolicy, ScheduleKind, ScheduleSpec, parse_timezone};
use crate::store::Store;
use crate::store::runs::{self, RunStatus};
use crate::store::schedules::{self as queries, JobRow, JobRunRow, NewJobRun};

/// Longest prompt a job may carry.
pub const MAX_PROMPT_CHARS: usize = 8_000;
/// Longest job name.
pub const MAX_NAME_CHARS: usize = 80;
/// How many upcoming fire times a job view shows.
pub const PREVIEW_COUNT: usize = 5;

/// How soon to try again to dispatch to an agent that is not running (booting, restarting).
const AGENT_RETRY: i64 = 500;
/// Fires handled per transaction in one tick.
const BATCH: usize = 512;

pub enum SchedulerMsg {
    /// Output of a scheduled run (its session's chat is `sched:<job_id>`).
    Deliver(Outbound),
    Create(NewJob, RpcReplyPort<Result<JobView, String>>),
    List {
        scope: JobScope,
        include_finished: bool,
        reply: RpcReplyPort<Result<Vec<JobView>, String>>,
    },
    Get {
        scope: JobScope,
        id: i64,
        history: u32,
        reply: RpcReplyPort<Result<(JobView, Vec<JobRunRow>), String>>,
    },
    Update {
        scope: JobScope,
        id: i64,
        change: JobChange,
        reply: RpcReplyPort<Result<JobView, String>>,
    },
    SetPaused {
        scope: JobScope,
        id: i64,
        paused: bool,
        reply: RpcReplyPort<Result<JobView, String>>,
    },
    Cancel {
        scope: JobScope,
        id: i64,
        reply: RpcReplyPort<Result<JobView, String>>,
    },
    /// Figures for tests, benchmarks and Studio.
    Stats(RpcReplyPort<SchedulerStats>),
    /// The timer fired.
    Tick,
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
    fn allows(&self, job: &JobRow) -> bool {
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
    pub status: String,
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
        } else if self.status == "active" {
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

/// Where the scheduler's "now" comes from.
#[derive(Debug, Clone)]
pub enum SchedulerClock {
    /// Wall time (`crate::clock::now_ms`).
    Wall,
    /// `start_ms` plus the time elapsed on tokio's clock since `start`: with
    /// `tokio::time::pause()` tests move time by hand.
    Tokio {
        start_ms: i64,
        start: tokio::time::Instant,
    },
}

impl SchedulerClock {
    /// A tokio-driven clock starting at `start_ms`.
    pub fn tokio_from(start_ms: i64) -> SchedulerClock {
        SchedulerClock::Tokio {
            start_ms,
            start: tokio::time::Instant::now(),
        }
    }

    pub fn now_ms(&self) -> i64 {
        match self {
            SchedulerClock::Wall => crate::clock::now_ms(),
            SchedulerClock::Tokio { start_ms, start } => {
                start_ms + i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
            }
        }
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

#[derive(Clone)]
pub struct SchedulerArgs {
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
    pub config: SchedulerConfig,
    /// Every configured agent (jobs for an agent that does not exist are refused).
    pub agents: Vec<AgentSpec>,
    pub clock: SchedulerClock,
}

pub struct Scheduler;

type Timer = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<SchedulerMsg>>>;

/// A fire waiting to be dispatched.
#[derive(Debug, Clone)]
struct Queued {
    job_run_id: i64,
    fire_ms: i64,
    attempt: i64,
    due_ms: i64,
}

/// The fire whose message is with the agent.
#[derive(Debug, Clone)]
struct Running {
    job_run_id: i64,
    fire_ms: i64,
    attempt: i64,
    /// When to look in the database whether the run got lost (see `reconcile`).
    check_at_ms: i64,
}

struct Job {
    row: JobRow,
    spec: ScheduleSpec,
    policy: MissedPolicy,
    zone: Tz,
    /// Sorted by (due, row id).
    queue: Vec<Queued>,
    running: Option<Running>,
}

impl Job {
    fn from_row(row: JobRow) -> Result<Job, String> {
        let anchor = crate::clock::to_datetime(row.anchor_ms);
        let spec = ScheduleSpec::parse(&row.kind, &row.expression, &row.timezone, anchor)
            .map_err(|error| error.to_string())?;
        let policy = MissedPolicy::parse(&row.missed_policy).map_err(|error| error.to_string())?;
        Ok(Job {
            zone: zone_of(&row.timezone),
            row,
            spec,
            policy,
            queue: Vec::new(),
            running: None,
        })
    }

    fn accepts_work(&self) -> bool {
        !matches!(self.row.status.as_str(), "paused" | "cancelled")
    }

    /// When this job next needs the scheduler: its next regular fire, its first queued fire
    /// (when nothing runs), or the check of its running fire.
    fn wake_ms(&self) -> Option<i64> {
        let regular = (self.row.status == "active")
            .then_some(self.row.next_run_ms)
            .flatten();
        let queued = match (&self.running, self.accepts_work()) {
            (None, true) => self.queue.first().map(|queued| queued.due_ms),
            _ => None,
        };
        let check = self.running.as_ref().map(|running| running.check_at_ms);
        [regular, queued, check].into_iter().flatten().min()
    }

    fn enqueue(&mut self, queued: Queued) {
        let at = self.queue.partition_point(|other| {
            (other.due_ms, other.job_run_id) <= (queued.due_ms, queued.job_run_id)
        });
        self.queue.insert(at, queued);
    }

    fn view(&self, now_ms: i64) -> JobView {
        let row = &self.row;
        let upcoming = if row.status == "active" {
            let start = crate::clock::to_datetime(now_ms);
            let mut times: Vec<i64> = row.next_run_ms.into_iter().collect();
            let after = row
                .next_run_ms
                .map(crate::clock::to_datetime)
                .unwrap_or(start);
            if row.next_run_ms.is_some() {
                times.extend(
                    self.spec
                        .preview(after, PREVIEW_COUNT - 1)
                        .into_iter()
                        .map(|time| time.timestamp_millis()),
                );
            }
            times
        } else {
            Vec::new()
        };
        JobView {
            id: row.id,
            agent: row.agent.clone(),
            name: row.name.clone(),
            prompt: row.prompt.clone(),
            target: row.target_chat.clone(),
            kind: row.kind.clone(),
            expression: row.expression.clone(),
            timezone: row.timezone.clone(),
            schedule: self.spec.describe(),
            missed_policy: row.missed_policy.clone(),
            status: row.status.clone(),
            next_run_ms: row.next_run_ms,
            upcoming,
            last_run_ms: row.last_run_ms,
            last_outcome: row.last_outcome.clone(),
            consecutive_failures: row.consecutive_failures,
            failing: row.failing,
            running: self.running.is_some(),
            queued: self.queue.len(),
            created_by: row.created_by.clone(),
        }
    }
}

pub struct SchedulerState {
    args: SchedulerArgs,
    jobs: HashMap<i64, Job>,
    heap: BinaryHeap<Reverse<(i64, i64)>>,
    timer: Option<(i64, Timer)>,
    /// When this scheduler started: a fire time before it passed while the scheduler was down.
    started_ms: i64,
    ticks: u64,
    dispatched: u64,
}

impl SchedulerState {
    fn now(&self) -> i64 {
        self.args.clock.now_ms()
    }
}

impl Actor for Scheduler {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = SchedulerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SchedulerArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (rows, open) = args
            .store
            .read(|conn| Ok((queries::jobs_to_load(conn)?, queries::open_runs(conn)?)))
            .await?;
        let started_ms = args.clock.now_ms();
        let mut state = SchedulerState {
            args,
            jobs: HashMap::with_capacity(rows.len()),
            heap: BinaryHeap::with_capacity(rows.len()),
            timer: None,
            started_ms,
            ticks: 0,
            dispatched: 0,
        };
        let mut broken = Vec::new();
        for row in rows {
            let id = row.id;
            match Job::from_row(row.clone()) {
                Ok(job) => {
                    state.jobs.insert(id, job);
                }
                Err(error) => broken.push((row, error)),
            }
        }
        for run in open {
            let Some(job) = state.jobs.get_mut(&run.job_id) else {
                continue;
            };
            if run.status == "running" {
                job.running = Some(Running {
                    job_run_id: run.id,
                    fire_ms: run.fire_ms,
                    attempt: run.attempt,
                    // Reconciled with the database at the first tick.
                    check_at_ms: started_ms,
                });
            } else {
                job.enqueue(Queued {
                    job_run_id: run.id,
                    fire_ms: run.fire_ms,
                    attempt: run.attempt,
                    due_ms: run.due_ms,
                });
            }
        }
        if !broken.is_empty() {
            pause_broken(&state, broken).await?;
        }
        let ids: Vec<i64> = state.jobs.keys().copied().collect();
        for id in ids {
            reschedule(&mut state, id);
        }
        tracing::info!(jobs = state.jobs.len(), "scheduler loaded its jobs");
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Overdue jobs and open runs are handled by the first tick, right away.
        myself.cast(SchedulerMsg::Tick)?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SchedulerMsg::Tick => {
                if let Some((_, timer)) = state.timer.take() {
                    timer.abort();
                }
                on_tick(state).await?;
            }
            SchedulerMsg::Deliver(outbound) => on_deliver(state, outbound).await?,
            SchedulerMsg::Create(new_job, reply) => {
                let result = create(&myself, state, new_job).await;
                let _ = reply.send(result);
            }
            SchedulerMsg::List {
                scope,
                include_finished,
                reply,
            } => {
                let result = list(state, &scope, include_finished).await;
                let _ = reply.send(result);
            }
            SchedulerMsg::Get {
                scope,
                id,
                history,
                reply,
            } => {
                let result = get(state, &scope, id, history).await;
                let _ = reply.send(result);
            }
            SchedulerMsg::Update {
                scope,
                id,
                change,
                reply,
            } => {
                let result = update(&myself, state, &scope, id, change).await;
                let _ = reply.send(result);
            }
            SchedulerMsg::SetPaused {
                scope,
                id,
                paused,
                reply,
            } => {
                let result = set_paused(&myself, state, &scope, id, paused).await;
                let _ = reply.send(result);
            }
            SchedulerMsg::Cancel { scope, id, reply } => {
                let result = cancel(state, &scope, id).await;
                let _ = reply.send(result);
            }
            SchedulerMsg::Stats(reply) => {
                let _ = reply.send(stats(state));
            }
        }
        arm(&myself, state);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, timer)) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The timer.

/// Pushes the job's current wake time (older entries for it become stale and are skipped).
fn reschedule(state: &mut SchedulerState, id: i64) {
    if let Some(wake) = state.jobs.get(&id).and_then(Job::wake_ms) {
        state.heap.push(Reverse((wake, id)));
    }
    if state.heap.len() > 2 * state.jobs.len() + 1024 {
        let live: Vec<Reverse<(i64, i64)>> = state
            .jobs
            .iter()
            .filter_map(|(id, job)| job.wake_ms().map(|wake| Reverse((wake, *id))))
            .collect();
        state.heap = BinaryHeap::from(live);
    }
}

/// Drops stale entries from the top of the heap; the earliest live wake time.
fn earliest(state: &mut SchedulerState) -> Option<i64> {
    while let Some(Reverse((wake, id))) = state.heap.peek().copied() {
        if state.jobs.get(&id).and_then(Job::wake_ms) == Some(wake) {
            return Some(wake);
        }
        state.heap.pop();
    }
    None
}

/// Keeps exactly one timer, for the earliest wake-up (at most `max_sleep` away).
fn arm(myself: &ActorRef<SchedulerMsg>, state: &mut SchedulerState) {
    let now = state.now();
    let max_sleep = i64::try_from(state.args.config.max_sleep.0.as_millis()).unwrap_or(60_000);
    let wake = earliest(state).unwrap_or(i64::MAX).min(now + max_sleep);
    arm_by(myself, state, wake);
}

/// Makes sure the timer fires no later than `wake_ms`. Called before a write that gives a job an
/// earlier wake-up, so the timer is right while the write is in flight (its `Tick` is handled
/// after the change anyway: the actor handles one message at a time).
fn arm_by(myself: &ActorRef<SchedulerMsg>, state: &mut SchedulerState, wake_ms: i64) {
    if let Some((armed_for, timer)) = &state.timer
        && *armed_for <= wake_ms
        && !timer.is_finished()
    {
        return;
    }
    if let Some((_, timer)) = state.timer.take() {
        timer.abort();
    }
    let delay = Duration::from_millis(u64::try_from(wake_ms - state.now()).unwrap_or(0));
    let timer = myself.send_after(delay, || SchedulerMsg::Tick);
    state.timer = Some((wake_ms, timer));
}

/// The jobs whose wake time has come, earliest first (each once).
fn take_due(state: &mut SchedulerState, now: i64) -> Vec<i64> {
    let mut due = Vec::new();
    let mut seen = HashSet::new();
    while let Some(Reverse((wake, id))) = state.heap.peek().copied() {
        if wake > now || due.len() >= BATCH {
            break;
        }
        state.heap.pop();
        if state.jobs.get(&id).and_then(Job::wake_ms) == Some(wake) && seen.insert(id) {
            due.push(id);
        }
    }
    due
}

async fn on_tick(state: &mut SchedulerState) -> Result<(), ActorProcessingErr> {
    state.ticks += 1;
    let now = state.now();
    loop {
        let due = take_due(state, now);
        if due.is_empty() {
            break;
        }
        fire_regular(state, &due, now).await?;
        for id in &due {
            reconcile(state, *id, now).await?;
        }
        dispatch(state, &due, now).await?;
        for id in due {
            reschedule(state, id);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Firing.

/// A record of fire times that did not run: (status, first fire time, how many, detail).
type Record = (String, i64, i64, String);
/// Fire times to queue, with their trigger (`scheduled`, `caught_up`).
type Fires = Vec<(i64, &'static str)>;

/// What one regular fire writes.
struct FirePlan {
    job_id: i64,
    row: JobRow,
    record: Option<Record>,
    runs: Vec<(i64, &'static str)>,
    notice: Option<String>,
    late: bool,
    skipped_busy: bool,
}

/// Records the regular fires that are due: the runs to queue and the fire times not run.
async fn fire_regular(
    state: &mut SchedulerState,
    due: &[i64],
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let grace = i64::try_from(state.args.config.late_grace.0.as_millis()).unwrap_or(120_000);
    let mut plans = Vec::new();
    for id in due {
        let Some(job) = state.jobs.get(id) else {
            continue;
        };
        let Some(due_ms) = job.row.next_run_ms.filter(|due_ms| *due_ms <= now) else {
            continue;
        };
        if job.row.status != "active" {
            continue;
        }
        let late = now - due_ms > grace || due_ms < state.started_ms;
        // On time, the latest due fire time runs (several can be due after a short stall);
        // late, the job's own policy decides.
        let policy = if late {
            job.policy
        } else {
            MissedPolicy::RunOnce
        };
        let outcome = policy.resolve(
            &job.spec,
            crate::clock::to_datetime(due_ms),
            crate::clock::to_datetime(now),
        );
        let busy = job.running.is_some() && !late;
        let mut row = job.row.clone();
        row.next_run_ms = outcome.next_run_at.map(|time| time.timestamp_millis());
        if row.next_run_ms.is_none() {
            row.status = "done".to_string();
        }
        let trigger = if late { "caught_up" } else { "scheduled" };
        let mut runs: Vec<(i64, &'static str)> = outcome
            .run_now
            .iter()
            .map(|time| (time.timestamp_millis(), trigger))
            .collect();
        let mut record = None;
        let missed = outcome.missed.value();
        if missed > 0 {
            let status = if late && policy == MissedPolicy::Skip {
                "skipped"
            } else {
                "missed"
            };
            let first = outcome
                .missed_samples
                .first()
                .map(|time| time.timestamp_millis())
                .unwrap_or(due_ms);
            record = Some((
                status.to_string(),
                first,
                i64::try_from(missed).unwrap_or(i64::MAX),
                describe_missed(&outcome, job.zone, late),
            ));
        }
        let mut skipped_busy = false;
        if busy && !runs.is_empty() {
            // A job never runs twice at once: this on-time fire is recorded as skipped.
            let (fire_ms, _) = runs.remove(0);
            skipped_busy = true;
            if record.is_none() {
                record = Some((
                    "skipped".to_string(),
                    fire_ms,
                    1,
                    format!(
                        "the run of {} was still going at {}",
                        format_local(
                            job.running.as_ref().map_or(fire_ms, |r| r.fire_ms),
                            job.zone
                        ),
                        format_local(fire_ms, job.zone)
                    ),
                ));
            }
        }
        let notice = late.then(|| late_notice(job, &outcome, policy)).flatten();
        plans.push(FirePlan {
            job_id: *id,
            row,
            record,
            runs,
            notice,
            late,
            skipped_busy,
        });
    }
    if plans.is_empty() {
        return Ok(());
    }
    let writes: Vec<(JobRow, Option<Record>, Fires)> = plans
        .iter()
        .map(|plan| (plan.row.clone(), plan.record.clone(), plan.runs.clone()))
        .collect();
    let inserted: Vec<Vec<Option<i64>>> = state
        .args
        .store
        .write(move |conn| {
            let mut all = Vec::with_capacity(writes.len());
            for (row, record, runs) in &writes {
                if let Some((status, fire_ms, count, detail)) = record {
                    queries::insert_run(
                        conn,
                        &NewJobRun {
                            job_id: row.id,
                            fire_ms: *fire_ms,
                            attempt: 0,
                            trigger: "record",
                            status,
                            due_ms: *fire_ms,
                            missed_count: Some(*count),
                            detail: Some(detail),
                        },
                        now,
                    )?;
                }
                let mut ids = Vec::with_capacity(runs.len());
                for (fire_ms, trigger) in runs {
                    ids.push(queries::insert_run(
                        conn,
                        &NewJobRun {
                            job_id: row.id,
                            fire_ms: *fire_ms,
                            attempt: 1,
                            trigger,
                            status: "queued",
                            due_ms: now,
                            missed_count: None,
                            detail: None,
                        },
                        now,
                    )?);
                }
                let mut row = row.clone();
                if record.is_some() && runs.is_empty() {
                    row.last_outcome = record.as_ref().map(|(status, ..)| status.clone());
                }
                queries::save_job(conn, &row, now)?;
                all.push(ids);
            }
            Ok(all)
        })
        .await?;
    for (plan, ids) in plans.into_iter().zip(inserted) {
        let Some(job) = state.jobs.get_mut(&plan.job_id) else {
            continue;
        };
        let had_record = plan.record.is_some();
        if let Some((status, _, count, detail)) = &plan.record {
            if plan.runs.is_empty() {
                job.row.last_outcome = Some(status.clone());
            }
            state.args.events.publish_data(
                EventKind::ScheduleOutcome,
                &format!("job:{}", plan.job_id),
                &format!("task #{} {status}: {detail}", plan.job_id),
                json!({"job_id": plan.job_id, "agent": job.row.agent, "outcome": status, "count": count, "busy": plan.skipped_busy}),
            );
        }
        job.row.next_run_ms = plan.row.next_run_ms;
        job.row.status = plan.row.status.clone();
        for ((fire_ms, _), id) in plan.runs.iter().zip(ids) {
            // `None`: this fire was recorded before (the clock went back); it is not run again.
            if let Some(job_run_id) = id {
                job.enqueue(Queued {
                    job_run_id,
                    fire_ms: *fire_ms,
                    attempt: 1,
                    due_ms: now,
                });
            }
        }
        if plan.late && !plan.runs.is_empty() {
            state.args.events.publish_data(
                EventKind::ScheduleOutcome,
                &format!("job:{}", plan.job_id),
                &format!("task #{} caught up {} run(s)", plan.job_id, plan.runs.len()),
                json!({"job_id": plan.job_id, "agent": job.row.agent, "outcome": "caught_up", "count": plan.runs.len()}),
            );
        }
        if let Some(text) = plan.notice
            && (had_record || !plan.runs.is_empty())
        {
            let (agent, target) = (job.row.agent.clone(), job.row.target_chat.clone());
            tell(state, &agent, target.as_deref(), text).await;
        }
    }
    Ok(())
}

/// Sends the first queued fire of each due job that has nothing running.
async fn dispatch(
    state: &mut SchedulerState,
    due: &[i64],
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let mut starts: Vec<(i64, Queued, JobRow)> = Vec::new();
    let mut unknown_agent: Vec<(i64, Queued)> = Vec::new();
    for id in due {
        let Some(job) = state.jobs.get_mut(id) else {
            continue;
        };
        if job.running.is_some() || !job.accepts_work() {
            continue;
        }
        let Some(first) = job
            .queue
            .first()
            .filter(|queued| queued.due_ms <= now)
            .cloned()
        else {
            continue;
        };
        if !state
            .args
            .agents
            .iter()
            .any(|spec| spec.name == job.row.agent)
        {
            job.queue.remove(0);
            unknown_agent.push((*id, first));
            continue;
        }
        if state
            .args
            .registry
            .lookup::<AgentMsg>(&names::agent(&job.row.agent))
            .is_none()
        {
            // Booting or restarting: try again shortly (not a failed attempt).
            job.queue[0].due_ms = now + AGENT_RETRY;
            let queued = job.queue.remove(0);
            job.enqueue(queued);
            continue;
        }
        job.queue.remove(0);
        let mut row = job.row.clone();
        row.last_run_ms = Some(now);
        starts.push((*id, first, row));
    }
    for (id, queued) in unknown_agent {
        let agent = state
            .jobs
            .get(&id)
            .map(|job| job.row.agent.clone())
            .unwrap_or_default();
        let reason = format!(
            "agent `{agent}` is not defined (no file in the agents directory names it); \
             pause or cancel this task"
        );
        finish(
            state,
            id,
            queued.job_run_id,
            queued.attempt,
            Ending::Failed(reason),
            None,
            now,
        )
        .await?;
    }
    if starts.is_empty() {
        return Ok(());
    }
    let writes: Vec<(i64, JobRow)> = starts
        .iter()
        .map(|(_, queued, row)| (queued.job_run_id, row.clone()))
        .collect();
    let started: Vec<bool> = state
        .args
        .store
        .write(move |conn| {
            let mut started = Vec::with_capacity(writes.len());
            for (job_run_id, row) in &writes {
                let ok = queries::start_run(conn, *job_run_id, now)?;
                if ok {
                    queries::save_job(conn, row, now)?;
                }
                started.push(ok);
            }
            Ok(started)
        })
        .await?;
    let run_timeout =
        i64::try_from(state.args.config.run_timeout.0.as_millis()).unwrap_or(1_800_000);
    for ((id, queued, row), ok) in starts.into_iter().zip(started) {
        if !ok {
            continue;
        }
        let Some(job) = state.jobs.get_mut(&id) else {
            continue;
        };
        job.row.last_run_ms = row.last_run_ms;
        let sent = send_run(&state.args, job, queued.job_run_id, queued.fire_ms, now);
        job.running = Some(Running {
            job_run_id: queued.job_run_id,
            fire_ms: queued.fire_ms,
            attempt: queued.attempt,
            check_at_ms: now + if sent { run_timeout } else { AGENT_RETRY },
        });
        state.dispatched += 1;
        state.args.events.publish_data(
            EventKind::ScheduleFired,
            &format!("job:{id}"),
            &format!(
                "task #{id} \"{}\" fired (due {}, attempt {})",
                job.row.name,
                format_local(queued.fire_ms, job.zone),
                queued.attempt
            ),
            json!({"job_id": id, "job_run_id": queued.job_run_id, "agent": job.row.agent, "fire_ms": queued.fire_ms, "started_ms": now, "attempt": queued.attempt}),
        );
    }
    Ok(())
}

/// The start of a fire's message: how its arrival in the session is recognised.
pub fn prompt_marker(job_run_id: i64) -> String {
    format!("[Scheduled run {job_run_id} of task #")
}

/// The correlation id of a fire's run.
pub fn correlation(job_run_id: i64) -> String {
    format!("job-run:{job_run_id}")
}

fn prompt_text(job: &Job, job_run_id: i64, fire_ms: i64, now: i64) -> String {
    let late = if now - fire_ms > 60_000 {
        format!(", running late at {}", format_local(now, job.zone))
    } else {
        String::new()
    };
    format!(
        "{}{} \"{}\", due {}{late}]\n{}",
        prompt_marker(job_run_id),
        job.row.id,
        job.row.name,
        format_local(fire_ms, job.zone),
        job.row.prompt
    )
}

/// Sends the fire's message to its agent; `false` when the agent is not reachable.
fn send_run(args: &SchedulerArgs, job: &Job, job_run_id: i64, fire_ms: i64, now: i64) -> bool {
    let Some(agent) = args
        .registry
        .lookup::<AgentMsg>(&names::agent(&job.row.agent))
    else {
        return false;
    };
    let inbound = Inbound {
        agent: job.row.agent.clone(),
        chat: ChatKey::schedule(job.row.id),
        sender: Sender::new("scheduler", "Scheduler"),
        text: prompt_text(job, job_run_id, fire_ms, now),
        attachments: Vec::new(),
        source: InboundSource::Schedule {
            job_id: job.row.id,
            job_run_id,
        },
        received_ms: now,
        context: None,
        correlation: Some(correlation(job_run_id)),
    };
    agent.cast(AgentMsg::Inbound(inbound)).is_ok()
}

/// Looks in the database where a running fire whose check time came got to.
async fn reconcile(
    state: &mut SchedulerState,
    id: i64,
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let Some(job) = state.jobs.get(&id) else {
        return Ok(());
    };
    let Some(running) = job
        .running
        .clone()
        .filter(|running| running.check_at_ms <= now)
    else {
        return Ok(());
    };
    let (agent, chat) = (job.row.agent.clone(), ChatKey::schedule(id).to_string());
    let marker = prompt_marker(running.job_run_id);
    let found = state
        .args
        .store
        .read(move |conn| {
            let Some(run_id) = queries::delivered_prompt(conn, &agent, &chat, &marker)? else {
                return Ok(None);
            };
            let run = match run_id {
                Some(run_id) => runs::get(conn, run_id)?,
                None => None,
            };
            Ok(Some((run_id, run)))
        })
        .await?;
    let run_timeout =
        i64::try_from(state.args.config.run_timeout.0.as_millis()).unwrap_or(1_800_000);
    match found {
        None => {
            // The message never reached the session (a crash between recording the fire and
            // sending it, or the agent was down): the same fire is sent again.
            let Some(job) = state.jobs.get_mut(&id) else {
                return Ok(());
            };
            let sent = send_run(&state.args, job, running.job_run_id, running.fire_ms, now);
            if sent {
                tracing::info!(
                    job = id,
                    job_run = running.job_run_id,
                    "a scheduled run's message was sent again (it had not reached the agent)"
                );
            }
            if let Some(running) = job.running.as_mut() {
                running.check_at_ms = now + if sent { run_timeout } else { AGENT_RETRY };
            }
        }
        Some((Some(run_id), Some(run))) if !run.status.is_open() => {
            // The run ended but its answer never reached this actor.
            let text = run.outcome.clone().unwrap_or_default();
            let ending = if run.status == RunStatus::Succeeded {
                Ending::Succeeded(text)
            } else {
                Ending::Failed(format!("{}: {}", run.status.as_str(), shorten(&text, 300)))
            };
            finish(
                state,
                id,
                running.job_run_id,
                running.attempt,
                ending,
                Some(run_id),
                now,
            )
            .await?;
        }
        Some(_) => {
            // In the session (pending or running): the session resumes it and answers.
            if let Some(running) = state.jobs.get_mut(&id).and_then(|job| job.running.as_mut()) {
                running.check_at_ms = now + run_timeout;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Answers.

enum Ending {
    Succeeded(String),
    Failed(String),
    /// The job was cancelled while the run went on.
    Cancelled,
}

async fn on_deliver(
    state: &mut SchedulerState,
    outbound: Outbound,
) -> Result<(), ActorProcessingErr> {
    let OutEvent::Final { text, .. } = &outbound.event else {
        return Ok(());
    };
    if outbound.chat.kind() != ChatKind::Schedule {
        return Ok(());
    }
    let Ok(id) = outbound.chat.id().parse::<i64>() else {
        return Ok(());
    };
    let Some(running) = state.jobs.get(&id).and_then(|job| job.running.clone()) else {
        tracing::debug!(
            job = id,
            "an answer for a task with no run in progress (already recorded)"
        );
        return Ok(());
    };
    if let Some(correlation_id) = &outbound.correlation
        && *correlation_id != correlation(running.job_run_id)
    {
        tracing::debug!(job = id, %correlation_id, "an answer for an earlier run of the task; ignored");
        return Ok(());
    }
    let status = match outbound.run_id {
        Some(run_id) => state
            .args
            .store
            .read(move |conn| runs::get(conn, run_id))
            .await?
            .map(|run| run.status),
        None => None,
    };
    let now = state.now();
    let cancelled = state
        .jobs
        .get(&id)
        .is_some_and(|job| job.row.status == "cancelled");
    let ending = match status {
        _ if cancelled => Ending::Cancelled,
        None | Some(RunStatus::Succeeded) => Ending::Succeeded(text.clone()),
        Some(status) => Ending::Failed(format!("{}: {}", status.as_str(), shorten(text, 300))),
    };
    finish(
        state,
        id,
        running.job_run_id,
        running.attempt,
        ending,
        outbound.run_id,
        now,
    )
    .await?;
    reschedule(state, id);
    Ok(())
}

/// Ends a fire: records it, updates the job (failures, retry, failing), delivers the answer.
async fn finish(
    state: &mut SchedulerState,
    id: i64,
    job_run_id: i64,
    attempt: i64,
    ending: Ending,
    run_id: Option<i64>,
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let Some(job) = state.jobs.get(&id) else {
        return Ok(());
    };
    let retries = &state.args.config.retry_backoff;
    let mut row = job.row.clone();
    let target = row.target_chat.as_deref().and_then(ChatKey::parse);
    let (status, detail, retry_at, answer, became_failing) = match &ending {
        Ending::Succeeded(text) => {
            row.consecutive_failures = 0;
            row.failing = false;
            row.last_outcome = Some("succeeded".into());
            (
                "succeeded",
                shorten(text, 500),
                None,
                Some(text.clone()),
                false,
            )
        }
        Ending::Failed(reason) => {
            row.consecutive_failures += 1;
            row.last_outcome = Some("failed".into());
            let retry = usize::try_from(attempt)
                .ok()
                .and_then(|attempt| retries.get(attempt.saturating_sub(1)))
                .filter(|_| job.accepts_work() && attempt > 0)
                .map(|wait| now + i64::try_from(wait.0.as_millis()).unwrap_or(i64::MAX / 4));
            // Out of retries: failing (a paused or cancelled job is not retried, nor flagged).
            let out_of_retries = retry.is_none() && job.accepts_work();
            let became_failing = out_of_retries && !row.failing;
            if out_of_retries {
                row.failing = true;
            }
            ("failed", shorten(reason, 500), retry, None, became_failing)
        }
        Ending::Cancelled => {
            row.last_outcome = Some("cancelled".into());
            (
                "skipped",
                "the task was cancelled during its run".to_string(),
                None,
                None,
                false,
            )
        }
    };
    let failing_notice = became_failing.then(|| {
        let next = row
            .next_run_ms
            .map(|next| format!("its next run is at {}", format_local(next, job.zone)))
            .unwrap_or_else(|| "it has no further runs".to_string());
        format!(
            "Scheduled task #{id} \"{}\" failed {} time(s) in a row and is marked failing ({}); {next}. \
             Last error: {}",
            row.name,
            row.consecutive_failures,
            if retries.is_empty() { "retries are off".to_string() } else { format!("after {} retries", retries.len()) },
            shorten(&detail, 200)
        )
    });
    let deliver_text = match (&answer, &failing_notice) {
        (Some(answer), _) => Some(answer.clone()),
        (None, Some(notice)) => Some(notice.clone()),
        _ => None,
    };
    let outbox_target = target
        .as_ref()
        .filter(|chat| chat.kind() == ChatKind::Telegram && deliver_text.is_some())
        .map(|chat| chat.as_str().to_string());
    let (agent, fire_ms) = (
        row.agent.clone(),
        job.running.as_ref().map_or(0, |r| r.fire_ms),
    );
    let fire_ms = if fire_ms == 0 {
        state
            .args
            .store
            .read(move |conn| queries::job_run(conn, job_run_id))
            .await?
            .map_or(now, |run| run.fire_ms)
    } else {
        fire_ms
    };
    let stored_row = row.clone();
    let stored_text = deliver_text.clone();
    let written = state
        .args
        .store
        .write(move |conn| {
            if !queries::finish_run(conn, job_run_id, status, run_id, Some(&detail), now)? {
                return Ok(None);
            }
            let retry_id = match retry_at {
                Some(due_ms) => queries::insert_run(
                    conn,
                    &NewJobRun {
                        job_id: stored_row.id,
                        fire_ms,
                        attempt: attempt + 1,
                        trigger: "retry",
                        status: "queued",
                        due_ms,
                        missed_count: None,
                        detail: None,
                    },
                    now,
                )?,
                None => None,
            };
            queries::save_job(conn, &stored_row, now)?;
            let outbox_id = match (&outbox_target, &stored_text) {
                (Some(chat), Some(text)) => Some(runs::enqueue_reply(
                    conn,
                    &agent,
                    chat,
                    None,
                    text,
                    &[],
                    now,
                )?),
                _ => None,
            };
            Ok(Some((retry_id, outbox_id)))
        })
        .await?;
    let Some(job) = state.jobs.get_mut(&id) else {
        return Ok(());
    };
    if job
        .running
        .as_ref()
        .is_some_and(|running| running.job_run_id == job_run_id)
    {
        job.running = None;
    }
    let Some((retry_id, outbox_id)) = written else {
        return Ok(());
    };
    job.row = row;
    if let (Some(retry_id), Some(due_ms)) = (retry_id, retry_at) {
        job.enqueue(Queued {
            job_run_id: retry_id,
            fire_ms,
            attempt: attempt + 1,
            due_ms,
        });
    }
    let outcome = if became_failing { "failing" } else { status };
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} run {job_run_id} {outcome}"),
        json!({"job_id": id, "job_run_id": job_run_id, "agent": job.row.agent, "outcome": outcome, "run_id": run_id, "retry_at_ms": retry_at}),
    );
    if job.row.status == "cancelled" && job.running.is_none() {
        state.jobs.remove(&id);
        return Ok(());
    }
    if let (Some(target), Some(text)) = (target, deliver_text) {
        deliver(
            &state.args.registry,
            &job.row.agent,
            &target,
            run_id,
            text,
            outbox_id,
        );
    }
    Ok(())
}

/// Shows `text` in a job's target chat: Telegram through the outbox (the bot marks it
/// delivered), local chats as a notice. A silent job's notices go to Studio's events only.
async fn tell(state: &SchedulerState, agent: &str, target: Option<&str>, text: String) {
    let Some(target) = target.and_then(ChatKey::parse) else {
        return;
    };
    let outbox_id = if target.kind() == ChatKind::Telegram {
        let (agent, chat, body) = (agent.to_string(), target.to_string(), text.clone());
        let now = state.now();
        match state
            .args
            .store
            .write(move |conn| runs::enqueue_reply(conn, &agent, &chat, None, &body, &[], now))
            .await
        {
            Ok(id) => Some(id),
            Err(error) => {
                tracing::warn!(%error, "could not queue a scheduler notice");
                return;
            }
        }
    } else {
        None
    };
    deliver(&state.args.registry, agent, &target, None, text, outbox_id);
}

fn deliver(
    registry: &Registry,
    agent: &str,
    target: &ChatKey,
    run_id: Option<i64>,
    text: String,
    outbox_id: Option<i64>,
) {
    let event = match target.kind() {
        ChatKind::Telegram => OutEvent::Final { text, outbox_id },
        _ => OutEvent::Notice { text },
    };
    crate::channels::deliver(
        registry,
        Outbound {
            agent: agent.to_string(),
            chat: target.clone(),
            run_id,
            correlation: None,
            event,
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Managing jobs.

/// A checked schedule: the spec, its policy, the anchor to store.
struct Checked {
    spec: ScheduleSpec,
    policy: MissedPolicy,
    timezone: String,
    anchor_ms: i64,
    next_run_ms: i64,
}

fn check_schedule(
    config: &SchedulerConfig,
    kind: &str,
    expression: &str,
    timezone: &str,
    missed_policy: &str,
    now: i64,
) -> Result<Checked, String> {
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
    Ok(Checked {
        next_run_ms: first.timestamp_millis(),
        spec,
        policy,
        timezone: zone.name().to_string(),
        anchor_ms,
    })
}

fn check_text(field: &str, text: &str, max: usize) -> Result<String, String> {
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

fn check_target(target: &Option<ChatKey>) -> Result<(), String> {
    match target {
        Some(chat) if matches!(chat.kind(), ChatKind::Schedule | ChatKind::Handoff) => Err(
            format!("answers can go to a Telegram or local chat, not `{chat}`"),
        ),
        _ => Ok(()),
    }
}

async fn create(
    myself: &ActorRef<SchedulerMsg>,
    state: &mut SchedulerState,
    new_job: NewJob,
) -> Result<JobView, String> {
    let now = state.now();
    if !state
        .args
        .agents
        .iter()
        .any(|spec| spec.name == new_job.agent)
    {
        return Err(format!("no agent is named `{}`", new_job.agent));
    }
    let prompt = check_text("prompt", &new_job.prompt, MAX_PROMPT_CHARS)?;
    let name = if new_job.name.trim().is_empty() {
        shorten(
            &prompt
                .split_whitespace()
                .take(6)
                .collect::<Vec<_>>()
                .join(" "),
            MAX_NAME_CHARS,
        )
    } else {
        check_text("name", &new_job.name, MAX_NAME_CHARS)?
    };
    check_target(&new_job.target)?;
    let checked = check_schedule(
        &state.args.config,
        &new_job.kind,
        &new_job.expression,
        &new_job.timezone,
        &new_job.missed_policy,
        now,
    )?;
    let agent = new_job.agent.clone();
    let live = state
        .args
        .store
        .read(move |conn| queries::live_count(conn, &agent))
        .await
        .map_err(|error| error.to_string())?;
    let max = u64::from(state.args.config.max_jobs_per_agent);
    if live >= max {
        return Err(format!(
            "{} already has {live} tasks (the limit is {max}, [scheduler] max_jobs_per_agent); cancel one first",
            new_job.agent
        ));
    }
    let mut row = JobRow {
        id: 0,
        agent: new_job.agent,
        name,
        prompt,
        target_chat: new_job.target.map(|chat| chat.to_string()),
        kind: checked.spec.kind().as_str().to_string(),
        expression: new_job.expression.trim().to_string(),
        timezone: checked.timezone,
        anchor_ms: checked.anchor_ms,
        missed_policy: checked.policy.to_string(),
        status: "active".to_string(),
        next_run_ms: Some(checked.next_run_ms),
        last_run_ms: None,
        last_outcome: None,
        consecutive_failures: 0,
        failing: false,
        created_by: new_job.created_by,
        created_in: new_job.created_in.map(|chat| chat.to_string()),
        created_ms: now,
        updated_ms: now,
    };
    let stored = row.clone();
    arm_by(myself, state, checked.next_run_ms);
    row.id = state
        .args
        .store
        .write(move |conn| queries::insert_job(conn, &stored, now))
        .await
        .map_err(|error| error.to_string())?;
    let job = Job {
        zone: zone_of(&row.timezone),
        row,
        spec: checked.spec,
        policy: checked.policy,
        queue: Vec::new(),
        running: None,
    };
    let view = job.view(now);
    let id = job.row.id;
    state.jobs.insert(id, job);
    reschedule(state, id);
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} created: {}", view.schedule),
        json!({"job_id": id, "agent": view.agent, "outcome": "created"}),
    );
    Ok(view)
}

/// The job `id` as `scope` may see it (from memory, or the database for finished jobs).
async fn find(state: &SchedulerState, scope: &JobScope, id: i64) -> Result<JobRow, String> {
    let row = match state.jobs.get(&id) {
        Some(job) => Some(job.row.clone()),
        None => state
            .args
            .store
            .read(move |conn| queries::job(conn, id))
            .await
            .map_err(|error| error.to_string())?,
    };
    match row {
        Some(row) if scope.allows(&row) => Ok(row),
        _ => Err(format!(
            "there is no task #{id} (list_tasks shows the tasks)"
        )),
    }
}

fn view_of_row(row: JobRow, now: i64) -> Result<JobView, String> {
    Job::from_row(row).map(|job| job.view(now))
}

async fn list(
    state: &SchedulerState,
    scope: &JobScope,
    include_finished: bool,
) -> Result<Vec<JobView>, String> {
    let agent = match scope {
        JobScope::Agent(agent) => Some(agent.clone()),
        JobScope::Operator => None,
    };
    let rows = state
        .args
        .store
        .read(move |conn| queries::list_jobs(conn, agent.as_deref(), include_finished, 500))
        .await
        .map_err(|error| error.to_string())?;
    let now = state.now();
    Ok(rows
        .into_iter()
        .filter_map(|row| match state.jobs.get(&row.id) {
            Some(job) => Some(job.view(now)),
            None => view_of_row(row, now).ok(),
        })
        .collect())
}

async fn get(
    state: &SchedulerState,
    scope: &JobScope,
    id: i64,
    history: u32,
) -> Result<(JobView, Vec<JobRunRow>), String> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let view = match state.jobs.get(&id) {
        Some(job) => job.view(now),
        None => view_of_row(row, now)?,
    };
    let limit = history.clamp(1, 100);
    let runs = state
        .args
        .store
        .read(move |conn| queries::history(conn, id, limit))
        .await
        .map_err(|error| error.to_string())?;
    Ok((view, runs))
}

/// Ends the queued fires of a job as skipped (pause, cancel, a changed schedule).
async fn drop_queue(state: &mut SchedulerState, id: i64, reason: &str) -> Result<(), String> {
    let Some(job) = state.jobs.get_mut(&id) else {
        return Ok(());
    };
    let queued: Vec<i64> = job
        .queue
        .drain(..)
        .map(|queued| queued.job_run_id)
        .collect();
    if queued.is_empty() {
        return Ok(());
    }
    let reason = reason.to_string();
    let now = state.now();
    state
        .args
        .store
        .write(move |conn| {
            for job_run_id in &queued {
                queries::finish_run(conn, *job_run_id, "skipped", None, Some(&reason), now)?;
            }
            Ok(())
        })
        .await
        .map_err(|error| error.to_string())
}

async fn save(state: &SchedulerState, row: &JobRow) -> Result<(), String> {
    let (row, now) = (row.clone(), state.now());
    state
        .args
        .store
        .write(move |conn| queries::save_job(conn, &row, now))
        .await
        .map_err(|error| error.to_string())
}

fn live_job<'a>(state: &'a mut SchedulerState, row: &JobRow) -> Result<&'a mut Job, String> {
    match row.status.as_str() {
        "done" | "cancelled" => Err(format!(
            "task #{} is {} and cannot be changed; schedule a new one",
            row.id, row.status
        )),
        _ => state
            .jobs
            .get_mut(&row.id)
            .ok_or_else(|| format!("task #{} is not loaded (its schedule is broken)", row.id)),
    }
}

async fn update(
    myself: &ActorRef<SchedulerMsg>,
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
    change: JobChange,
) -> Result<JobView, String> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let config = state.args.config.clone();
    let job = live_job(state, &row)?;
    let mut next = job.row.clone();
    if let Some(name) = &change.name {
        next.name = check_text("name", name, MAX_NAME_CHARS)?;
    }
    if let Some(prompt) = &change.prompt {
        next.prompt = check_text("prompt", prompt, MAX_PROMPT_CHARS)?;
    }
    if let Some(target) = &change.target {
        check_target(target)?;
        next.target_chat = target.as_ref().map(ChatKey::to_string);
    }
    let schedule_changed = change.kind.is_some()
        || change.expression.is_some()
        || change.timezone.is_some()
        || change.missed_policy.is_some();
    let mut checked = None;
    if schedule_changed {
        let kind = change.kind.clone().unwrap_or_else(|| next.kind.clone());
        let expression = change
            .expression
            .clone()
            .unwrap_or_else(|| next.expression.clone());
        let timezone = change
            .timezone
            .clone()
            .unwrap_or_else(|| next.timezone.clone());
        let policy = change
            .missed_policy
            .clone()
            .unwrap_or_else(|| next.missed_policy.clone());
        let result = check_schedule(&config, &kind, &expression, &timezone, &policy, now)?;
        let only_policy =
            change.kind.is_none() && change.expression.is_none() && change.timezone.is_none();
        next.kind = result.spec.kind().as_str().to_string();
        next.expression = expression.trim().to_string();
        next.timezone = result.timezone.clone();
        next.missed_policy = result.policy.to_string();
        if !only_policy {
            next.anchor_ms = result.anchor_ms;
            if next.status == "active" {
                next.next_run_ms = Some(result.next_run_ms);
            }
        }
        checked = Some((result, only_policy));
    }
    if let Some(next_run_ms) = next.next_run_ms {
        arm_by(myself, state, next_run_ms);
    }
    save(state, &next).await?;
    let Some(job) = state.jobs.get_mut(&id) else {
        return Err(format!("task #{id} disappeared"));
    };
    if let Some((result, only_policy)) = checked {
        job.policy = result.policy;
        if !only_policy {
            job.spec = result.spec;
            job.zone = zone_of(&result.timezone);
        }
    }
    job.row = next;
    let view = job.view(now);
    reschedule(state, id);
    Ok(view)
}

async fn set_paused(
    myself: &ActorRef<SchedulerMsg>,
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
    paused: bool,
) -> Result<JobView, String> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let job = live_job(state, &row)?;
    let mut next = job.row.clone();
    let mut missed_notice = None;
    if paused {
        if next.status == "paused" {
            return Ok(job.view(now));
        }
        next.status = "paused".into();
        next.next_run_ms = None;
    } else {
        if next.status == "active" {
            return Ok(job.view(now));
        }
        next.status = "active".into();
        next.next_run_ms = job
            .spec
            .next_after(crate::clock::to_datetime(now))
            .map(|time| time.timestamp_millis());
        if next.next_run_ms.is_none() {
            // A one-shot whose time passed while it was paused: recorded, never silent.
            next.status = "done".into();
            next.last_outcome = Some("missed".into());
            missed_notice =
                Some("its time passed while it was paused; recorded as missed".to_string());
        }
    }
    if paused {
        drop_queue(state, id, "the task was paused").await?;
    }
    if let Some(next_run_ms) = next.next_run_ms {
        arm_by(myself, state, next_run_ms);
    }
    let stored = next.clone();
    let record = missed_notice.clone();
    let anchor = stored.anchor_ms;
    let fire_ms = match &state.jobs.get(&id).map(|job| &job.spec) {
        Some(ScheduleSpec::At(at)) => at.timestamp_millis(),
        _ => anchor,
    };
    state
        .args
        .store
        .write(move |conn| {
            if let Some(detail) = &record {
                queries::insert_run(
                    conn,
                    &NewJobRun {
                        job_id: stored.id,
                        fire_ms,
                        attempt: 0,
                        trigger: "record",
                        status: "missed",
                        due_ms: fire_ms,
                        missed_count: Some(1),
                        detail: Some(detail),
                    },
                    now,
                )?;
            }
            queries::save_job(conn, &stored, now)
        })
        .await
        .map_err(|error| error.to_string())?;
    let Some(job) = state.jobs.get_mut(&id) else {
        return Err(format!("task #{id} disappeared"));
    };
    job.row = next;
    let view = job.view(now);
    let outcome = if paused { "paused" } else { "resumed" };
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} {outcome}"),
        json!({"job_id": id, "agent": view.agent, "outcome": outcome}),
    );
    reschedule(state, id);
    Ok(view)
}

async fn cancel(state: &mut SchedulerState, scope: &JobScope, id: i64) -> Result<JobView, String> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let job = live_job(state, &row)?;
    let mut next = job.row.clone();
    next.status = "cancelled".into();
    next.next_run_ms = None;
    let running = job.running.is_some();
    drop_queue(state, id, "the task was cancelled").await?;
    save(state, &next).await?;
    let view = {
        let Some(job) = state.jobs.get_mut(&id) else {
            return Err(format!("task #{id} disappeared"));
        };
        job.row = next;
        job.view(now)
    };
    if running {
        // The run in progress is stopped; its answer is recorded but not delivered.
        if let Some(agent) = state
            .args
            .registry
            .lookup::<AgentMsg>(&names::agent(&view.agent))
        {
            let _ = agent.cast(AgentMsg::Command(
                ChatKey::schedule(id),
                SessionCommand::Stop,
            ));
        }
    } else {
        state.jobs.remove(&id);
    }
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} cancelled"),
        json!({"job_id": id, "agent": view.agent, "outcome": "cancelled"}),
    );
    Ok(view)
}

fn stats(state: &SchedulerState) -> SchedulerStats {
    SchedulerStats {
        jobs: state.jobs.len(),
        heap_entries: state.heap.len(),
        timers_armed: usize::from(
            state
                .timer
                .as_ref()
                .is_some_and(|(_, timer)| !timer.is_finished()),
        ),
        timer_at_ms: state.timer.as_ref().map(|(at, _)| *at),
        ticks: state.ticks,
        dispatched: state.dispatched,
        running: state
            .jobs
            .values()
            .filter(|job| job.running.is_some())
            .count(),
        queued: state.jobs.values().map(|job| job.queue.len()).sum(),
        next_wake_ms: state.jobs.values().filter_map(Job::wake_ms).min(),
    }
}

/// Jobs whose stored schedule no longer reads (say, a timezone a newer tz database renamed):
/// paused, marked failing and reported — never dropped silently.
async fn pause_broken(
    state: &SchedulerState,
    broken: Vec<(JobRow, String)>,
) -> Result<(), ActorProcessingErr> {
    let now = state.now();
    for (row, error) in &broken {
        tracing::error!(job = row.id, %error, "a stored task's schedule does not read; it is paused");
        state.args.events.publish_data(
            EventKind::ScheduleOutcome,
            &format!("job:{}", row.id),
            &format!(
                "task #{} paused: its schedule does not read ({error})",
                row.id
            ),
            json!({"job_id": row.id, "agent": row.agent, "outcome": "broken"}),
        );
    }
    state
        .args
        .store
        .write(move |conn| {
            for (row, _) in &broken {
                let mut row = row.clone();
                row.status = "paused".into();
                row.next_run_ms = None;
                row.failing = true;
                queries::save_job(conn, &row, now)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Text.

fn zone_of(name: &str) -> Tz {
    parse_timezone(name).unwrap_or(Tz::UTC)
}

/// `2026-01-05 09:00 CET (Mon)` in the job's timezone.
pub fn format_local(ms: i64, zone: Tz) -> String {
    let time: DateTime<Utc> = crate::clock::to_datetime(ms);
    time.with_timezone(&zone)
        .format("%Y-%m-%d %H:%M:%S %Z (%a)")
        .to_string()
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut short: String = text.chars().take(max).collect();
    short.push('…');
    short
}

fn describe_missed(outcome: &MissedOutcome, zone: Tz, late: bool) -> String {
    let samples: Vec<String> = outcome
        .missed_samples
        .iter()
        .map(|time| format_local(time.timestamp_millis(), zone))
        .collect();
    let when = if late {
        "while the scheduler was not running"
    } else {
        "while the scheduler was busy"
    };
    format!(
        "{} fire time(s) passed {when}: {}",
        outcome.missed,
        samples.join(", ")
    )
}

/// What the target chat is told when a job was due while the daemon was down.
fn late_notice(job: &Job, outcome: &MissedOutcome, policy: MissedPolicy) -> Option<String> {
    let runs = outcome.run_now.len();
    let missed = outcome.missed.value();
    if runs == 0 && missed == 0 {
        return None;
    }
    let head = format!("Scheduled task #{} \"{}\"", job.row.id, job.row.name);
    let samples = |times: &[DateTime<Utc>]| -> String {
        times
            .iter()
            .map(|time| format_local(time.timestamp_millis(), job.zone))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ran = match (policy, runs) {
        (_, 0) => String::new(),
        (MissedPolicy::CatchUp { .. }, _) => {
            format!(
                " Catching up {runs} run(s) now: {}.",
                samples(&outcome.run_now)
            )
        }
        _ => format!(
            " Running the one due at {} now, late.",
            samples(&outcome.run_now)
        ),
    };
    let missed_text = match (missed, policy) {
        (0, _) => String::new(),
        (_, MissedPolicy::Skip) => format!(
            " {} run(s) were skipped, as its missed-run policy says: {}.",
            outcome.missed,
            samples(&outcome.missed_samples)
        ),
        _ => format!(
            " {} run(s) were missed: {}.",
            outcome.missed,
            samples(&outcome.missed_samples)
        ),
    };
    Some(format!(
        "{head} was due while I was offline.{ran}{missed_text}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_of_one_run_is_not_a_prefix_of_another() {
        assert!(!prompt_marker(123).starts_with(&prompt_marker(12)));
        assert!(!prompt_marker(12).starts_with(&prompt_marker(123)));
    }

    #[test]
    fn schedules_are_checked_with_reasons() {
        let config = SchedulerConfig::default();
        let now = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        let cases = [
            ("cron", "0 9 * *", "UTC", "", "field"),
            (
                "cron",
                "0 9 * * 1-5",
                "Mars/Olympus",
                "",
                "unknown timezone",
            ),
            ("every", "10s", "UTC", "", "min_interval"),
            ("cron", "* * * * * *", "UTC", "", "min_interval"),
            ("at", "2020-01-01 09:00", "UTC", "", "in the past"),
            ("weekly", "x", "UTC", "", "unknown schedule kind"),
            ("cron", "0 9 * * *", "UTC", "sometimes", "missed-run policy"),
        ];
        for (kind, expression, zone, policy, expected) in cases {
            let error = check_schedule(&config, kind, expression, zone, policy, now)
                .err()
                .unwrap_or_default();
            assert!(error.contains(expected), "{kind} {expression}: {error}");
        }
        let ok = check_schedule(
            &config,
            "cron",
            "0 9 * * 0",
            "Europe/Berlin",
            "catch_up",
            now,
        )
        .unwrap();
        // 2026-01-04 is a Sunday; 09:00 in Berlin is 08:00 UTC.
        assert_eq!(ok.next_run_ms, 1_767_513_600_000);
        assert_eq!(ok.policy.to_string(), "catch_up max_runs=3 window=1day");
    }
}
