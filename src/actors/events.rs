//! Events: persists runtime events and keeps the live view of the supervision tree, and each
//! bot's last completed poll (told directly by the bots, in memory only: no write per poll).
//!
//! A task owned by this actor drains the [`EventBus`] into `runtime_events` in batches (every
//! 500 ms or 256 events) and trims the table to `[store] events_retention` rows. Lifecycle events
//! are also forwarded to the actor, which keeps the latest status of every actor for Studio's tree.
//!
//! Background job: the persister task (owner: this actor; stopped in `post_stop` after a final
//! flush; on restart it resubscribes — events published while it was down are not persisted,
//! which is acceptable for a history table and said here so nobody relies on it). After a restart
//! of this actor, a bot's last poll is unknown until its next poll completes.
//!
//! Restart policy: permanent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::{broadcast, oneshot};

use crate::events::{EventBus, EventKind, EventReceiver, RuntimeEvent};
use crate::protocol::events::{ActorView, EventsMsg, TreeSnapshot};
use crate::store::Store;
use crate::store::events::EventToStore;

const FLUSH_EVERY: Duration = Duration::from_millis(500);
const FLUSH_BATCH: usize = 256;

#[derive(Clone)]
pub struct EventsArgs {
    pub bus: EventBus,
    pub store: Store,
    pub retention: u64,
}

pub struct EventsActor;

pub struct EventsState {
    actors: BTreeMap<String, ActorView>,
    bot_polls: BTreeMap<String, i64>,
    channel_status: BTreeMap<String, (i64, String)>,
    boot_complete: bool,
    stop_persister: Option<oneshot::Sender<()>>,
    persister: Option<tokio::task::JoinHandle<()>>,
}

/// What makes the events actor act: others' requests and the bus's events its persister sees.
pub enum EventsEvent {
    Request(EventsMsg),
    /// A lifecycle or boot event from the bus (the bus's own shared copy).
    Observed(Arc<RuntimeEvent>),
}

wraps_requests!(EventsEvent, EventsMsg);

impl Actor for EventsActor {
    type Msg = EventsEvent;
    type State = EventsState;
    type Arguments = EventsArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: EventsArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let receiver = args.bus.subscribe();
        let (stop_tx, stop_rx) = oneshot::channel();
        let persister = tokio::spawn(persist(
            receiver,
            stop_rx,
            args.store,
            args.retention,
            myself,
        ));
        Ok(EventsState {
            actors: BTreeMap::new(),
            bot_polls: BTreeMap::new(),
            channel_status: BTreeMap::new(),
            boot_complete: false,
            stop_persister: Some(stop_tx),
            persister: Some(persister),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            EventsEvent::Observed(event) => observe(state, &event),
            EventsEvent::Request(EventsMsg::BotPolled { agent, at_ms }) => {
                let last = state.bot_polls.entry(agent).or_insert(at_ms);
                *last = (*last).max(at_ms);
            }
            EventsEvent::Request(EventsMsg::Snapshot(reply)) => {
                let _ = reply.send(TreeSnapshot {
                    boot_complete: state.boot_complete,
                    actors: state.actors.values().cloned().collect(),
                    bot_polls: state.bot_polls.clone(),
                    channel_status: state.channel_status.clone(),
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
        if let Some(stop) = state.stop_persister.take() {
            let _ = stop.send(());
        }
        if let Some(task) = state.persister.take() {
            let _ = tokio::time::timeout(Duration::from_secs(3), task).await;
        }
        Ok(())
    }
}

fn observe(state: &mut EventsState, event: &RuntimeEvent) {
    match event.kind {
        EventKind::BootComplete => state.boot_complete = true,
        EventKind::ShutdownStarted => state.boot_complete = false,
        EventKind::BotStatus => {
            state
                .channel_status
                .insert(event.subject.clone(), (event.at_ms, event.detail.clone()));
        }
        kind if kind.is_lifecycle() => {
            let view = state
                .actors
                .entry(event.subject.clone())
                .or_insert_with(|| ActorView {
                    id: event.subject.clone(),
                    status: "starting",
                    restarts: 0,
                    last_error: None,
                    since_ms: event.at_ms,
                });
            view.since_ms = event.at_ms;
            view.status = match kind {
                EventKind::ActorStarted => "running",
                EventKind::ActorFailed => "failed",
                EventKind::ActorRestarting => {
                    view.restarts += 1;
                    "restarting"
                }
                EventKind::ActorDegraded => "degraded",
                EventKind::ActorEscalated => "escalated",
                _ => "stopped",
            };
            if kind == EventKind::ActorFailed {
                view.last_error = Some(event.detail.clone());
            }
        }
        _ => {}
    }
}

async fn persist(
    mut receiver: EventReceiver,
    mut stop: oneshot::Receiver<()>,
    store: Store,
    retention: u64,
    events_actor: ActorRef<EventsEvent>,
) {
    let mut buffer: Vec<Arc<RuntimeEvent>> = Vec::new();
    let mut ticker = tokio::time::interval(FLUSH_EVERY);
    loop {
        tokio::select! {
            received = receiver.recv() => match received {
                Ok(event) => {
                    let channel_status = event.kind == EventKind::BotStatus && event.subject.starts_with("channel:");
                    if channel_status || event.kind.is_lifecycle() || matches!(event.kind, EventKind::BootComplete | EventKind::ShutdownStarted) {
                        let _ = events_actor.cast(EventsEvent::Observed(Arc::clone(&event)));
                    }
                    buffer.push(event);
                    if buffer.len() >= FLUSH_BATCH {
                        flush(&store, &mut buffer, retention).await;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "event history fell behind; some events were not stored");
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = ticker.tick() => flush(&store, &mut buffer, retention).await,
            _ = &mut stop => {
                while let Ok(event) = receiver.try_recv() {
                    buffer.push(event);
                }
                break;
            }
        }
    }
    flush(&store, &mut buffer, retention).await;
}

async fn flush(store: &Store, buffer: &mut Vec<Arc<RuntimeEvent>>, retention: u64) {
    if buffer.is_empty() {
        return;
    }
    // Stored as the JSON Studio's live stream sends, so history and the live view agree.
    let batch: Vec<EventToStore> = std::mem::take(buffer)
        .into_iter()
        .map(|event| EventToStore {
            data: crate::studio::event_json::stored_data(&event.data),
            event,
        })
        .collect();
    if let Err(error) = store
        .write_recoverable(move |conn| crate::store::events::append(conn, &batch, retention))
        .await
    {
        // While the store cannot commit it has said so once, with the cause and the path.
        if store.writes_commit() {
            tracing::warn!(%error, "could not store runtime events");
        } else {
            tracing::debug!(%error, "could not store runtime events while the store holds");
        }
    }
}
