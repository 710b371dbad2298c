//! Store: the tree's owner of the database writer.
//!
//! The [`Store`] handle (shared by everyone) sends write jobs to a dedicated writer thread; this
//! actor owns that thread's lifecycle. `pre_start` (re)starts the writer — opening the database and
//! applying migrations, the kind of setup whose failure must abort boot. A periodic check notices a
//! dead writer and fails the actor, so the supervisor restarts it. `post_stop` lets the writer
//! commit everything queued, then stops it: the store is the last child of the root to stop.
//!
//! Background job: WAL checkpoint every `checkpoint_every` (60 s; owner: this actor; cancelled with
//! it; resumes with the actor; idempotent).
//!
//! Restart policy: permanent.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::store::Store;

pub enum StoreMsg {
    /// Periodic: checkpoint the WAL and check the writer is alive.
    Tick,
    /// `PRAGMA integrity_check` rows (`["ok"]` when sound).
    IntegrityCheck(RpcReplyPort<Result<Vec<String>, String>>),
}

#[derive(Clone)]
pub struct StoreArgs {
    pub store: Store,
    pub checkpoint_every: Duration,
}

pub struct StoreActor;

pub struct StoreState {
    store: Store,
    ticker: Option<tokio::task::JoinHandle<()>>,
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
        Ok(StoreState {
            store: args.store,
            ticker: Some(ticker),
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
                    if let Err(error) = store.checkpoint().await {
                        tracing::warn!(%error, "database checkpoint failed");
                    }
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
        let store = state.store.clone();
        // Joining the writer blocks until the queue is committed: keep it off the async workers.
        let _ = tokio::task::spawn_blocking(move || store.stop_writer()).await;
        Ok(())
    }
}
