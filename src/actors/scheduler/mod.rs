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
//!    Telegram target: a chat key, so a job made in a forum topic answers in that topic) the
//!    reply's outbox row are written in one transaction, then the answer is handed to the
//!    channel. A failed run is queued again after `[scheduler] retry_backoff` (30 s, 1 min,
//!    5 min); after the last retry the job is marked failing and its chat is told.
//!
//! Every job stores its zone; previews, reminders, missed-run notices and Studio show fire times
//! in it. Run now (the operator's `RunNow`, `manual.rs`) records a fire with trigger `manual`
//! and dispatches it like any other. Checks and pause / resume / cancel transitions are
//! `crate::jobs`', shared with `clawvisor jobs` on a stopped daemon (which writes the row with
//! its audit row; this actor loads it at its next boot). The operator's changes are audited
//! (`job.created`, `job.updated`, `job.paused`, `job.resumed`, `job.run_now`, `job.cancelled`):
//! by Studio's routes once this actor stored them, by the CLI in the change's transaction.
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

mod finish;
mod fire;
mod jobs;
mod manual;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::config::{AgentSpec, SchedulerConfig};
use crate::domain::{
    ChatKey, ChatKind, Inbound, InboundSource, OutEvent, Outbound, Sender, SessionCommand,
};
use crate::events::{EventBus, EventData, EventKind};
use crate::jobs::{
    JobChange, JobScope, JobView, MAX_NAME_CHARS, MAX_PROMPT_CHARS, NewJob, PREVIEW_COUNT,
};
use crate::protocol::agent::AgentMsg;
use crate::protocol::scheduler::{SchedulerError, SchedulerMsg, SchedulerStats};
use crate::registry::Registry;
use crate::schedule::format::{format_local, shorten, zone_of};
use crate::schedule::{MissedOutcome, MissedPolicy, ScheduleSpec};
use crate::store::Store;
use crate::store::runs::{self, RunStatus};
use crate::store::schedules::{
    self as queries, JobRow, JobRunRow, JobRunStatus, JobStatus, NewJobRun,
};

/// How soon to try again to dispatch to an agent that is not running (booting, restarting).
const AGENT_RETRY: i64 = 500;
/// Fires handled per transaction in one tick.
const BATCH: usize = 512;

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

type Timer = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<SchedulerEvent>>>;

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
        !matches!(self.row.status, JobStatus::Paused | JobStatus::Cancelled)
    }

    /// When this job next needs the scheduler: its next regular fire, its first queued fire
    /// (when nothing runs), or the check of its running fire.
    fn wake_ms(&self) -> Option<i64> {
        let regular = (self.row.status == JobStatus::Active)
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
        let upcoming = if row.status == JobStatus::Active {
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
            schedule: self.spec.describe_in(self.zone),
            missed_policy: row.missed_policy.clone(),
            status: row.status,
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

/// What makes the scheduler act: others' requests and its one timer.
#[expect(
    clippy::large_enum_variant,
    reason = "requests are almost every message; boxing them to shrink the timer's would cost an allocation each"
)]
pub enum SchedulerEvent {
    Request(SchedulerMsg),
    /// The timer fired.
    Tick,
}

wraps_requests!(SchedulerEvent, SchedulerMsg);

impl Actor for Scheduler {
    type Msg = SchedulerEvent;
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
            if run.status == JobRunStatus::Running {
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
        myself.cast(SchedulerEvent::Tick)?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SchedulerEvent::Tick => {
                if let Some((_, timer)) = state.timer.take() {
                    timer.abort();
                }
                on_tick(state).await?;
            }
            SchedulerEvent::Request(request) => on_request(&myself, state, request).await?,
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

/// A request from outside: a scheduled run's output, or a job to create, list, read or change.
async fn on_request(
    myself: &ActorRef<SchedulerEvent>,
    state: &mut SchedulerState,
    request: SchedulerMsg,
) -> Result<(), ActorProcessingErr> {
    match request {
        SchedulerMsg::Deliver(outbound) => on_deliver(state, outbound).await?,
        SchedulerMsg::Create(new_job, reply) => {
            let result = create(myself, state, new_job).await;
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
            let result = update(myself, state, &scope, id, change).await;
            let _ = reply.send(result);
        }
        SchedulerMsg::SetPaused {
            scope,
            id,
            paused,
            reply,
        } => {
            let result = set_paused(myself, state, &scope, id, paused).await;
            let _ = reply.send(result);
        }
        SchedulerMsg::Cancel { scope, id, reply } => {
            let result = cancel(myself, state, &scope, id).await;
            let _ = reply.send(result);
        }
        SchedulerMsg::RunNow { scope, id, reply } => {
            let result = run_now(state, &scope, id).await;
            let _ = reply.send(result);
        }
        SchedulerMsg::Stats(reply) => {
            let _ = reply.send(stats(state));
        }
    }
    Ok(())
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
fn arm(myself: &ActorRef<SchedulerEvent>, state: &mut SchedulerState) {
    let now = state.now();
    let max_sleep = i64::try_from(state.args.config.max_sleep.0.as_millis()).unwrap_or(60_000);
    let wake = earliest(state).unwrap_or(i64::MAX).min(now + max_sleep);
    arm_by(myself, state, wake);
}

/// Makes sure the timer fires no later than `wake_ms`. Called before a write that gives a job an
/// earlier wake-up, so the timer is right while the write is in flight (its `Tick` is handled
/// after the change anyway: the actor handles one message at a time).
fn arm_by(myself: &ActorRef<SchedulerEvent>, state: &mut SchedulerState, wake_ms: i64) {
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
    let timer = myself.send_after(delay, || SchedulerEvent::Tick);
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

use finish::*;
use fire::*;
use jobs::*;
use manual::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::check::check_schedule;

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
