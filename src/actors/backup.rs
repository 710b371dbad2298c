//! Backup: runs the scheduled backups of `[backup]` (absent without a `schedule`).
//!
//! One `send_after` to the next run (recomputed from the schedule after every run, never longer
//! than an hour so that a wall-clock jump is noticed); the backup itself — snapshot, archive,
//! prune — runs on the blocking pool and reports back by message; the actor then records the
//! outcome in `backups`. A run still going when the next is due is not doubled: that tick is
//! skipped.
//!
//! Background job: the backup timer. Owner: this actor; table: `backups`; cancelled with the
//! actor; on restart the next run is computed again from the schedule; idempotent (each run writes
//! a new archive under a fresh name).
//!
//! Restart policy: permanent (the root's).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::backup::record::{self, Outcome};
use crate::backup::schedule::BackupPlan;
use crate::registry::ServiceName;
use crate::store::Store;

/// The actor's name.
pub const NAME: ServiceName<BackupMsg> = ServiceName::fixed("backup");
/// The longest single sleep: the next run is recomputed at least this often.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

pub enum BackupMsg {
    /// The timer: run a backup if one is due, then re-arm.
    Tick,
    /// A run finished (on the blocking pool).
    Finished(Outcome),
}

#[derive(Clone)]
pub struct BackupArgs {
    pub store: Store,
    pub plan: Arc<BackupPlan>,
}

pub struct BackupActor;

pub struct BackupState {
    store: Store,
    plan: Arc<BackupPlan>,
    /// When the next run is due (milliseconds since the epoch).
    due_ms: Option<i64>,
    running: bool,
    timer: Option<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<BackupMsg>>>>,
}

impl BackupState {
    fn arm(&mut self, myself: &ActorRef<BackupMsg>) {
        if let Some(timer) = self.timer.take() {
            timer.abort();
        }
        let now = Utc::now();
        if self.due_ms.is_none() {
            self.due_ms = self.plan.next_run(now).map(|next| next.timestamp_millis());
        }
        let Some(due_ms) = self.due_ms else {
            return;
        };
        let wait = u64::try_from(due_ms - now.timestamp_millis()).unwrap_or(0);
        let delay = Duration::from_millis(wait).min(MAX_SLEEP);
        self.timer = Some(myself.send_after(delay, || BackupMsg::Tick));
    }
}

impl Actor for BackupActor {
    type Msg = BackupMsg;
    type State = BackupState;
    type Arguments = BackupArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: BackupArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = BackupState {
            store: args.store,
            plan: args.plan,
            due_ms: None,
            running: false,
            timer: None,
        };
        state.arm(&myself);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BackupMsg::Tick => {
                let now_ms = crate::clock::now_ms();
                if state.due_ms.is_some_and(|due| due <= now_ms) {
                    state.due_ms = None;
                    if !state.running {
                        state.running = true;
                        let plan = state.plan.clone();
                        let reply = myself.clone();
                        tokio::task::spawn_blocking(move || {
                            let _ = reply.send_message(BackupMsg::Finished(run(&plan, now_ms)));
                        });
                    }
                }
                state.arm(&myself);
            }
            BackupMsg::Finished(outcome) => {
                state.running = false;
                match &outcome.error {
                    None => tracing::info!(
                        file = %outcome.file,
                        bytes = outcome.size_bytes,
                        pruned = outcome.pruned.len(),
                        "scheduled backup written"
                    ),
                    Some(error) => tracing::warn!(%error, "scheduled backup failed"),
                }
                state
                    .store
                    .write(move |conn| record::insert(conn, &outcome))
                    .await?;
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }
}

/// One scheduled backup, as the row that records it.
fn run(plan: &BackupPlan, started_ms: i64) -> Outcome {
    let file = plan
        .dir
        .join(crate::backup::schedule::archive_name(started_ms))
        .display()
        .to_string();
    let result = plan.run_once(started_ms);
    let finished_ms = crate::clock::now_ms();
    match result {
        Ok((report, pruned)) => Outcome {
            started_ms,
            finished_ms,
            file: report.path.display().to_string(),
            size_bytes: report.archive_bytes,
            entries: report.entries.len() + 1,
            error: None,
            pruned: pruned
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
        },
        Err(error) => Outcome {
            started_ms,
            finished_ms,
            file,
            size_bytes: 0,
            entries: 0,
            error: Some(error.to_string()),
            pruned: Vec::new(),
        },
    }
}

/// The child spec under the root, or `None` when no schedule is configured or this start runs
/// no scheduled work (`chat`, `eval`).
pub fn child_spec(context: &super::context::RootContext) -> Option<super::supervise::ChildSpec> {
    let plan = BackupPlan::from_config(&context.loaded);
    (context.options.scheduler && plan.schedule.is_some()).then(|| {
        super::supervise::actor_spec(
            &context.registry,
            &NAME,
            context.loaded.config.supervision.policy(),
            || BackupActor,
            BackupArgs {
                store: context.store.clone(),
                plan: Arc::new(plan),
            },
        )
    })
}
