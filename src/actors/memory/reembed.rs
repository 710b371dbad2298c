//! Re-embedding after a model change: every live memory without a vector of the current model
//! is embedded again, in batches, by a task, while memory keeps answering (issue #33).
//!
//! At start (and on `Reindex`) the actor counts the memories that need it; when there are any it
//! starts one task that pages through them in id order, embeds a batch, stores the vectors
//! through the writer (only where the text is unchanged: an edit meanwhile embedded it already)
//! and sends them to the actor, which puts them into the index and announces the progress
//! (`memory_changed` with `EventData::MemoryReindex`; Studio's Memory page shows it).
//!
//! Invariants: one task at a time; a restart (or a failure, which is reported) resumes where the
//! stored vectors end, because "needs embedding" is read from SQLite each batch; nothing is
//! embedded twice by one run (the cursor only moves forward).

use ractor::ActorRef;

use super::{MemoryEvent, MemoryState};
use crate::events::{EventData, EventKind};
use crate::memory::index::{IndexParams, VectorIndex, normalize};
use crate::protocol::memory::ReindexProgress;
use crate::store::memory as queries;

/// Memories read, embedded and stored per step.
const BATCH: u32 = 32;

/// One embedded batch: `(id, owner, vector)` of the memories whose vector was stored.
pub type Embedded = Vec<(i64, String, Vec<f32>)>;

/// Starts re-embedding when some live memory lacks a vector of the current model and no
/// re-embedding runs yet.
pub(super) async fn start_if_needed(myself: &ActorRef<MemoryEvent>, state: &mut MemoryState) {
    let Some(embedder) = state.client.clone() else {
        return;
    };
    if state
        .reindex
        .as_ref()
        .is_some_and(|progress| progress.running)
    {
        return;
    }
    let model = state.model.clone();
    let counted = {
        let model = model.clone();
        state
            .args
            .store
            .read(move |conn| queries::count_needing_embedding(conn, &model))
            .await
    };
    let total = match counted {
        Ok(0) => return,
        Ok(total) => total,
        Err(error) => {
            tracing::warn!(%error, "memory: cannot count the memories to embed; trying at the next start");
            return;
        }
    };
    tracing::info!(
        total,
        %model,
        "memory: embedding memories with the current model"
    );
    state.reindex = Some(ReindexProgress {
        model: model.clone(),
        total,
        done: 0,
        running: true,
        error: None,
    });
    announce(state);
    let store = state.args.store.clone();
    let myself = myself.clone();
    tokio::spawn(async move {
        let mut after_id = 0;
        let outcome = loop {
            let read = {
                let model = model.clone();
                store
                    .read(move |conn| queries::needing_embedding(conn, &model, after_id, BATCH))
                    .await
            };
            let batch = match read {
                Ok(batch) if batch.is_empty() => break Ok(()),
                Ok(batch) => batch,
                Err(error) => break Err(format!("reading memories failed: {error}")),
            };
            after_id = batch.last().map_or(after_id, |(id, _, _)| *id);
            let texts: Vec<String> = batch.iter().map(|(_, _, text)| text.clone()).collect();
            let vectors = match embedder.embed(texts).await {
                Ok(vectors) => vectors,
                Err(error) => break Err(format!("the embeddings model failed: {error}")),
            };
            let stored = store_batch(&store, &model, batch, vectors).await;
            match stored {
                Ok(embedded) => {
                    if myself.cast(MemoryEvent::Reembedded(embedded)).is_err() {
                        return;
                    }
                }
                Err(error) => break Err(format!("storing the vectors failed: {error}")),
            }
        };
        let _ = myself.cast(MemoryEvent::ReembedEnded(outcome));
    });
}

/// Stores one batch's vectors (unit length), each only if its memory's text is unchanged.
async fn store_batch(
    store: &crate::store::Store,
    model: &str,
    batch: Vec<(i64, String, String)>,
    vectors: Vec<Vec<f32>>,
) -> Result<Embedded, String> {
    let model = model.to_string();
    store
        .write(move |conn| {
            let mut embedded = Vec::new();
            for ((id, owner, text), vector) in batch.into_iter().zip(vectors) {
                let Ok(unit) = normalize(&vector, vector.len()) else {
                    continue;
                };
                if queries::set_embedding(conn, id, &text, &unit, &model)? {
                    embedded.push((id, owner, unit));
                }
            }
            Ok(embedded)
        })
        .await
        .map_err(|error| error.to_string())
}

/// A batch was stored: into the index, and the progress announced.
pub(super) fn on_batch(state: &mut MemoryState, embedded: Embedded) {
    for (id, owner, vector) in &embedded {
        if state.index.is_none() {
            match VectorIndex::new(vector.len(), IndexParams::default()) {
                Ok(index) => state.index = Some(index),
                Err(error) => {
                    tracing::warn!(%error, "memory: cannot create the index; full-text search until the next start");
                    return;
                }
            }
        }
        if let Some(index) = state.index.as_mut() {
            index.remove(*id);
            if let Err(error) = index.insert(*id, owner, vector) {
                tracing::warn!(id, %error, "memory: embedded but not indexed; the next rebuild will");
            }
        }
    }
    state.dirty = true;
    if let Some(progress) = state.reindex.as_mut() {
        progress.done = (progress.done + embedded.len() as u64).min(progress.total);
    }
    announce(state);
}

/// The task ended: done, or stopped with the reason (it resumes at the next start).
pub(super) fn on_end(state: &mut MemoryState, outcome: Result<(), String>) {
    if let Some(progress) = state.reindex.as_mut() {
        progress.running = false;
        match outcome {
            Ok(()) => {
                progress.done = progress.total;
                tracing::info!(memories = progress.total, model = %progress.model, "memory: every memory is embedded with the current model");
            }
            Err(error) => {
                tracing::warn!(%error, "memory: embedding memories stopped; it resumes at the next start or `reindex`");
                progress.error = Some(error);
            }
        }
    }
    announce(state);
}

/// `memory_changed` with the progress, for Studio's Memory page.
fn announce(state: &MemoryState) {
    let Some(progress) = &state.reindex else {
        return;
    };
    let detail = format!(
        "embedding memories with {}: {} of {}",
        progress.model, progress.done, progress.total
    );
    state.args.events.publish_data(
        EventKind::MemoryChanged,
        "memory:reindex",
        &detail,
        EventData::MemoryReindex {
            model: progress.model.clone(),
            done: progress.done,
            total: progress.total,
            running: progress.running,
            error: progress.error.clone(),
        },
    );
}
