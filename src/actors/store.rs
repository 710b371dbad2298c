//! Store: the tree's owner of the database writer.
//!
//! The [`Store`] handle (shared by everyone) sends write jobs to a dedicated writer thread; this
//! actor owns that thread's lifecycle. `pre_start` (re)starts the writer — opening the database and
//! applying migrations, the kind of setup whose failure must abort boot. A periodic check notices a
//! dead writer and fails the actor, so the supervisor restarts it. `post_stop` lets the writer
//! commit everything queued, then stops it: the store is the last child of the root to stop.
//!
//! Background job: WAL checkpoint every `checkpoint_every` (60 s; owner: this actor; cancelled with
//! it; resumes with the actor; idempotent). It runs on the writer thread; one that cannot run is
//! reported by the store's health (one log line, a `warning` event, Studio's Overview). With it
//! the writer's page cache and statements are released, idle readers closed and the heap trimmed,
//! so an idle daemon keeps no database memory (BENCHMARKS.md, "idle RSS").
//!
//! The store's health (`store::health`, set by the writer thread) is watched here and each change
//! published: entering a bad state (or a new cause) as a `warning` event, every change as a
//! `store_health` event, so open Studio pages refresh; the log line is the writer's (one per
//! change).
//!
//! Restart policy: permanent.

use std::time::Duration;

/// How often the WAL is checkpointed and idle database memory handed back.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(60);

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::events::{EventBus, EventKind};
use crate::store::Store;
use crate::store::health::{Report, State};

pub enum StoreMsg {
    /// Periodic: checkpoint the WAL and check the writer is alive.
    Tick,
    /// `PRAGMA integrity_check` rows (`["ok"]` when sound).
    IntegrityCheck(RpcReplyPort<Result<Vec<String>, String>>),
}

#[derive(Clone)]
pub struct StoreArgs {
    pub store: Store,
    pub events: EventBus,
    pub checkpoint_every: Duration,
}

pub struct StoreActor;

pub struct StoreState {
    store: Store,
    ticker: Option<tokio::task::JoinHandle<()>>,
    health_watch: tokio::task::JoinHandle<()>,
}

impl Actor for StoreActor {
    type Msg = StoreMsg;
    type State = StoreState;
    type Arguments = StoreArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: StoreArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        args.store.start_writer()?;
        let ticker = myself.send_interval(args.checkpoint_every, || StoreMsg::Tick);
        let health_watch = tokio::spawn(publish_health(args.store.clone(), args.events));
        Ok(StoreState {
            store: args.store,
            ticker: Some(ticker),
            health_watch,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StoreMsg::Tick => {
                if !state.store.writer_alive() {
                    return Err("the database writer thread stopped".into());
                }
                let store = state.store.clone();
                tokio::spawn(async move {
                    // A failure is logged once and reported by the store's health.
                    if let Err(error) = store.checkpoint().await {
                        tracing::debug!(%error, "database checkpoint failed");
                    }
                    // The checkpoint also emptied the writer's caches; with the idle readers
                    // closed, the heap's free pages go back to the system.
                    let readers = store.close_idle_readers();
                    let trimmed = crate::resident::trim_heap();
                    tracing::trace!(readers, trimmed, "handed idle database memory back");
                });
            }
            StoreMsg::IntegrityCheck(reply) => {
                let store = state.store.clone();
                tokio::spawn(async move {
                    let result = store
                        .integrity_check()
                        .await
                        .map_err(|error| error.to_string());
                    let _ = reply.send(result);
                });
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(ticker) = state.ticker.take() {
            ticker.abort();
        }
        state.health_watch.abort();
        let store = state.store.clone();
        // Joining the writer blocks until the queue is committed: keep it off the async workers.
        let _ = tokio::task::spawn_blocking(move || store.stop_writer()).await;
        Ok(())
    }
}

/// Publishes each change of the store's health until the store's handle is dropped.
async fn publish_health(store: Store, events: EventBus) {
    let mut changes = store.subscribe_health();
    let mut told: Option<String> = None;
    while changes.changed().await.is_ok() {
        let report: Report = changes.borrow_and_update().clone();
        let sentence = report.sentence().or_else(|| report.warning());
        if sentence == told {
            continue;
        }
        match &sentence {
            Some(sentence) => events.publish(EventKind::Warning, "database", sentence),
            None => events.publish(
                EventKind::StoreHealth,
                "database",
                "database: writes commit again",
            ),
        }
        if let Some(sentence) = &sentence {
            let state = if report.state == State::Healthy {
                "warning"
            } else {
                report.state.as_str()
            };
            events.publish(
                EventKind::StoreHealth,
                "database",
                &format!("{state}: {sentence}"),
            );
        }
        told = sentence;
    }
}
